package replica

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// TestFetcherLagIsTheLeadersHighWatermarkLessTheLogEnd: a follower's
// fetcher lag is unknown before its first answer, 0 while its log end is
// at or past the leader's high watermark, the difference once the leader
// answers with a high watermark above it, and unknown again in a new
// epoch until the new leader answers; a leader has none.
func TestFetcherLagIsTheLeadersHighWatermarkLessTheLogEnd(t *testing.T) {
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	r, err := New(config, LogState{})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: []metadata.BrokerID{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7})
	if lag, known := r.FetcherLag(); known {
		t.Fatalf("fetcher lag %d known before the leader answered", lag)
	}
	fetch := r.Ready().Messages
	batch := producerBatch(6)
	record.SetPartitionLeaderEpoch(batch, 5)
	r.HandleFetchResponse(FetchResponse{ID: fetch[0].Fetch.ID, HighWatermark: 4, Records: batch})
	if lag, known := r.FetcherLag(); !known || lag != 0 {
		t.Fatalf("fetcher lag %d (known %t) at log end 6 behind a high watermark of 4; want 0", lag, known)
	}
	fetch = r.Ready().Messages
	if len(fetch) != 1 || fetch[0].Fetch == nil {
		t.Fatalf("no next fetch: %+v", fetch)
	}
	// The leader has 20 committed records this follower has not fetched
	// yet (its answer was cut at its size limit).
	r.HandleFetchResponse(FetchResponse{ID: fetch[0].Fetch.ID, HighWatermark: 20, LogStartOffset: 0})
	if lag, known := r.FetcherLag(); !known || lag != 14 {
		t.Fatalf("fetcher lag %d (known %t) at log end 6 behind a high watermark of 20; want 14", lag, known)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: []metadata.BrokerID{1, 2, 3}, Leader: 3, LeaderEpoch: 6, PartitionEpoch: 8})
	if lag, known := r.FetcherLag(); known {
		t.Fatalf("fetcher lag %d known in a new epoch before the new leader answered", lag)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: []metadata.BrokerID{1, 2, 3}, Leader: 2, LeaderEpoch: 7, PartitionEpoch: 9})
	if lag, known := r.FetcherLag(); known {
		t.Fatalf("a leader has a fetcher lag: %d", lag)
	}
}
