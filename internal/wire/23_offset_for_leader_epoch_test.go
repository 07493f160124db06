package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetForLeaderEpoch(t *testing.T) {
	for _, version := range testVersions(t, 23) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 5)
		storedBatches(t, backend)
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrOffsetForLeaderEpochRequest()
		request.Version, request.ReplicaID = version, 2
		topic := kmsg.NewOffsetForLeaderEpochRequestTopic()
		topic.Topic = "orders"
		// Epoch 5 started at 0 and holds offsets 0..3; epoch 7 starts at 4.
		backend.topics["orders"].partitions[0].becomeLeader(7)
		for _, c := range [][2]int32{{7, 5}, {7, 3}, {7, 6}, {5, 3}, {8, 3}} { // current leader epoch, leader epoch
			partition := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			partition.CurrentLeaderEpoch, partition.LeaderEpoch = c[0], c[1]
			topic.Partitions = append(topic.Partitions, partition)
		}
		missing := kmsg.NewOffsetForLeaderEpochRequestTopic()
		missing.Topic, missing.Partitions = "missing", topic.Partitions[:1]
		request.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{topic, missing}
		response := roundTrip(t, h, request).(*kmsg.OffsetForLeaderEpochResponse)
		got := response.Topics[0].Partitions
		want := []struct {
			code  int16
			epoch int32
			end   int64
		}{{0, 5, 4}, {0, 3, 0}, {0, 5, 4}, {kerr.FencedLeaderEpoch.Code, -1, -1}, {kerr.UnknownLeaderEpoch.Code, -1, -1}}
		for i, w := range want {
			if got[i].ErrorCode != w.code || got[i].LeaderEpoch != w.epoch || got[i].EndOffset != w.end {
				t.Fatalf("v%d partition entry %d: %+v, want %+v", version, i, got[i], w)
			}
		}
		if response.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: missing topic error %d", version, response.Topics[1].Partitions[0].ErrorCode)
		}
	}
}

// TestOffsetForLeaderEpochReplicaID checks who the Backend is told asks:
// a follower by id from v3, a consumer otherwise.
func TestOffsetForLeaderEpochReplicaID(t *testing.T) {
	var seen []replica.OffsetsForLeaderEpochRequest
	backend := &recordingBackend{fakeBackend: newFakeBackend(), offsetsForLeaderEpoch: &seen}
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	for _, version := range []int16{2, 3, 4} {
		request := kmsg.NewPtrOffsetForLeaderEpochRequest()
		request.Version, request.ReplicaID = version, 2
		topic := kmsg.NewOffsetForLeaderEpochRequestTopic()
		topic.Topic, topic.Partitions = "orders", []kmsg.OffsetForLeaderEpochRequestTopicPartition{kmsg.NewOffsetForLeaderEpochRequestTopicPartition()}
		request.Topics = append(request.Topics, topic)
		roundTrip(t, h, request)
	}
	if seen[0].ReplicaID != replica.ConsumerReplicaID || seen[1].ReplicaID != 2 || seen[2].ReplicaID != 2 {
		t.Fatalf("replica ids %d %d %d, want -1 (v2 carries none), 2, 2", seen[0].ReplicaID, seen[1].ReplicaID, seen[2].ReplicaID)
	}
}
