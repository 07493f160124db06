package group

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinRequestFor(version int16, group, memberID string, protocols ...string) *kmsg.JoinGroupRequest {
	request := kmsg.NewPtrJoinGroupRequest()
	request.Version, request.Group, request.MemberID = version, group, memberID
	request.SessionTimeoutMillis, request.RebalanceTimeoutMillis, request.ProtocolType = 10000, 20000, "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, name := range protocols {
		metadata := (&kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}).AppendTo(nil)
		request.Protocols = append(request.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: metadata})
	}
	return request
}

func joinResponseOf(t *testing.T, h *harness, id RequestID) *kmsg.JoinGroupResponse {
	t.Helper()
	return h.answer(id).(*kmsg.JoinGroupResponse)
}

// joinMember runs the KIP-394 handshake: a join without an id gets
// MEMBER_ID_REQUIRED and the id, and the second join is parked.
func joinMember(t *testing.T, h *harness, group string, protocols ...string) (memberID string, parkedJoin RequestID) {
	t.Helper()
	first := joinResponseOf(t, h, h.send(joinRequestFor(9, group, "", protocols...)))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		t.Fatalf("first join: error %d member %q", first.ErrorCode, first.MemberID)
	}
	return first.MemberID, h.send(joinRequestFor(9, group, first.MemberID, protocols...))
}

func syncRequestFor(group, memberID string, generation int32, assignments map[string]string) *kmsg.SyncGroupRequest {
	request := kmsg.NewPtrSyncGroupRequest()
	request.Version, request.Group, request.MemberID, request.Generation = 5, group, memberID, generation
	request.ProtocolType, request.Protocol = stringPointer("consumer"), stringPointer("range")
	for member, assignment := range assignments {
		request.GroupAssignment = append(request.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: member, MemberAssignment: []byte(assignment)})
	}
	return request
}

func heartbeat(t *testing.T, h *harness, group, memberID string, generation int32) int16 {
	t.Helper()
	request := kmsg.NewPtrHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.Generation = 4, group, memberID, generation
	return h.answer(h.send(request)).(*kmsg.HeartbeatResponse).ErrorCode
}

// stableGroup brings two members through the initial delay, the join
// phase and the leader's SyncGroup.
func stableGroup(t *testing.T, h *harness, group string) (leader, follower string, generation int32) {
	t.Helper()
	first, firstJoin := joinMember(t, h, group)
	second, secondJoin := joinMember(t, h, group)
	h.advance(int64(h.config.InitialRebalanceDelayMs))
	if h.answered(firstJoin) || h.answered(secondJoin) {
		t.Fatal("the initial delay was not extended for the second member")
	}
	h.advance(int64(h.config.InitialRebalanceDelayMs))
	joined := joinResponseOf(t, h, firstJoin)
	other := joinResponseOf(t, h, secondJoin)
	if joined.ErrorCode != 0 || other.ErrorCode != 0 || joined.Generation != 1 || *joined.Protocol != "range" {
		t.Fatalf("join phase: %+v / %+v", joined, other)
	}
	leader, follower = joined.LeaderID, first
	if leader == first {
		follower = second
	}
	leaderResponse, followerResponse := joined, other
	if leader != first {
		leaderResponse, followerResponse = other, joined
	}
	if len(leaderResponse.Members) != 2 || len(followerResponse.Members) != 0 {
		t.Fatalf("the leader gets %d members, the follower %d", len(leaderResponse.Members), len(followerResponse.Members))
	}
	followerSync := h.send(syncRequestFor(group, follower, 1, nil))
	if h.answered(followerSync) {
		t.Fatal("follower's sync answered before the leader's assignment")
	}
	h.autoCommit = false
	leaderSync := h.send(syncRequestFor(group, leader, 1, map[string]string{leader: "L", follower: "F"}))
	if h.answered(leaderSync) || h.answered(followerSync) {
		t.Fatal("sync answered before the assignment was committed")
	}
	h.commitAll()
	h.autoCommit = true
	if got := h.answer(followerSync).(*kmsg.SyncGroupResponse); got.ErrorCode != 0 || string(got.MemberAssignment) != "F" {
		t.Fatalf("follower sync: %+v", got)
	}
	if got := h.answer(leaderSync).(*kmsg.SyncGroupResponse); got.ErrorCode != 0 || string(got.MemberAssignment) != "L" {
		t.Fatalf("leader sync: %+v", got)
	}
	return leader, follower, 1
}

