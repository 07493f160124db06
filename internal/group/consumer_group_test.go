package group

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/reconcile"
)

// Tests of KIP-848 consumer groups in the coordinator: joins, the target
// split between members, revocation before assignment, fencing, leaves
// and timeouts, the classic APIs' view, offsets under member epochs, and
// that a coordinator loading the log rebuilds exactly the live group.

// consumerJoin is a join (epoch 0) of member to group, subscribed to
// topics.
func consumerJoin(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.MemberEpoch = 1, group, member, 0
	request.RebalanceTimeoutMillis, request.SubscribedTopicNames = 30000, append([]string{}, topics...)
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return request
}

// consumerBeat is a heartbeat at epoch reporting owned partitions of
// topic t (nil: the field is null, unchanged).
func consumerBeat(group, member string, epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatRequest {
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.MemberEpoch = 1, group, member, epoch
	request.RebalanceTimeoutMillis = -1
	if owned != nil {
		request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testTopics["t"].ID, Partitions: owned}}
	}
	return request
}

// beatAnswer renders a heartbeat answer: error, epoch and the assignment
// of topic t when one was sent.
func beatAnswer(response kmsg.Response) string {
	answer := response.(*kmsg.ConsumerGroupHeartbeatResponse)
	if answer.ErrorCode != 0 {
		return kerr.ErrorForCode(answer.ErrorCode).(*kerr.Error).Message
	}
	text := fmt.Sprintf("epoch %d", answer.MemberEpoch)
	if answer.Assignment != nil {
		var partitions []int32
		for _, topic := range answer.Assignment.Topics {
			partitions = append(partitions, topic.Partitions...)
		}
		text += fmt.Sprintf(" assigned %v", partitions)
	}
	return text
}

func expectBeat(t *testing.T, h *harness, request kmsg.Request, want string) {
	t.Helper()
	if got := beatAnswer(h.answer(h.send(request))); got != want {
		t.Fatalf("%T %+v: got %q, want %q", request, request, got, want)
	}
}

// checkReloads checks a coordinator loading the committed log has the
// same durable view, and rebuilds live consumer groups whose records are
// the live ones.
func checkReloads(t *testing.T, h *harness) {
	t.Helper()
	replayed := h.replay(false)
	if live, loaded := describeDurable(h.coordinator), describeDurable(replayed); live != loaded {
		t.Fatalf("live\n%s\nreplayed\n%s", live, loaded)
	}
	for id, group := range h.coordinator.consumerGroups {
		if live, loaded := describeConsumerGroupRecords(h.coordinator, group), describeConsumerGroupRecords(replayed, replayed.consumerGroups[id]); live != loaded {
			t.Fatalf("group %s live\n%s\nreloaded\n%s", id, live, loaded)
		}
	}
}

func describeConsumerGroupRecords(c *Coordinator, group *consumerGroup) string {
	if group == nil {
		return "none"
	}
	set := c.recordSet(group)
	var out strings.Builder
	for _, recordType := range []int16{3, 4, 5, 6, 7, 8} {
		for _, key := range sortedConsumerKeys(set, recordType) {
			fmt.Fprintf(&out, "%d %s %x\n", recordType, key.member, set[key])
		}
	}
	return out.String()
}

