package consumerheartbeat

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/assignor"
)

// Owned returns the partitions a heartbeat reports owning, by topic name,
// well-formed (sorted, no duplicates), or nil when the field is null,
// which reconcile reads as "unchanged". nameOf maps a topic id to its name
// in the metadata image; partitions of a topic it does not know (deleted,
// or not yet known here) are dropped: no assignment can name them.
func Owned(request *kmsg.ConsumerGroupHeartbeatRequest, nameOf func(id [16]byte) (string, bool)) assignor.Assignment {
	if request.Topics == nil {
		return nil
	}
	owned := assignor.Assignment{}
	for _, topic := range request.Topics {
		if name, ok := nameOf(topic.TopicID); ok {
			owned[name] = append(owned[name], topic.Partitions...)
		}
	}
	return owned.Normalized()
}

// Assignment renders the partitions a member may use now as the answer's
// Assignment, topics in name order. idOf maps a topic name to its id; a
// topic without one (deleted since the target was computed) is left out.
func Assignment(assigned assignor.Assignment, idOf func(name string) ([16]byte, bool)) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	answer := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	answer.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, name := range assigned.Topics() {
		id, ok := idOf(name)
		if !ok {
			continue
		}
		topic := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		topic.TopicID = id
		topic.Partitions = append([]int32(nil), assigned[name]...)
		answer.Topics = append(answer.Topics, topic)
	}
	return &answer
}
