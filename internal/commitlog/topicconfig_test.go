package commitlog

import (
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// segment.bytes and segment.ms changed on a live topic apply to the open
// log from the next append; a segment smaller than the batch bound is
// raised to it, zero takes the default, and a bad value changes nothing.
func TestSetSegmentLimitsAppliesToTheOpenLog(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{MaxBatchBytes: 2048})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3 {
		appendAsLeader(l, testBatches(1, 1, 600, now.UnixMilli()), 0)
	}
	if l.Segments() != 1 {
		t.Fatalf("%d segments under the default limits", l.Segments())
	}
	if err := l.SetSegmentLimits(14, 0); err != nil {
		t.Fatal(err)
	}
	appendAsLeader(l, testBatches(1, 1, 600, now.UnixMilli()), 0)
	appendAsLeader(l, testBatches(1, 1, 600, now.UnixMilli()), 0)
	if l.Segments() != 2 {
		t.Fatalf("segment.bytes 14 (raised to the 2048-byte batch bound): %d segments, want 2", l.Segments())
	}
	if err := l.SetSegmentLimits(0, time.Hour); err != nil {
		t.Fatal(err)
	}
	appendAsLeader(l, testBatches(1, 1, 600, now.Add(time.Hour).UnixMilli()), 0)
	if l.Segments() != 3 {
		t.Fatalf("segment.ms one hour: %d segments, want 3", l.Segments())
	}
	if err := l.SetSegmentLimits(1<<40, 0); err == nil {
		t.Fatal("a segment of 1 TiB was accepted")
	}
	appendAsLeader(l, testBatches(1, 1, 600, now.Add(time.Hour).UnixMilli()), 0)
	if l.Segments() != 3 {
		t.Fatalf("the refused limits changed the log: %d segments", l.Segments())
	}
}

// max.compaction.lag.ms forces a pass whatever the dirty ratio once the
// first dirty segment's newest record is older than the lag (KIP-354).
func TestMaxCompactionLagForcesAPass(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentAge: time.Hour})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		batch := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: start.Add(time.Duration(i) * time.Hour).UnixMilli(),
			Records: []record.Record{{Key: []byte("k"), Value: []byte(strings.Repeat("v", i+1))}}})
		if _, err := appendAsLeader(l, batch, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	config := DefaultCleanerConfig()
	config.MinCleanableDirtyRatio, config.MaxCompactionLagMs = 1, 3*time.Hour.Milliseconds()
	clean := func(now time.Time) CleanResult {
		result, err := l.Clean(CleanOptions{Config: config, UpTo: l.LogEndOffset(), NowMs: now.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		return result
	}
	if result := clean(start.Add(3*time.Hour - time.Millisecond)); result.Cleaned {
		t.Fatalf("cleaned before the lag passed: %+v", result)
	}
	if result := clean(start.Add(3 * time.Hour)); !result.Cleaned {
		t.Fatalf("not cleaned once the first dirty segment was older than max.compaction.lag.ms: %+v", result)
	}
	config.MinCompactionLagMs = config.MaxCompactionLagMs + 1
	if err := config.Validate(); err == nil {
		t.Fatal("max.compaction.lag.ms below min.compaction.lag.ms was accepted")
	}
}