func TestConsumerGroupRevokesBeforeAssigning(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	expectBeat(t, h, consumerJoin("g", "b", "t"), "epoch 2 assigned []")
	target := h.coordinator.consumerGroups["g"].members["a"].target["t"]
	if len(target) != 2 {
		t.Fatalf("a's target %v, want two of the three partitions", target)
	}
	kept := fmt.Sprint(target)
	// a must give up one partition; it keeps its epoch until it says so.
	expectBeat(t, h, consumerBeat("g", "a", 1, []int32{0, 1, 2}), "epoch 1 assigned "+kept)
	// b cannot have the partition a still owns.
	expectBeat(t, h, consumerBeat("g", "b", 2, []int32{}), "epoch 2")
	expectBeat(t, h, consumerBeat("g", "a", 1, target), "epoch 2")
	got := beatAnswer(h.answer(h.send(consumerBeat("g", "b", 2, []int32{}))))
	if got != "epoch 2 assigned [0]" && got != "epoch 2 assigned [2]" && got != "epoch 2 assigned [1]" {
		t.Fatalf("b after a revoked: %s", got)
	}
	describe := h.answer(h.send(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g", "nope"}})).(*kmsg.ConsumerGroupDescribeResponse)
	if g := describe.Groups[0]; g.State != "Stable" || g.Epoch != 2 || g.AssignmentEpoch != 2 || g.AssignorName != "uniform" || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	if describe.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of an unknown group: %+v", describe.Groups[1])
	}
	checkReloads(t, h)
	list := h.answer(h.send(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})).(*kmsg.ListGroupsResponse)
	if len(list.Groups) != 1 || list.Groups[0].GroupType != "consumer" || list.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", list.Groups)
	}
	groups := h.answer(h.send(&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}})).(*kmsg.DescribeGroupsResponse)
	if g := groups.Groups[0]; g.ProtocolType != "consumer" || g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("describe groups: %+v", g)
	}
}

func TestConsumerGroupAnswersAfterCommit(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.autoCommit = false
	join := h.send(consumerJoin("g", "a", "t"))
	if h.answered(join) {
		t.Fatal("a join was answered before its records were committed")
	}
	// A heartbeat that changes nothing still waits for the join's records.
	beat := h.send(consumerBeat("g", "a", 1, nil))
	if h.answered(beat) {
		t.Fatal("a heartbeat was answered before the group's earlier records were committed")
	}
	h.commitAll()
	if beatAnswer(h.answer(join)) != "epoch 1 assigned [0 1 2]" || beatAnswer(h.answer(beat)) != "epoch 1" {
		t.Fatalf("join %s, heartbeat %s", beatAnswer(h.answer(join)), beatAnswer(h.answer(beat)))
	}
	// A failed append leaves the live group ahead of the log: the
	// coordinator stops, and its successor loads the group back.
	leave := consumerBeat("g", "a", -1, nil)
	id := h.send(leave)
	h.failAll(kerr.NotEnoughReplicas.Code)
	if !h.coordinator.Unloaded() || beatAnswer(h.answer(id)) != kerr.CoordinatorNotAvailable.Message {
		t.Fatalf("unloaded %t, answer %s", h.coordinator.Unloaded(), beatAnswer(h.answer(id)))
	}
	h.failover()
	if group := h.coordinator.consumerGroups["g"]; group == nil || group.members["a"] == nil {
		t.Fatal("the new coordinator lost the member whose leave failed")
	}
}

func TestConsumerGroupErrors(t *testing.T) {
	config := DefaultConfig()
	config.ConsumerMaxSize = 1
	h := newHarness(t, config)
	expectBeat(t, h, consumerBeat("g", "a", 1, nil), kerr.GroupIDNotFound.Message)
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	expectBeat(t, h, consumerJoin("g", "b", "t"), kerr.GroupMaxSizeReached.Message)
	expectBeat(t, h, consumerBeat("g", "x", 1, nil), kerr.UnknownMemberID.Message)
	expectBeat(t, h, consumerBeat("g", "a", 7, nil), kerr.FencedMemberEpoch.Message)
	expectBeat(t, h, consumerBeat("g", "a", -1, nil), "epoch -1")
	expectBeat(t, h, consumerBeat("g", "a", 1, nil), kerr.UnknownMemberID.Message)
	invalid := consumerJoin("g", "a", "t")
	invalid.Topics = nil
	expectBeat(t, h, invalid, kerr.InvalidRequest.Message)
	// The classic and consumer protocols do not share a group.
	join := joinRequestFor(4, "g", "")
	expectBeat(t, h, consumerJoin("g", "c", "t"), "epoch 3 assigned [0 1 2]")
	if code := h.answer(h.send(join)).(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup to a consumer group: %d", code)
	}
	if code := h.answer(h.send(&kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "c"})).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("Heartbeat to a consumer group: %d", code)
	}
	h.send(joinRequestFor(0, "classic", ""))
	h.advance(int64(config.InitialRebalanceDelayMs) + 1)
	expectBeat(t, h, consumerJoin("classic", "c", "t"), kerr.GroupIDNotFound.Message)
	checkReloads(t, h)
}