// TestGroupLifecycle: join, sync, heartbeat, a third member's rebalance,
// a leave, and the group's records replayed into a new coordinator.
func TestGroupLifecycle(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	leader, follower, generation := stableGroup(t, h, "g")
	if code := heartbeat(t, h, "g", follower, generation); code != 0 {
		t.Fatalf("heartbeat in Stable: %d", code)
	}
	if code := heartbeat(t, h, "g", follower, generation+1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of another generation: %d", code)
	}
	if code := heartbeat(t, h, "g", "stranger", generation); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of a stranger: %d", code)
	}
	replayed := h.replay(false)
	if describeLive(replayed) != describeLive(h.coordinator) {
		t.Fatalf("the replayed group differs:\n%s\nlive:\n%s", describeLive(replayed), describeLive(h.coordinator))
	}
	third, thirdJoin := joinMember(t, h, "g")
	if code := heartbeat(t, h, "g", follower, generation); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat while preparing a rebalance: %d", code)
	}
	commit := h.answer(h.send(commitRequest(8, "g", generation, follower, "orders", map[int32]int64{0: 5}))).(*kmsg.OffsetCommitResponse)
	if code := commit.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit of the previous generation while preparing: %d", code)
	}
	leaderJoin := h.send(joinRequestFor(9, "g", leader))
	if h.answered(thirdJoin) {
		t.Fatal("join phase ended before the follower rejoined")
	}
	followerJoin := h.send(joinRequestFor(9, "g", follower))
	for _, id := range []RequestID{thirdJoin, leaderJoin, followerJoin} {
		if response := joinResponseOf(t, h, id); response.ErrorCode != 0 || response.Generation != 2 {
			t.Fatalf("join of generation 2: %+v", response)
		}
	}
	commit = h.answer(h.send(commitRequest(8, "g", 2, follower, "orders", map[int32]int64{0: 6}))).(*kmsg.OffsetCommitResponse)
	if code := commit.Topics[0].Partitions[0].ErrorCode; code != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit while completing a rebalance: %d", code)
	}
	leave := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 3, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: third}, {MemberID: "stranger"}}})).(*kmsg.LeaveGroupResponse)
	if leave.Members[0].ErrorCode != 0 || leave.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", leave.Members)
	}
	if state := h.coordinator.groups["g"].state; state != statePreparingRebalance {
		t.Fatalf("after a leave in CompletingRebalance the group is %s", state)
	}
}

// TestSessionTimeoutRemovesMembers: a member that stops heartbeating is
// removed and the group rebalances; when all are gone it is Empty, and
// its metadata record says so.
func TestSessionTimeoutRemovesMembers(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	leader, follower, generation := stableGroup(t, h, "g")
	for elapsed := int64(0); elapsed < 9000; elapsed += 3000 {
		h.advance(3000)
		if code := heartbeat(t, h, "g", leader, generation); code != 0 {
			t.Fatalf("leader heartbeat after %d ms: %d", elapsed, code)
		}
	}
	h.advance(3000)
	if _, ok := h.coordinator.groups["g"].members[follower]; ok {
		t.Fatal("the silent follower outlived its session")
	}
	if code := heartbeat(t, h, "g", leader, generation); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("leader heartbeat after the follower left: %d", code)
	}
	h.advance(30000)
	group := h.coordinator.groups["g"]
	if group.state != stateEmpty || len(group.members) != 0 {
		t.Fatalf("after every session expired: %s", describeLive(h.coordinator))
	}
	if describeDurable(h.replay(false)) != describeDurable(h.coordinator) {
		t.Fatal("replay differs")
	}
	if metadata := h.coordinator.durable["g"].metadata; metadata == nil || len(metadata.members) != 0 {
		t.Fatalf("the Empty group's record: %+v", metadata)
	}
}

