package main

import (
	"testing"
	"time"
)

// TestAcksSpellingsEverywhere: produce and bench take the same --acks
// values, Kafka's spellings among them (produce once refused leader and
// none, bench refused 1, 0 and -1).
func TestAcksSpellingsEverywhere(t *testing.T) {
	for text, want := range map[string]string{"all": "all", "-1": "all", "1": "leader", "leader": "leader", "0": "none", "none": "none", "ALL": "all"} {
		if got, err := parseAcks(text); err != nil || got != want {
			t.Errorf("parseAcks(%q) = %q, %v; want %q", text, got, err, want)
		}
		if _, err := (produceOptions{acks: text}).producerOptions(); err != nil {
			t.Errorf("produce --acks %q: %v", text, err)
		}
		command := newBenchCommand()
		bench := benchOptions{mode: "both", maxBufferedRecords: 1,
			benchLoad: benchLoad{clientOptions: clientOptions{timeout: time.Second}, acks: text, size: 100, records: 1, partitions: 1, replicationFactor: 1, producers: 1, consumers: 1}}
		if err := bench.validate(command); err != nil || bench.acks != want {
			t.Errorf("bench --acks %q: acks %q, %v; want %q", text, bench.acks, err, want)
		}
	}
	for _, bad := range []string{"2", "most", ""} {
		if _, err := parseAcks(bad); err == nil {
			t.Errorf("parseAcks(%q) was accepted", bad)
		}
	}
}
