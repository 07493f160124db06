package consumerheartbeat

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/assignor"
)

var (
	ordersID   = [16]byte{1}
	paymentsID = [16]byte{2}
	deletedID  = [16]byte{3}
)

func nameOf(id [16]byte) (string, bool) {
	switch id {
	case ordersID:
		return "orders", true
	case paymentsID:
		return "payments", true
	}
	return "", false
}

func idOf(name string) ([16]byte, bool) {
	switch name {
	case "orders":
		return ordersID, true
	case "payments":
		return paymentsID, true
	}
	return [16]byte{}, false
}

func TestOwned(t *testing.T) {
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	if Owned(request, nameOf) != nil {
		t.Error("a null TopicPartitions is not nil")
	}
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if owned := Owned(request, nameOf); owned == nil || owned.Count() != 0 {
		t.Errorf("an empty TopicPartitions: %v", owned)
	}
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{
		{TopicID: ordersID, Partitions: []int32{3, 1}},
		{TopicID: deletedID, Partitions: []int32{0}},
		{TopicID: ordersID, Partitions: []int32{1, 2}},
		{TopicID: paymentsID, Partitions: []int32{}},
	}
	if owned := Owned(request, nameOf); !reflect.DeepEqual(owned, assignor.Assignment{"orders": {1, 2, 3}}) {
		t.Errorf("owned %v", owned)
	}
}

func TestAssignment(t *testing.T) {
	answer := Assignment(assignor.Assignment{"payments": {0}, "orders": {1, 2}, "deleted": {4}}, idOf)
	want := []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{
		{TopicID: ordersID, Partitions: []int32{1, 2}}, {TopicID: paymentsID, Partitions: []int32{0}}}
	if !reflect.DeepEqual(answer.Topics, want) {
		t.Errorf("got %+v", answer.Topics)
	}
	if empty := Assignment(assignor.Assignment{}, idOf); empty.Topics == nil || len(empty.Topics) != 0 {
		t.Error("an empty assignment must be an empty list, not null")
	}
}
