package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group"
)

// groupTopics is the fake's topics as a coordinator's SetTopics takes them.
func groupTopics(backend *fakeBackend) map[string]group.TopicInfo {
	topics := map[string]group.TopicInfo{}
	for name, topic := range backend.topics {
		topics[name] = group.TopicInfo{ID: topic.id, Partitions: int32(len(topic.partitions)), Internal: InternalTopic(name)}
	}
	return topics
}

// consumerJoin is a KIP-848 join (member epoch 0) subscribing to topics;
// v1 members make up their own member id (KIP-1082).
func consumerJoin(version int16, groupID string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version, request.Group, request.MemberEpoch = version, groupID, 0
	if version >= 1 {
		request.MemberID = "member-made-up-by-the-client-0001"
	}
	request.RebalanceTimeoutMillis, request.SubscribedTopicNames = 30000, topics
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return request
}

// A KIP-848 join through the wire and a real coordinator gets a member
// epoch and every partition of the topic it subscribes to, named by the
// topic's id, at both versions; ConsumerGroupDescribe then shows the
// member with that assignment, and an unknown group is GROUP_ID_NOT_FOUND.
func TestConsumerGroupHeartbeatThroughCoordinator(t *testing.T) {
	for _, version := range testVersions(t, 68) {
		backend := newFakeBackend()
		backend.addTopic("orders", 3, 0)
		backend.groupPartitions, backend.groupServe = 2, coordinatorServe(groupTopics(backend))
		h := newTestHandler(t, backend)
		joined := roundTrip(t, h, consumerJoin(version, "app", "orders")).(*kmsg.ConsumerGroupHeartbeatResponse)
		if joined.ErrorCode != 0 || joined.MemberEpoch != 1 || joined.MemberID == nil || joined.Assignment == nil ||
			len(joined.Assignment.Topics) != 1 || joined.Assignment.Topics[0].TopicID != backend.topics["orders"].id ||
			len(joined.Assignment.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d join: %+v", version, joined)
		}
		for _, describeVersion := range testVersions(t, 69) {
			describe := kmsg.NewPtrConsumerGroupDescribeRequest()
			describe.Version, describe.Groups = describeVersion, []string{"app", "missing"} // partitions 1, 1
			described := roundTrip(t, h, describe).(*kmsg.ConsumerGroupDescribeResponse)
			if len(described.Groups) != 2 || described.Groups[0].ErrorCode != 0 || len(described.Groups[0].Members) != 1 ||
				described.Groups[0].Members[0].MemberID != *joined.MemberID ||
				len(described.Groups[0].Members[0].Assignment.TopicPartitions) != 1 ||
				described.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
				t.Fatalf("v%d describe: %+v", describeVersion, described)
			}
		}
	}
}

// A heartbeat whose coordinator cannot take it gets the code and no
// assignment; a ConsumerGroupDescribe naming groups of two coordinators
// reaches each with only its groups, in request order, and the groups of
// a coordinator that cannot answer get its code.
func TestConsumerGroupRequestsByCoordinator(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.groupPartitions, backend.groupServe = 2, coordinatorServe(groupTopics(backend))
	backend.groupCodes = map[int32]int16{0: kerr.CoordinatorLoadInProgress.Code}
	h := newTestHandler(t, backend)
	refused := roundTrip(t, h, consumerJoin(1, "bb", "orders")).(*kmsg.ConsumerGroupHeartbeatResponse) // partition 0
	if refused.ErrorCode != kerr.CoordinatorLoadInProgress.Code || refused.Assignment != nil || refused.MemberEpoch != 0 {
		t.Fatalf("refused join: %+v", refused)
	}
	if joined := roundTrip(t, h, consumerJoin(1, "a", "orders")).(*kmsg.ConsumerGroupHeartbeatResponse); joined.ErrorCode != 0 {
		t.Fatalf("join: %+v", joined)
	}
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.Version, describe.Groups = 1, []string{"a", "bb", "ccc", "dd"} // partitions 1, 0, 1, 0
	requestsBefore := len(backend.groupRequests)
	described := roundTrip(t, h, describe).(*kmsg.ConsumerGroupDescribeResponse)
	want := []int16{0, kerr.CoordinatorLoadInProgress.Code, kerr.GroupIDNotFound.Code, kerr.CoordinatorLoadInProgress.Code}
	for i, entry := range described.Groups {
		if entry.Group != describe.Groups[i] || entry.ErrorCode != want[i] {
			t.Fatalf("group %d: %s code %d, want %s code %d", i, entry.Group, entry.ErrorCode, describe.Groups[i], want[i])
		}
	}
	if len(described.Groups) != 4 || described.Groups[0].Members[0].MemberType != 1 {
		t.Fatalf("%+v", described)
	}
	if asked := backend.groupRequests[requestsBefore:]; len(asked) != 1 || len(asked[0].request.(*kmsg.ConsumerGroupDescribeRequest).Groups) != 2 {
		t.Fatalf("coordinator requests: %+v", asked)
	}
}
