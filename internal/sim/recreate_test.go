package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// recreateWithLaggingFollower writes two batches, [0, 2) and [2, 4), to
// topic t on brokers 1, 2, 3 (min.insync.replicas=3), holds broker 3's
// metadata, deletes t and creates it again on the same brokers, and writes
// newCount records to the new t with acks=all. Both incarnations are at
// leader epoch 0 with broker 1 leading, so no epoch tells them apart:
// only the topic id does. It runs 50 ticks (less than the replica lag
// time) and returns the script and its output.
func recreateWithLaggingFollower(t *testing.T, newCount int, legacy ...rules.Rule) (*Script, string) {
	t.Helper()
	s, err := NewScript(ScriptConfig{Brokers: 3, Seed: 5, Legacy: legacy})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s\n%s", err, strings.Join(out, "\n"), s.State())
		}
		out = append(out, s.Output()...)
	}
	step(s.CreateTopic("t", []metadata.BrokerID{1, 2, 3}, 3))
	for range 2 {
		step(s.Produce(1, 2, replica.AcksAll))
		if _, ok := s.RunUntil(s.Answered, 100); !ok {
			t.Fatalf("the old topic's write was not answered:\n%s", s.State())
		}
	}
	if _, ok := s.RunUntil(func() bool { hw, _, _, _ := s.Offsets(3); return hw == 4 }, 100); !ok {
		t.Fatalf("broker 3 did not reach the high watermark:\n%s", s.State())
	}
	step(s.Hold(ControllerEndpoint, 3))
	step(s.RecreateTopic([]metadata.BrokerID{1, 2, 3}, 3))
	step(s.Produce(1, newCount, replica.AcksAll))
	step(s.Tick(50))
	out = append(out, s.State())
	return s, strings.Join(out, "\n")
}

// A follower whose metadata lags behind a topic's deletion and re-creation
// must not count toward the new topic's high watermark: it still holds the
// old topic's records. With rule recreated-topic it fetches the old
// topic's id, the leader answers UNKNOWN_TOPIC_ID, and the write waits for
// broker 3 to learn of the new topic; then it is acknowledged, and every
// replica holds it. Without the rule (fetching by name), the leader
// truncates broker 3's copy of the old topic to the new log's end, 2, and
// counts it: the write is acknowledged while broker 3 holds the old
// topic's records at 0..1, below both high watermarks.
func TestRecreatedTopicDoesNotCountALaggingFollower(t *testing.T) {
	s, out := recreateWithLaggingFollower(t, 2)
	if s.Answered() {
		t.Fatalf("acknowledged while broker 3 could not hold the write:\n%s", out)
	}
	if v := s.Check(); v != nil {
		t.Fatalf("every rule on: %s\n%s", v, out)
	}
	if v := s.Recover(); v != nil {
		t.Fatalf("did not recover: %s\n%s\n%s", v, out, strings.Join(s.Output(), "\n"))
	}
	if !s.produces[2].acked {
		t.Fatalf("the new topic's write was never acknowledged:\n%s", strings.Join(s.Output(), "\n"))
	}

	s, out = recreateWithLaggingFollower(t, 2, rules.FetchByTopicID)
	if !s.Answered() || !s.produces[2].acked {
		t.Fatalf("rule off: the write was not acknowledged counting broker 3:\n%s", out)
	}
	if v := s.Check(); v == nil || v.Invariant != InvariantPrefixesDisagree {
		t.Fatalf("rule off: got %v, want broker 3's old records below the high watermark\n%s", v, out)
	}
}

// With rule recreated-topic off and the new log's end, 3, inside broker 3's
// old batch [2, 4), the truncation cannot be carried out: it takes broker
// 3's partition offline, and only that (the broker runs on, so the write
// is not acknowledged counting it). Once broker 3 learns of the new topic
// it replaces the failed partition, and the cluster converges.
func TestRecreatedTopicTruncationInsideABatch(t *testing.T) {
	s, out := recreateWithLaggingFollower(t, 3, rules.FetchByTopicID)
	if err := s.w.broker(3).node.Failed()[s.partition]; err == nil || !s.Running(3) {
		t.Fatalf("broker 3's partition is not failed (%v), or broker 3 stopped:\n%s", err, out)
	}
	if s.Answered() {
		t.Fatalf("acknowledged counting broker 3:\n%s", out)
	}
	if v := s.Recover(); v != nil {
		t.Fatalf("did not recover: %s\n%s\n%s", v, out, strings.Join(s.Output(), "\n"))
	}
}
