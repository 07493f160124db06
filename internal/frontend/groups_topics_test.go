package frontend

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// admin runs one CreateTopics or CreatePartitions of a topic through the
// backend and steps until this broker's image has it.
func (w *groupHostWorld) admin(what string, call func(done func([]int16))) {
	w.t.Helper()
	var codes []int16
	call(func(c []int16) { codes = c })
	w.stepUntil(what, func() bool { return codes != nil })
	if len(codes) != 1 || codes[0] != 0 {
		w.t.Fatalf("%s: codes %v", what, codes)
	}
}

// heartbeat is one ConsumerGroupHeartbeat of member at epoch, owning
// owned of topic (nil: unchanged), answered.
func (w *groupHostWorld) heartbeat(groupID, member string, epoch int32, topicID [16]byte, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
	w.t.Helper()
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.MemberEpoch = 1, groupID, member, epoch
	if epoch == 0 {
		request.RebalanceTimeoutMillis, request.SubscribedTopicNames = 30000, []string{"orders"}
	}
	if owned != nil {
		request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if len(owned) > 0 {
		topic := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		topic.TopicID, topic.Partitions = topicID, owned
		request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{topic}
	}
	response, code := w.call(groupID, request)
	if code != 0 || response.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
		w.t.Fatalf("heartbeat of %s at epoch %d: code %d, %+v", member, epoch, code, response)
	}
	return response.(*kmsg.ConsumerGroupHeartbeatResponse)
}

// assigned is the partitions a heartbeat answer assigns, nil when it has
// no assignment (unchanged).
func assigned(response *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	if response.Assignment == nil {
		return nil
	}
	partitions := []int32{}
	for _, topic := range response.Assignment.Topics {
		partitions = append(partitions, topic.Partitions...)
	}
	return partitions
}

// The host gives its coordinators the image's topics (SetTopics) before
// they load and at every metadata change: a KIP-848 member subscribed to a
// topic created after its coordinator loaded gets its partitions, and when
// the topic grows, the next heartbeat
// assigns the new partitions too. Without the topics the server-side
// assignor sees no topic and assigns nothing.
func TestGroupHostGivesCoordinatorsTheTopics(t *testing.T) {
	w := newGroupHostWorld(t, rules.Rules{})
	b := (*backend)(w.fe)
	w.serving("app") // the broker is registered, the coordinator loaded: orders reaches it as a change
	w.admin("orders created", func(done func([]int16)) {
		b.CreateTopics(wire.CreateTopicsRequest{Topics: []controller.CreateTopicRequest{{Name: "orders", Partitions: 2, ReplicationFactor: 1}},
			TimeoutTicks: 100}, done)
	})
	topic, _ := w.fe.Node().Image().Topic("orders")
	const member = "a-member-id-of-twenty-two"
	joined := w.heartbeat("app", member, 0, topic.ID, []int32{})
	if got := assigned(joined); len(got) != 2 {
		t.Fatalf("join: assigned %v, want both partitions of orders", got)
	}
	w.admin("orders grown", func(done func([]int16)) {
		b.CreatePartitions(wire.CreatePartitionsRequest{Topics: []controller.CreatePartitionsRequest{{Topic: "orders", Count: 4}}, TimeoutTicks: 100}, done)
	})
	grown := w.heartbeat("app", member, joined.MemberEpoch, topic.ID, []int32{0, 1})
	if got := assigned(grown); len(got) != 4 || grown.MemberEpoch <= joined.MemberEpoch {
		t.Fatalf("after growing: epoch %d (was %d), assigned %v, want all 4 partitions", grown.MemberEpoch, joined.MemberEpoch, got)
	}
}
