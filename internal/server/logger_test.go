package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A sampled log writes the first lines of an interval, counts the rest,
// and reports the count with the first line of a later interval.
func TestSampledLogSuppressesAndCounts(t *testing.T) {
	logs := &recordingHandler{}
	log := newSampledLog(slog.New(logs), slog.LevelWarn, "refused")
	now := time.Unix(1000, 0)
	log.now = func() time.Time { return now }
	for range 100 {
		log.Log("client", "a")
	}
	if written := logs.count("refused"); written != defaultLogSampleLines {
		t.Fatalf("100 events wrote %d lines in one interval; want %d", written, defaultLogSampleLines)
	}
	now = now.Add(defaultLogSampleInterval)
	log.Log("client", "b")
	last := logs.lines[len(logs.lines)-1]
	if want := "suppressed=90"; !strings.Contains(last, want) || !strings.HasPrefix(last, "WARN") {
		t.Fatalf("the next interval's first line is %q; want a warning with %s", last, want)
	}
}
