package wire

import (
	"reflect"
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every entry reaches the Backend in request order, a null target (a
// cancellation) told apart from an empty one, and its code comes back at
// its place with a message; v1 with AllowReplicationFactorChange false
// refuses a change of size itself, as Kafka does.
func TestAlterPartitionReassignments(t *testing.T) {
	for _, version := range testVersions(t, 45) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 0, 1, 2)
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		request.Version = version
		add := func(name string, partition int32, replicas []int32) {
			if n := len(request.Topics); n == 0 || request.Topics[n-1].Topic != name {
				topic := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				topic.Topic = name
				request.Topics = append(request.Topics, topic)
			}
			entry := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			entry.Partition, entry.Replicas = partition, replicas
			topic := &request.Topics[len(request.Topics)-1]
			topic.Partitions = append(topic.Partitions, entry)
		}
		add("orders", 0, []int32{2, 3})
		add("orders", 1, nil)
		add("orders", 1, []int32{1, 2, 3})
		add("missing", 0, []int32{1, 2})
		if version >= 1 {
			request.AllowReplicationFactorChange = false
		}
		response := roundTrip(t, h, request).(*kmsg.AlterPartitionAssignmentsResponse)
		want := [][]int16{{0, kerr.NoReassignmentInProgress.Code, 0}, {kerr.UnknownTopicOrPartition.Code}}
		forwarded := 4
		if version >= 1 {
			want[0][2] = kerr.InvalidReplicationFactor.Code
			forwarded = 3
			if response.AllowReplicationFactorChange {
				t.Fatalf("v%d: AllowReplicationFactorChange not echoed", version)
			}
		}
		if response.ErrorCode != 0 || len(response.Topics) != len(want) {
			t.Fatalf("v%d: %+v", version, response)
		}
		for i, topic := range response.Topics {
			for j, partition := range topic.Partitions {
				if partition.ErrorCode != want[i][j] || partition.Partition != request.Topics[i].Partitions[j].Partition ||
					(partition.ErrorCode != 0) != (partition.ErrorMessage != nil) {
					t.Fatalf("v%d: %s entry %d: %+v, want code %d", version, topic.Topic, j, partition, want[i][j])
				}
			}
		}
		if len(backend.reassigns) != forwarded {
			t.Fatalf("v%d: %d moves reached the Backend: %v", version, len(backend.reassigns), backend.reassigns)
		}
		first := controller.ReassignRequest{TopicPartition: metadata.TopicPartition{Topic: "orders"}, Replicas: []metadata.BrokerID{2, 3}}
		if !reflect.DeepEqual(backend.reassigns[0], first) || backend.reassigns[1].Replicas != nil {
			t.Fatalf("v%d: forwarded %v", version, backend.reassigns)
		}
	}
}

// ListPartitionReassignments lists the partitions being moved, all of
// them for null topics, and only the named ones otherwise, leaving out
// those without a move and unknown topics, as Kafka does.
func TestListPartitionReassignments(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 3, 0, 1, 2)
	backend.addTopic("events", 1, 0, 1, 2)
	h := newTestHandler(t, backend)
	move := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	for _, name := range []string{"events", "orders"} {
		topic := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		topic.Topic = name
		entry := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		entry.Partition, entry.Replicas = 0, []int32{2, 3}
		topic.Partitions = append(topic.Partitions, entry)
		move.Topics = append(move.Topics, topic)
	}
	roundTrip(t, h, move)

	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	all := roundTrip(t, h, list).(*kmsg.ListPartitionReassignmentsResponse)
	if len(all.Topics) != 2 || all.Topics[0].Topic != "events" || all.Topics[1].Topic != "orders" {
		t.Fatalf("all: %+v", all.Topics)
	}
	partition := all.Topics[1].Partitions[0]
	if partition.Partition != 0 || !reflect.DeepEqual(partition.Replicas, []int32{2, 3, 1}) ||
		!reflect.DeepEqual(partition.AddingReplicas, []int32{3}) || !reflect.DeepEqual(partition.RemovingReplicas, []int32{1}) {
		t.Fatalf("orders-0: %+v", partition)
	}

	for _, name := range []string{"orders", "missing"} {
		topic := kmsg.NewListPartitionReassignmentsRequestTopic()
		topic.Topic, topic.Partitions = name, []int32{0, 1, 7}
		list.Topics = append(list.Topics, topic)
	}
	named := roundTrip(t, h, list).(*kmsg.ListPartitionReassignmentsResponse)
	if len(named.Topics) != 1 || named.Topics[0].Topic != "orders" || len(named.Topics[0].Partitions) != 1 {
		t.Fatalf("named: %+v", named.Topics)
	}
	list.Topics = list.Topics[:1]
	list.Topics[0].Partitions = []int32{1}
	if none := roundTrip(t, h, list).(*kmsg.ListPartitionReassignmentsResponse); len(none.Topics) != 0 || none.ErrorCode != 0 {
		t.Fatalf("a partition with no move: %+v", none)
	}
}
