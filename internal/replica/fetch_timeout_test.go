package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
)

// followerFetches returns the fetches a Ready sends.
func followerFetches(ready Ready) []FetchRequest {
	var fetches []FetchRequest
	for _, message := range ready.Messages {
		if message.Fetch != nil {
			fetches = append(fetches, *message.Fetch)
		}
	}
	return fetches
}

// A follower waits FetchTimeoutTicks for a fetch response, which the
// leader may hold in a long poll, but backs off only FetchRetryTicks after
// an error: the two are separate so that a parked fetch is not sent twice
// and a follower turned away retries soon.
func TestFetchTimeoutAndRetry(t *testing.T) {
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	config.FetchRetryTicks, config.FetchTimeoutTicks = 2, 10
	r, err := New(config, LogState{})
	if err != nil {
		t.Fatal(err)
	}
	r.SetBrokers([]metadata.BrokerState{{ID: 1, Epoch: 10}, {ID: 2, Epoch: 20}})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2},
		ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7})
	first := followerFetches(r.Ready())
	if len(first) != 1 {
		t.Fatalf("a new follower sent %d fetches, want 1", len(first))
	}
	for tick := 1; tick < 10; tick++ {
		r.Tick()
		if again := followerFetches(r.Ready()); len(again) != 0 {
			t.Fatalf("the fetch was sent again after %d ticks, before its timeout of 10", tick)
		}
	}
	r.Tick()
	timedOut := followerFetches(r.Ready())
	if len(timedOut) != 1 || timedOut[0].ID == first[0].ID {
		t.Fatalf("after the timeout the follower sent %+v, want one new fetch", timedOut)
	}

	r.HandleFetchResponse(FetchResponse{ID: timedOut[0].ID, ErrorCode: kerr.NotLeaderForPartition.Code, HighWatermark: -1})
	if again := followerFetches(r.Ready()); len(again) != 0 {
		t.Fatalf("a follower turned away fetched again at once")
	}
	for tick := 1; tick <= 2; tick++ {
		r.Tick()
		if again := followerFetches(r.Ready()); len(again) == 1 {
			if tick != 2 {
				t.Fatalf("fetched again %d ticks after an error, want 2", tick)
			}
			return
		}
	}
	t.Fatal("no fetch 2 ticks after an error")
}
