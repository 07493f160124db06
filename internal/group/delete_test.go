package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeAndListGroups: a Stable group shows its protocol and
// members' assignments, an unknown one is Dead without an error, and
// ListGroups filters by state (v4+) and type (v5+).
func TestDescribeAndListGroups(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	leader, _, _ := stableGroup(t, h, "stable")
	h.send(commitRequest(8, "simple", -1, "", "orders", map[int32]int64{0: 1}))
	described := h.answer(h.send(&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"stable", "unknown"}})).(*kmsg.DescribeGroupsResponse)
	stable, unknown := described.Groups[0], described.Groups[1]
	if stable.State != "Stable" || stable.Protocol != "range" || stable.ProtocolType != "consumer" || len(stable.Members) != 2 {
		t.Fatalf("stable group: %+v", stable)
	}
	for _, member := range stable.Members {
		want := "F"
		if member.MemberID == leader {
			want = "L"
		}
		if string(member.MemberAssignment) != want || len(member.ProtocolMetadata) == 0 || member.ClientID != "client" {
			t.Fatalf("member %+v", member)
		}
	}
	if unknown.State != "Dead" || unknown.ErrorCode != 0 || len(unknown.Members) != 0 {
		t.Fatalf("unknown group: %+v", unknown)
	}
	if stable.AuthorizedOperations != -2147483648 {
		t.Fatalf("operations not asked for: %d", stable.AuthorizedOperations)
	}
	withOperations := h.answer(h.send(&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"stable"}, IncludeAuthorizedOperations: true})).(*kmsg.DescribeGroupsResponse)
	if got := withOperations.Groups[0].AuthorizedOperations; got != 328 {
		t.Fatalf("authorized operations %d, want READ|DELETE|DESCRIBE = 328", got)
	}
	list := func(version int16, states, types []string) []string {
		response := h.answer(h.send(&kmsg.ListGroupsRequest{Version: version, StatesFilter: states, TypesFilter: types})).(*kmsg.ListGroupsResponse)
		var groups []string
		for _, group := range response.Groups {
			groups = append(groups, group.Group+"/"+group.GroupState)
		}
		return groups
	}
	if got := list(3, nil, nil); len(got) != 2 {
		t.Fatalf("list v3: %v", got)
	}
	if got := list(4, []string{"empty"}, nil); len(got) != 1 || got[0] != "simple/Empty" {
		t.Fatalf("list v4 Empty: %v", got)
	}
	if got := list(5, nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("list v5 of KIP-848 groups: %v", got)
	}
	if got := list(5, []string{"Stable"}, []string{"Classic"}); len(got) != 1 || got[0] != "stable/Stable" {
		t.Fatalf("list v5 classic Stable: %v", got)
	}
}

// TestDeleteGroups: a group with members is NON_EMPTY_GROUP, an unknown
// one GROUP_ID_NOT_FOUND; an empty one is deleted with its offsets, and a
// replay no longer knows it.
func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	stableGroup(t, h, "busy")
	h.send(commitRequest(8, "idle", -1, "", "orders", map[int32]int64{0: 1, 1: 2}))
	h.autoCommit = false
	deleted := h.send(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"busy", "idle", "unknown"}})
	if h.answered(deleted) {
		t.Fatal("DeleteGroups answered before its tombstones were committed")
	}
	h.commitAll()
	response := h.answer(deleted).(*kmsg.DeleteGroupsResponse)
	want := []int16{kerr.NonEmptyGroup.Code, 0, kerr.GroupIDNotFound.Code}
	for i, group := range response.Groups {
		if group.ErrorCode != want[i] {
			t.Errorf("%s: error %d, want %d", group.Group, group.ErrorCode, want[i])
		}
	}
	if _, ok := h.coordinator.groups["idle"]; ok {
		t.Fatal("the deleted group is still live")
	}
	replayed := h.replay(false)
	if _, ok := replayed.durable["idle"]; ok || describeDurable(replayed) != describeDurable(h.coordinator) {
		t.Fatalf("replay after delete:\n%s", describeDurable(replayed))
	}
	fetch := h.answer(h.send(fetchRequest(5, "idle", "orders", 0))).(*kmsg.OffsetFetchResponse)
	if got := fetch.Topics[0].Partitions[0].Offset; got != -1 {
		t.Fatalf("offset of a deleted group: %d", got)
	}
}