func TestConsumerGroupTimeoutsAndStaticMembers(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	static := consumerJoin("g", "a", "t")
	static.InstanceID = stringPointer("i")
	expectBeat(t, h, static, "epoch 1 assigned [0 1 2]")
	leave := consumerBeat("g", "a", -2, nil)
	leave.InstanceID = stringPointer("i")
	expectBeat(t, h, leave, "epoch -2")
	taken := consumerJoin("g", "b", "t")
	taken.InstanceID = stringPointer("j")
	expectBeat(t, h, taken, "epoch 2 assigned []")
	back := consumerJoin("g", "a2", "t")
	back.InstanceID = stringPointer("i")
	if got := beatAnswer(h.answer(h.send(back))); !strings.HasPrefix(got, "epoch ") {
		t.Fatalf("static member back under a new id: %s", got)
	}
	if group := h.coordinator.consumerGroups["g"]; group.members["a"] != nil || group.members["a2"] == nil || group.instances["i"] != "a2" {
		t.Fatalf("the static member was not replaced: %v", group.instances)
	}
	again := consumerJoin("g", "a2", "t")
	again.InstanceID = stringPointer("i")
	expectBeat(t, h, again, kerr.UnreleasedInstanceID.Message)
	leave = consumerBeat("g", "a2", -2, nil)
	leave.InstanceID = stringPointer("i")
	expectBeat(t, h, leave, "epoch -2")
	if got := beatAnswer(h.answer(h.send(again))); !strings.HasPrefix(got, "epoch ") {
		t.Fatalf("static member back under its own id after -2: %s", got)
	}
	checkReloads(t, h)
	// Silence: every member's session ends and the group is Empty.
	h.advance(DefaultConfig().ConsumerSessionTimeoutMs + 1)
	if group := h.coordinator.consumerGroups["g"]; len(group.members) != 0 || group.state() != "Empty" {
		t.Fatalf("members left after their sessions ended: %d", len(group.members))
	}
	checkReloads(t, h)
	deleted := h.answer(h.send(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}})).(*kmsg.DeleteGroupsResponse)
	if deleted.Groups[0].ErrorCode != 0 || h.coordinator.consumerGroups["g"] != nil || h.coordinator.durable["g"] != nil {
		t.Fatalf("delete of an empty consumer group: %+v", deleted.Groups)
	}
}

func TestConsumerGroupRebalanceTimeoutFences(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	expectBeat(t, h, consumerJoin("g", "b", "t"), "epoch 2 assigned []")
	h.send(consumerBeat("g", "a", 1, []int32{0, 1, 2})) // a must revoke, and never does
	for i := 0; i < 4; i++ {
		h.advance(10000)
		h.send(consumerBeat("g", "b", 2, []int32{}))
	}
	group := h.coordinator.consumerGroups["g"]
	if group.members["a"] != nil {
		t.Fatal("a member that never revoked outlived its rebalance timeout")
	}
	expectBeat(t, h, consumerBeat("g", "b", group.members["b"].current.MemberEpoch, []int32{}), fmt.Sprintf("epoch %d", group.epoch))
	checkReloads(t, h)
}

