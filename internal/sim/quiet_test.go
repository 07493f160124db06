package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// quietPartitionAckTicks is the bound on an acks=all write's round trip in
// TestQuietPartitionAcksWithinRoundTrips: the produce, the leader's answer
// to the followers' parked fetch, their syncs and next fetch, and the
// answer, one tick each; far below the followers'
// long poll (replicaFetchMaxWaitTicks).
const quietPartitionAckTicks = 5

// A leader that also leads an idle partition with the same followers acks
// an acks=all write within a few round trips. A follower that takes
// records asks for more only after syncing them; its fetcher used to send
// the idle partition's next Fetch at once, which the leader parked for the
// whole long poll, and with one Fetch in flight per source the partition
// whose fetch would let the leader answer waited behind it (500 ms per
// write on tide dev). The fetcher's next Fetch now waits, at most
// fetcher.MaxReadyWaitTicks, for every partition the last answer served to
// ask again.
func TestQuietPartitionAcksWithinRoundTrips(t *testing.T) {
	s, err := NewScript(ScriptConfig{Brokers: 3, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	replicas := []metadata.BrokerID{1, 2, 3}
	if err := s.CreateTopic("t", replicas, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.createTopic("idle", replicas, 3); err != nil {
		t.Fatal(err)
	}
	s.Tick(3 * replicaFetchMaxWaitTicks) // every follower fetches both
	for write := range 5 {
		if err := s.Produce(1, 1, replica.AcksAll); err != nil {
			t.Fatal(err)
		}
		ticks, ok := s.RunUntil(s.Answered, 100)
		if !ok || !s.produces[write].acked {
			t.Fatalf("write %d not acknowledged:\n%s", write+1, strings.Join(s.Output(), "\n"))
		}
		t.Logf("write %d acknowledged after %d ticks", write+1, ticks)
		if ticks > quietPartitionAckTicks {
			t.Errorf("write %d acknowledged after %d ticks, want at most %d", write+1, ticks, quietPartitionAckTicks)
		}
		s.Tick(int64(write)) // the writes land at different points of the long poll
	}
}
