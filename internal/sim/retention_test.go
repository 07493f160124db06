package sim

import (
	"fmt"
	"testing"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// scriptLog is broker id's replica and log of the script's partition.
func scriptLog(t *testing.T, s *Script, id metadata.BrokerID) (*replica.Replica, *commitlog.Log) {
	t.Helper()
	b := s.w.broker(id)
	if b.node == nil {
		t.Fatalf("b%d has no node", id)
	}
	r, log, ok := b.node.Replica(s.partition)
	if !ok {
		t.Fatalf("b%d hosts no %s", id, s.partition)
	}
	return r, log
}

// Retention by time runs on the simulator's virtual clock, on the leader
// and on the follower, through the same broker tick as in tide serve: a
// minute of virtual time after they were written, whole segments go, the
// log start moves on both replicas, never past the high watermark, and
// the checker (which allows committed records to be deleted, invariant 8)
// finds nothing wrong. Records younger than retention.ms stay.
func TestRetentionByTimeOnVirtualTime(t *testing.T) {
	const retentionMs = 60_000 // 6,000 ticks of 10 ms
	s, err := NewScript(ScriptConfig{Brokers: 2, Seed: 3, RetentionMs: retentionMs, SegmentBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateTopic("t", []metadata.BrokerID{1, 2}, 2))
	for range 40 {
		must(s.Produce(1, 5, replica.AcksAll))
		must(s.Tick(5))
	}
	must(s.Tick(20))
	leader, leaderLog := scriptLog(t, s, 1)
	_, followerLog := scriptLog(t, s, 2)
	oldEnd := leaderLog.LogEndOffset()
	if oldEnd != 200 || leader.HighWatermark() != 200 || leaderLog.Segments() < 4 || followerLog.Segments() < 4 {
		t.Fatalf("before retention: leader %s, follower %s", leaderLog, followerLog)
	}
	// Fresh records, written after the first ones are half a minute old.
	must(s.Tick(3000))
	for range 10 {
		must(s.Produce(1, 5, replica.AcksAll))
		must(s.Tick(5))
	}
	deleted := func() bool { return leaderLog.LogStartOffset() > 0 && followerLog.LogStartOffset() > 0 }
	if _, ok := s.RunUntil(deleted, 4000); !ok {
		t.Fatalf("retention deleted nothing after a virtual minute: leader %s, follower %s", leaderLog, followerLog)
	}
	must(s.Tick(200))
	for _, log := range []*commitlog.Log{leaderLog, followerLog} {
		start := log.LogStartOffset()
		if start <= 0 || start > oldEnd || start > log.HighWatermark() || log.LogEndOffset() != 250 {
			t.Errorf("after retention: %s; want the log start in (0, %d], the records after it kept", log, oldEnd)
		}
		if found, ok, err := log.OffsetForTimestamp(0, log.HighWatermark()); err != nil || !ok || found.Offset < start {
			t.Errorf("the earliest record by time: %+v %v %v, log start %d", found, ok, err, start)
		}
	}
	must(s.ListOffsets(1))
	if v := s.Check(); v != nil {
		t.Fatalf("checker: %s", v)
	}
	if v := s.Recover(); v != nil {
		t.Fatalf("did not recover: %s", v)
	}
	t.Log(fmt.Sprint(leaderLog, " / ", followerLog))
}

// Retention by size, on both replicas: once a partition's log passes
// retention.bytes, its oldest whole segments go until it is under it
// again (but no further), and only committed ones.
func TestRetentionBySizeOnVirtualTime(t *testing.T) {
	const retentionBytes = 3000
	s, err := NewScript(ScriptConfig{Brokers: 2, Seed: 5, RetentionBytes: retentionBytes, SegmentBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateTopic("t", []metadata.BrokerID{1, 2}, 2))
	for range 60 {
		must(s.Produce(1, 5, replica.AcksAll))
		must(s.Tick(5))
	}
	must(s.Tick(300)) // three retention checks
	for _, id := range []metadata.BrokerID{1, 2} {
		_, log := scriptLog(t, s, id)
		size := log.SizeBytes()
		if log.LogStartOffset() == 0 || size < retentionBytes || size > retentionBytes+1024 || log.LogEndOffset() != 300 {
			t.Errorf("b%d after retention by size: %s, %d bytes; want the log start moved and %d to %d bytes kept",
				id, log, size, retentionBytes, retentionBytes+1024)
		}
	}
	if v := s.Check(); v != nil {
		t.Fatalf("checker: %s", v)
	}
}