func TestConsumerGroupOffsetCommits(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	commit := func(version int16, member string, epoch int32) int16 {
		request := kmsg.NewPtrOffsetCommitRequest()
		request.Version, request.Group, request.MemberID, request.Generation = version, "g", member, epoch
		request.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
		return h.answer(h.send(request)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	for _, c := range []struct {
		version int16
		member  string
		epoch   int32
		want    int16
	}{{9, "a", 1, 0}, {9, "a", 0, kerr.StaleMemberEpoch.Code}, {9, "x", 1, kerr.UnknownMemberID.Code}, {8, "a", 1, kerr.UnsupportedVersion.Code},
		{9, "", -1, kerr.UnknownMemberID.Code}} {
		if got := commit(c.version, c.member, c.epoch); got != c.want {
			t.Errorf("commit v%d by %q at %d: %d, want %d", c.version, c.member, c.epoch, got, c.want)
		}
	}
	if h.coordinator.groups["g"] != nil {
		t.Fatal("a commit to a consumer group made a classic group")
	}
	checkReloads(t, h)
}

// TestConsumerGroupSeesNewPartitions: a topic that grows changes the
// subscription metadata at the next heartbeat, which bumps the group
// epoch and assigns the new partition.
func TestConsumerGroupSeesNewPartitions(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	grown := map[string]TopicInfo{"t": {ID: testTopics["t"].ID, Partitions: 4}, "u": testTopics["u"]}
	h.coordinator.SetTopics(grown)
	expectBeat(t, h, consumerBeat("g", "a", 1, []int32{0, 1, 2}), "epoch 2 assigned [0 1 2 3]")
	replayed := h.replay(false)
	replayed.SetTopics(grown)
	if group := replayed.consumerGroups["g"]; group == nil || fmt.Sprint(group.members["a"].current.Assigned["t"]) != "[0 1 2 3]" {
		t.Fatalf("the reloaded group: %+v", group)
	}
}

// TestEmptyGroupsChangeProtocol: an empty consumer group gives its id to a
// classic JoinGroup, and an empty classic group to a consumer join, as
// Kafka converts empty groups whatever the migration policy.
func TestEmptyGroupsChangeProtocol(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	expectBeat(t, h, consumerBeat("g", "a", -1, nil), "epoch -1")
	h.send(joinRequestFor(0, "g", ""))
	if h.coordinator.consumerGroups["g"] != nil || h.coordinator.groups["g"] == nil {
		t.Fatal("the empty consumer group was not replaced by the classic one")
	}
	checkReloads(t, h)
	h.advance(int64(DefaultConfig().NewMemberJoinTimeoutMs) + 1) // the classic member's session ends
	expectBeat(t, h, consumerJoin("g", "b", "t"), "epoch 1 assigned [0 1 2]")
	if h.coordinator.groups["g"] != nil {
		t.Fatal("the empty classic group was not replaced by the consumer group")
	}
	checkReloads(t, h)
}

// TestConsumerGroupOffsetsDeleteAndExpire: OffsetDelete refuses the
// topics members subscribe to; expiry takes the offsets of the others
// retention after their commit, and those of every topic once the group
// is empty, deleting the group with its last offsets.
func TestConsumerGroupOffsetsDeleteAndExpire(t *testing.T) {
	config := DefaultConfig()
	config.OffsetsRetentionMs, config.OffsetsRetentionCheckIntervalMs = 30000, 1000
	h := newHarness(t, config)
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.MemberID, request.Generation = 9, "g", "a", 1
	request.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}},
		{Topic: "u", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 6}, {Partition: 1, Offset: 7}}}}
	h.send(request)
	deleted := h.answer(h.send(&kmsg.OffsetDeleteRequest{Group: "g", Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}})).(*kmsg.OffsetDeleteResponse)
	if deleted.ErrorCode != 0 || deleted.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || deleted.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", deleted)
	}
	h.advance(31000)
	offsets := h.coordinator.durable["g"].offsets
	if _, kept := offsets[topicPartition{"t", 0}]; !kept || len(offsets) != 1 {
		t.Fatalf("after retention with a member subscribed to t: %v", offsets)
	}
	expectBeat(t, h, consumerBeat("g", "a", -1, nil), "epoch -1")
	h.advance(1000)
	if h.coordinator.consumerGroups["g"] != nil || h.coordinator.durable["g"] != nil {
		t.Fatalf("an empty consumer group whose offsets expired is still there: %+v", h.coordinator.durable["g"])
	}
	checkReloads(t, h)
}