// TestJoinGroupErrors covers the checks before and in the join.
func TestJoinGroupErrors(t *testing.T) {
	config := DefaultConfig()
	config.MaxSize = 1
	h := newHarness(t, config)
	check := func(name string, request *kmsg.JoinGroupRequest, want int16) {
		t.Helper()
		if got := joinResponseOf(t, h, h.send(request)).ErrorCode; got != want {
			t.Errorf("%s: error %d, want %d", name, got, want)
		}
	}
	check("empty group id", joinRequestFor(9, "", ""), kerr.InvalidGroupID.Code)
	short := joinRequestFor(9, "g", "")
	short.SessionTimeoutMillis = 10
	check("session timeout below the minimum", short, kerr.InvalidSessionTimeout.Code)
	check("unknown member of an unknown group", joinRequestFor(9, "g", "ghost"), kerr.UnknownMemberID.Code)
	noProtocols := joinRequestFor(9, "g", "")
	noProtocols.Protocols = nil
	check("no protocols", noProtocols, kerr.InconsistentGroupProtocol.Code)
	joinMember(t, h, "g")
	check("a second member while one is joining, beyond group.max.size", joinRequestFor(9, "g", ""), kerr.GroupMaxSizeReached.Code)
	h.advance(3000)
	check("a second member beyond group.max.size", joinRequestFor(3, "g", ""), kerr.GroupMaxSizeReached.Code)
	check("an unknown member of a full group", joinRequestFor(9, "g", "ghost"), kerr.GroupMaxSizeReached.Code)
}

// TestInconsistentProtocolOnceMembersExist: once the group has a member, a
// join whose protocols no member supports is refused.
func TestInconsistentProtocolOnceMembersExist(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	joinMember(t, h, "g", "range")
	if got := joinResponseOf(t, h, h.send(joinRequestFor(3, "g", "", "roundrobin"))).ErrorCode; got != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("error %d", got)
	}
	wrongType := joinRequestFor(3, "g", "", "range")
	wrongType.ProtocolType = "connect"
	if got := joinResponseOf(t, h, h.send(wrongType)).ErrorCode; got != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("error %d for another protocol type", got)
	}
}

// TestProtocolVote: the protocol most members list first among those all
// support wins.
func TestProtocolVote(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	_, a := joinMember(t, h, "g", "sticky", "range")
	_, b := joinMember(t, h, "g", "range", "sticky")
	_, c := joinMember(t, h, "g", "range", "sticky", "roundrobin")
	h.advance(3000)
	h.advance(3000)
	for _, id := range []RequestID{a, b, c} {
		if got := *joinResponseOf(t, h, id).Protocol; got != "range" {
			t.Fatalf("protocol %q, want range", got)
		}
	}
}

// TestStaticMemberReplacedInStable: a static member that rejoins without
// its member id (a restart) takes over its assignment without a
// rebalance once the new metadata is committed; the old id is fenced.
func TestStaticMemberReplacedInStable(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	static := joinRequestFor(9, "g", "")
	static.InstanceID = stringPointer("instance-1")
	join := h.send(static)
	h.advance(3000)
	response := joinResponseOf(t, h, join)
	if response.ErrorCode != 0 || response.Generation != 1 {
		t.Fatalf("static join: %+v", response)
	}
	oldID := response.MemberID
	if got := h.answer(h.send(syncRequestFor("g", oldID, 1, map[string]string{oldID: "A"}))).(*kmsg.SyncGroupResponse); string(got.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", got)
	}
	h.autoCommit = false
	rejoin := h.send(static)
	if h.answered(rejoin) {
		t.Fatal("static rejoin answered before its metadata was committed")
	}
	h.commitAll()
	replaced := joinResponseOf(t, h, rejoin)
	if replaced.ErrorCode != 0 || replaced.Generation != 1 || !replaced.SkipAssignment || replaced.MemberID == oldID {
		t.Fatalf("replaced static member: %+v", replaced)
	}
	if h.coordinator.groups["g"].state != stateStable {
		t.Fatal("the replacement rebalanced")
	}
	zombie := kmsg.NewPtrHeartbeatRequest()
	zombie.Group, zombie.MemberID, zombie.Generation, zombie.InstanceID, zombie.Version = "g", oldID, 1, stringPointer("instance-1"), 4
	if got := h.answer(h.send(zombie)).(*kmsg.HeartbeatResponse).ErrorCode; got != kerr.FencedInstanceID.Code {
		t.Fatalf("the old member's heartbeat: %d", got)
	}
	sync := h.answer(h.send(syncRequestFor("g", replaced.MemberID, 1, nil))).(*kmsg.SyncGroupResponse)
	if string(sync.MemberAssignment) != "A" {
		t.Fatalf("the new member's assignment: %q", sync.MemberAssignment)
	}
	if describeDurable(h.replay(false)) != describeDurable(h.coordinator) {
		t.Fatal("replay differs")
	}
}

