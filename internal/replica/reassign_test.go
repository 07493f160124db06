package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// A reassignment adds broker 4: the leader serves it as a follower and
// proposes it for the ISR once it has caught up (the ordinary, epoch-safe
// join). When the move completes and takes broker 3 out, the leader forgets
// 3: a fetch from it, until it hears of the move, is refused, and it is
// never proposed for the ISR again.
func TestLeaderFollowsAReassignment(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2, 3)
	r.SetBrokers([]metadata.BrokerState{{ID: 1, Epoch: 10}, {ID: 2, Epoch: 20}, {ID: 3, Epoch: 30}, {ID: 4, Epoch: 40}})
	adding := metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 4, 3},
		ISR: []metadata.BrokerID{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8,
		Adding: []metadata.BrokerID{4}, Removing: []metadata.BrokerID{3}}
	if !r.ApplyPartitionState(adding) {
		t.Fatal("the move was not applied")
	}
	r.Ready()
	for _, id := range []metadata.BrokerID{2, 3} {
		r.HandleFetch(FetchRequest{ReplicaID: id, ReplicaEpoch: metadata.BrokerEpoch(10 * id), CurrentLeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: 5})
	}
	r.Ready()
	r.HandleFetch(FetchRequest{ReplicaID: 4, ReplicaEpoch: 40, CurrentLeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: 5})
	ready := r.Ready()
	if ready.Answers[0].Fetch.ErrorCode != 0 || len(ready.Proposals) != 1 || len(ready.Proposals[0].NewISR) != 4 {
		t.Fatalf("the added replica, caught up: answer %+v, proposals %+v", ready.Answers[0].Fetch, ready.Proposals)
	}
	r.HandleAlterPartitionResponse(AlterPartitionResponse{Request: ready.Proposals[0], ErrorCode: 0,
		State: &metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 4}, ISR: []metadata.BrokerID{1, 2, 4},
			Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10}})
	r.Ready()
	r.HandleFetch(FetchRequest{ReplicaID: 3, ReplicaEpoch: 30, CurrentLeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: record.LeaderEpoch(5)})
	ready = r.Ready()
	if ready.Answers[0].Fetch.ErrorCode == 0 || len(ready.Proposals) != 0 {
		t.Fatalf("the removed replica: answer %+v, proposals %+v", ready.Answers[0].Fetch, ready.Proposals)
	}
	if ready.Answers[0].Fetch.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("the removed replica's fetch answered %d", ready.Answers[0].Fetch.ErrorCode)
	}
}
