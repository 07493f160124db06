package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower's v12 fetch carries its broker epoch in ReplicaState, tag 1,
// through the encoding: the tag survives bytes in, and a ReplicaState that
// names another broker, or none, gives no epoch.
func TestFetchReplicaStateAtV12(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	for _, c := range []struct {
		name       string
		replicaID  int32
		stateID    int32
		stateEpoch int64
		wantID     metadata.BrokerID
		wantEpoch  metadata.BrokerEpoch
	}{
		{"follower with its epoch", 2, 2, 77, 2, 77},
		{"follower without ReplicaState", 2, -1, -1, 2, metadata.NoBrokerEpoch},
		{"ReplicaState of another broker", 2, 3, 77, 2, metadata.NoBrokerEpoch},
		{"consumer", -1, 2, 77, replica.ConsumerReplicaID, metadata.NoBrokerEpoch},
	} {
		request := testFetchRequest(12, 0, 5)
		request.ReplicaID = c.replicaID
		request.ReplicaState.ID, request.ReplicaState.Epoch = c.stateID, c.stateEpoch
		decoded := kmsg.NewPtrFetchRequest()
		decoded.Version = 12
		if err := decoded.ReadFrom(request.AppendTo(nil)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fetch := h.fetchRequest(decoded, 3)
		if fetch.ReplicaID != c.wantID || fetch.ReplicaEpoch != c.wantEpoch {
			t.Fatalf("%s: replica %d epoch %d, want %d and %d", c.name, fetch.ReplicaID, fetch.ReplicaEpoch, c.wantID, c.wantEpoch)
		}
		for _, partition := range fetch.Partitions {
			if partition.ReplicaID != c.wantID || partition.ReplicaEpoch != c.wantEpoch {
				t.Fatalf("%s: partition %s has replica %d epoch %d", c.name, partition.TopicPartition, partition.ReplicaID, partition.ReplicaEpoch)
			}
		}
	}
}

// A fetch asking for more than MaxFetchBytes (Kafka's fetch.max.bytes), in
// all or for one partition, is cut to it; a negative size reads as none.
func TestFetchBytesCapped(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	request := testFetchRequest(12, 0, 5)
	request.MaxBytes = 1<<31 - 1
	request.Topics[0].Partitions[0].PartitionMaxBytes = 1<<31 - 1
	request.Topics[0].Partitions[1].PartitionMaxBytes = -5
	fetch := h.fetchRequest(request, 3)
	if fetch.MaxBytes != DefaultMaxFetchBytes || fetch.Partitions[0].MaxBytes != DefaultMaxFetchBytes || fetch.Partitions[1].MaxBytes != 0 {
		t.Fatalf("max bytes %d, partitions %d and %d", fetch.MaxBytes, fetch.Partitions[0].MaxBytes, fetch.Partitions[1].MaxBytes)
	}
}

// A partition named many times in one fetch is read and answered once, at
// the place it was first named, with what it was last asked, as Kafka
// reads a fetch into a map: a client naming one partition 10,000 times
// costs the broker one read.
func TestFetchDuplicatePartitionsAnsweredOnce(t *testing.T) {
	request := testFetchRequest(12, 0, 5)
	orders := request.Topics[0]
	for i := range 10_000 {
		duplicate := orders.Partitions[0]
		duplicate.FetchOffset = int64(i)
		request.Topics = append(request.Topics, kmsg.FetchRequestTopic{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{duplicate}})
	}
	if left := dedupeFetchPartitions(request); left != 3 {
		t.Fatalf("%d partitions left, want 3", left)
	}
	if len(request.Topics) != 2 || request.Topics[0].Topic != "orders" || len(request.Topics[0].Partitions) != 2 ||
		request.Topics[0].Partitions[0].FetchOffset != 9_999 || request.Topics[1].Topic != "missing" {
		t.Fatalf("deduplicated: %+v", request.Topics)
	}
}

// A partition named twice in a produce is appended to once, with the
// records it was last given, and answered once.
func TestProduceDuplicatePartitionsAppendedOnce(t *testing.T) {
	request := kmsg.NewPtrProduceRequest()
	for _, records := range [][]byte{[]byte("first"), []byte("second"), []byte("third")} {
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "orders"
		partition := kmsg.NewProduceRequestTopicPartition()
		partition.Partition, partition.Records = 0, records
		topic.Partitions = append(topic.Partitions, partition)
		request.Topics = append(request.Topics, topic)
	}
	dedupeProducePartitions(request)
	if len(request.Topics) != 1 || len(request.Topics[0].Partitions) != 1 || string(request.Topics[0].Partitions[0].Records) != "third" {
		t.Fatalf("deduplicated: %+v", request.Topics)
	}
}