// TestSyncGroupErrors covers SyncGroup's checks by state.
func TestSyncGroupErrors(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	check := func(name string, request *kmsg.SyncGroupRequest, want int16) {
		t.Helper()
		if got := h.answer(h.send(request)).(*kmsg.SyncGroupResponse).ErrorCode; got != want {
			t.Errorf("%s: error %d, want %d", name, got, want)
		}
	}
	check("unknown group", syncRequestFor("g", "m", 1, nil), kerr.UnknownMemberID.Code)
	leader, _, generation := stableGroup(t, h, "g")
	check("wrong generation", syncRequestFor("g", leader, generation+1, nil), kerr.IllegalGeneration.Code)
	check("unknown member", syncRequestFor("g", "ghost", generation, nil), kerr.UnknownMemberID.Code)
	missing := syncRequestFor("g", leader, generation, nil)
	missing.Protocol = nil
	check("v5 without the protocol name", missing, kerr.InconsistentGroupProtocol.Code)
	other := syncRequestFor("g", leader, generation, nil)
	other.Protocol = stringPointer("roundrobin")
	check("another protocol", other, kerr.InconsistentGroupProtocol.Code)
	check("Stable: the stored assignment", syncRequestFor("g", leader, generation, nil), 0)
	joinMember(t, h, "g")
	check("preparing a rebalance", syncRequestFor("g", leader, generation, nil), kerr.RebalanceInProgress.Code)
}

// TestFailedAssignmentWriteRebalances: when the leader's assignment cannot
// be written, the parked syncs get the mapped error and the group
// rebalances instead of going Stable.
func TestFailedAssignmentWriteRebalances(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	_, first := joinMember(t, h, "g")
	h.advance(3000)
	joined := joinResponseOf(t, h, first)
	h.autoCommit = false
	sync := h.send(syncRequestFor("g", joined.MemberID, 1, map[string]string{joined.MemberID: "A"}))
	h.failAll(kerr.NotEnoughReplicas.Code)
	if got := h.answer(sync).(*kmsg.SyncGroupResponse).ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("sync after a failed write: %d", got)
	}
	if state := h.coordinator.groups["g"].state; state != statePreparingRebalance {
		t.Fatalf("group %s after a failed assignment write", state)
	}
}

// TestMemberIDsDifferAcrossCoordinators: coordinators of one partition
// that loaded the same log hand out different ids when they began serving
// at different times or for different leaderships.
func TestMemberIDsDifferAcrossCoordinators(t *testing.T) {
	idAt := func(nowMs int64, leadership uint64) string {
		c := NewCoordinator(DefaultConfig(), 7)
		c.SetLeadership(leadership)
		c.FinishLoad(nowMs)
		c.Handle(nowMs, 1, joinRequestFor(9, "g", ""))
		return c.Ready().Answers[0].Response.(*kmsg.JoinGroupResponse).MemberID
	}
	first := idAt(1000, 1)
	if first != idAt(1000, 1) {
		t.Fatal("the same incarnation gave different ids")
	}
	if first == idAt(1001, 1) || first == idAt(1000, 2) {
		t.Fatal("two incarnations gave the same id")
	}
	if !strings.HasPrefix(first, "-") || len(first) != 37 {
		t.Fatalf("id %q is not <client id>-<UUID>", first)
	}
}