// TestOffsetDelete: a consumer group may delete offsets of topics it does
// not subscribe to; a subscribed topic is GROUP_SUBSCRIBED_TO_TOPIC.
func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	leader, _, generation := stableGroup(t, h, "g")
	h.send(commitRequest(8, "g", generation, leader, "orders", map[int32]int64{0: 1}))
	h.send(commitRequest(8, "g", generation, leader, "old", map[int32]int64{0: 7}))
	request := &kmsg.OffsetDeleteRequest{Group: "g", Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}}
	response := h.answer(h.send(request)).(*kmsg.OffsetDeleteResponse)
	if response.ErrorCode != 0 || response.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || response.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", response)
	}
	offsets := h.coordinator.durable["g"].offsets
	if _, ok := offsets[topicPartition{"old", 0}]; ok {
		t.Fatal("the deleted offset is still committed")
	}
	if _, ok := offsets[topicPartition{"orders", 0}]; !ok {
		t.Fatal("the subscribed topic's offset was deleted")
	}
	if got := h.answer(h.send(&kmsg.OffsetDeleteRequest{Group: "unknown"})).(*kmsg.OffsetDeleteResponse).ErrorCode; got != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", got)
	}
}

// TestOffsetsExpireOnlyForEmptyGroups: a simple consumer's offsets expire
// retention after the commit, and the group goes with them; a Stable
// consumer group keeps the offsets of topics it subscribes to.
func TestOffsetsExpireOnlyForEmptyGroups(t *testing.T) {
	config := DefaultConfig()
	config.OffsetsRetentionMs, config.OffsetsRetentionCheckIntervalMs = 60000, 1000
	h := newHarness(t, config)
	leader, _, generation := stableGroup(t, h, "g")
	h.send(commitRequest(8, "g", generation, leader, "orders", map[int32]int64{0: 1}))
	h.send(commitRequest(8, "simple", -1, "", "orders", map[int32]int64{0: 1}))
	for elapsed := int64(0); elapsed < 70000; elapsed += 2000 {
		h.advance(2000)
		for _, member := range h.coordinator.groups["g"].sortedMemberIDs() {
			heartbeat(t, h, "g", member, generation)
		}
	}
	if _, ok := h.coordinator.durable["simple"]; ok {
		t.Fatal("the simple consumer's offsets outlived their retention")
	}
	if _, ok := h.coordinator.groups["simple"]; ok {
		t.Fatal("the expired simple group is still live")
	}
	if _, ok := h.coordinator.durable["g"].offsets[topicPartition{"orders", 0}]; !ok {
		t.Fatal("a Stable group's subscribed offset expired")
	}
	if describeDurable(h.replay(false)) != describeDurable(h.coordinator) {
		t.Fatal("replay differs after expiry")
	}
}

// TestPendingMemberExpires: a member id handed out with
// MEMBER_ID_REQUIRED and never used expires after the session timeout.
func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	first := joinResponseOf(t, h, h.send(joinRequestFor(9, "g", "")))
	if len(h.coordinator.groups["g"].pendingMembers) != 1 {
		t.Fatal("no pending member")
	}
	h.advance(10001)
	if len(h.coordinator.groups["g"].pendingMembers) != 0 {
		t.Fatal("the pending member id outlived its session timeout")
	}
	if got := joinResponseOf(t, h, h.send(joinRequestFor(9, "g", first.MemberID))).ErrorCode; got != kerr.UnknownMemberID.Code {
		t.Fatalf("join with an expired member id: %d", got)
	}
}

// TestLeaveGroupVersions: v0-v2 leave by member id with the error at the
// top; v3+ by instance id with an empty member id.
func TestLeaveGroupVersions(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	leader, follower, _ := stableGroup(t, h, "g")
	old := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: "ghost"})).(*kmsg.LeaveGroupResponse)
	if old.ErrorCode != kerr.UnknownMemberID.Code || len(old.Members) != 0 {
		t.Fatalf("v1 leave of a ghost: %+v", old)
	}
	if got := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: follower})).(*kmsg.LeaveGroupResponse).ErrorCode; got != 0 {
		t.Fatalf("v1 leave: %d", got)
	}
	byInstance := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 4, Group: "g",
		Members: []kmsg.LeaveGroupRequestMember{{InstanceID: stringPointer("nobody")}}})).(*kmsg.LeaveGroupResponse)
	if byInstance.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave by an unknown instance: %+v", byInstance)
	}
	if got := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 0, Group: "unknown", MemberID: leader})).(*kmsg.LeaveGroupResponse).ErrorCode; got != kerr.UnknownMemberID.Code {
		t.Fatalf("leave of an unknown group: %d", got)
	}
}