// TestConsumerGroupOffsetFetchChecksTheMember: OffsetFetch v9 from a
// member checks its id and epoch against the committed state; an admin's
// (no member) passes.
func TestConsumerGroupOffsetFetchChecksTheMember(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	fetch := func(member *string, epoch int32) int16 {
		request := kmsg.NewPtrOffsetFetchRequest()
		request.Version = 9
		request.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: member, MemberEpoch: epoch}}
		return h.answer(h.send(request)).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	for _, c := range []struct {
		member *string
		epoch  int32
		want   int16
	}{{nil, -1, 0}, {stringPointer("a"), 1, 0}, {stringPointer("a"), 0, kerr.StaleMemberEpoch.Code}, {stringPointer("x"), 1, kerr.UnknownMemberID.Code}} {
		if got := fetch(c.member, c.epoch); got != c.want {
			t.Errorf("fetch by %v at %d: %d, want %d", c.member, c.epoch, got, c.want)
		}
	}
}

func reconcileStateName(state int8) string { return reconcile.State(state).String() }

// TestConsumerGroupRegexSubscription: a regular expression subscribes to
// every topic whose whole name it matches, never an internal one, and
// follows the topics as they come; a coordinator loading the log keeps it.
func TestConsumerGroupRegexSubscription(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	join := consumerJoin("g", "a")
	join.SubscribedTopicRegex = stringPointer("[a-z_]+")
	response := h.answer(h.send(join)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if response.ErrorCode != 0 || len(response.Assignment.Topics) != 2 {
		t.Fatalf("regex join: %+v", response)
	}
	topics := map[string]TopicInfo{"t": testTopics["t"], "u": testTopics["u"], "tt": {ID: [16]byte{3}, Partitions: 1},
		"__consumer_offsets": {ID: [16]byte{4}, Partitions: 50, Internal: true}}
	h.coordinator.SetTopics(topics)
	h.send(consumerBeat("g", "a", 1, nil))
	group := h.coordinator.consumerGroups["g"]
	if got := fmt.Sprint(group.members["a"].current.Assigned); got != "map[t:[0 1 2] tt:[0] u:[0 1]]" {
		t.Fatalf("after a new topic: %s", got)
	}
	checkReloads(t, h)
	describe := h.answer(h.send(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})).(*kmsg.ConsumerGroupDescribeResponse)
	if regex := describe.Groups[0].Members[0].SubscribedTopicRegex; regex == nil || *regex != "[a-z_]+" {
		t.Fatalf("described regex %v", regex)
	}
	bad := consumerJoin("g", "b")
	bad.SubscribedTopicRegex = stringPointer("(")
	expectBeat(t, h, bad, kerr.InvalidRegularExpression.Message)
}

// Members whose sessions end together are fenced one append each, as each
// of Kafka's session timers fences one member: in one append, many
// members' records could outgrow a batch the offsets topic takes, and the
// refused append would unload the coordinator, whose successor restarts
// the sessions and writes the same batch again (the simulator's
// group-does-not-settle found that loop).
func TestConsumerGroupFencesExpiredMembersOneAppendEach(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	expectBeat(t, h, consumerJoin("g", "a", "t"), "epoch 1 assigned [0 1 2]")
	for _, member := range []string{"b", "c"} {
		h.send(consumerJoin("g", member, "t"))
	}
	before := len(h.appendOrder)
	h.advance(DefaultConfig().ConsumerSessionTimeoutMs + 1)
	if group := h.coordinator.consumerGroups["g"]; len(group.members) != 0 {
		t.Fatalf("members left after their sessions ended: %d", len(group.members))
	}
	if appends := len(h.appendOrder) - before; appends != 3 {
		t.Fatalf("three expired members fenced in %d appends, want one each", appends)
	}
	checkReloads(t, h)
}
