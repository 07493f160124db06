package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaIDs are the replica ids a request may carry, and what the Backend
// must be handed for each: -2, Kafka's debugging id, passes through; every
// other negative id is a consumer's.
var replicaIDs = []struct {
	sent int32
	want metadata.BrokerID
}{
	{-1, replica.ConsumerReplicaID},
	{-2, replica.DebugReplicaID},
	{-3, replica.ConsumerReplicaID},
	{-100, replica.ConsumerReplicaID},
	{2, 2},
}

func TestFetchReplicaIDs(t *testing.T) {
	for _, version := range testVersions(t, 1) {
		for _, c := range replicaIDs {
			backend := newFakeBackend()
			backend.addTopic("orders", 2, 5)
			h := newTestHandler(t, backend)
			request := testFetchRequest(version, 0, -1)
			request.ReplicaID = c.sent
			if version >= 15 {
				request.ReplicaState.ID = c.sent // where v15 carries it
			}
			roundTrip(t, h, request)
			sent := backend.fetches[0]
			last := sent.Partitions[len(sent.Partitions)-1]
			if sent.ReplicaID != c.want || sent.Partitions[0].ReplicaID != c.want || last.ReplicaID != c.want {
				t.Fatalf("v%d: replica id %d reached the backend as %d (partitions %d)", version, c.sent, sent.ReplicaID, sent.Partitions[0].ReplicaID)
			}
		}
	}
}

// listOffsetsRecorder records the ListOffsets requests that reach a
// fakeBackend.
type listOffsetsRecorder struct {
	*fakeBackend
	requests []replica.ListOffsetsRequest
}

func (r *listOffsetsRecorder) ListOffsets(tp metadata.TopicPartition, request replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer)) {
	r.requests = append(r.requests, request)
	r.fakeBackend.ListOffsets(tp, request, done)
}

func TestListOffsetsReplicaIDs(t *testing.T) {
	for _, version := range testVersions(t, 2) {
		for _, c := range replicaIDs {
			backend := &listOffsetsRecorder{fakeBackend: newFakeBackend()}
			backend.addTopic("orders", 2, 5)
			h := newTestHandler(t, backend)
			request := listOffsetsRequest(version, -1, replica.LatestTimestamp, replica.EarliestTimestamp)
			request.ReplicaID = c.sent
			response := roundTrip(t, h, request).(*kmsg.ListOffsetsResponse)
			if len(backend.requests) != 2 || backend.requests[0].ReplicaID != c.want || backend.requests[1].ReplicaID != c.want {
				t.Fatalf("v%d: replica id %d reached the backend as %+v", version, c.sent, backend.requests)
			}
			if got := response.Topics[0].Partitions; got[0].ErrorCode != 0 || got[1].ErrorCode != 0 {
				t.Fatalf("v%d: replica id %d answered %+v", version, c.sent, got)
			}
		}
	}
}
