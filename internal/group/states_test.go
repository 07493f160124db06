package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupInState builds group "g" in a state, with member the id of one of
// its members (of the generation, for the states that have members).
func groupInState(t *testing.T, state groupState) (h *harness, member string, generation int32) {
	h = newHarness(t, DefaultConfig())
	leader, follower, generation := stableGroup(t, h, "g")
	switch state {
	case stateEmpty, stateDead:
		h.send(&kmsg.LeaveGroupRequest{Version: 3, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: leader}, {MemberID: follower}}})
		generation = h.coordinator.groups["g"].generation
		if state == stateDead {
			h.autoCommit = false
			h.send(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}})
		}
	case statePreparingRebalance:
		joinMember(t, h, "g")
	case stateCompletingRebalance:
		joinMember(t, h, "g")
		h.send(joinRequestFor(9, "g", leader))
		h.send(joinRequestFor(9, "g", follower))
		generation = h.coordinator.groups["g"].generation
	}
	if got := h.coordinator.groups["g"].state; got != state {
		t.Fatalf("built %s, want %s", got, state)
	}
	return h, follower, generation
}

// TestErrorsByState is the reference's table of classic requests by group
// state (kafka-groups.md §3.8), for a valid member and generation unless
// the row says otherwise.
func TestErrorsByState(t *testing.T) {
	states := []groupState{stateEmpty, statePreparingRebalance, stateCompletingRebalance, stateStable, stateDead}
	unknown, notAvailable := kerr.UnknownMemberID.Code, kerr.CoordinatorNotAvailable.Code
	rebalancing, illegal := kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code
	for _, row := range []struct {
		name string
		send func(h *harness, member string, generation int32) int16
		want []int16 // by state, in the order of states
	}{
		{"Heartbeat", func(h *harness, member string, generation int32) int16 {
			return h.answer(h.send(&kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: member, Generation: generation})).(*kmsg.HeartbeatResponse).ErrorCode
		}, []int16{unknown, rebalancing, 0, 0, notAvailable}},
		{"Heartbeat, wrong generation", func(h *harness, member string, generation int32) int16 {
			return h.answer(h.send(&kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: member, Generation: generation + 5})).(*kmsg.HeartbeatResponse).ErrorCode
		}, []int16{unknown, illegal, illegal, illegal, notAvailable}},
		{"SyncGroup", func(h *harness, member string, generation int32) int16 {
			id := h.send(syncRequestFor("g", member, generation, nil))
			if !h.answered(id) {
				return -100 // parked, waiting for the leader
			}
			return h.answer(id).(*kmsg.SyncGroupResponse).ErrorCode
		}, []int16{unknown, rebalancing, -100, 0, notAvailable}},
		{"OffsetCommit", func(h *harness, member string, generation int32) int16 {
			return h.answer(h.send(commitRequest(8, "g", generation, member, "t", map[int32]int64{0: 1}))).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, []int16{unknown, 0, rebalancing, 0, notAvailable}},
		{"OffsetCommit, generation -1, no member", func(h *harness, _ string, _ int32) int16 {
			return h.answer(h.send(commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 1}))).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, []int16{0, unknown, unknown, unknown, notAvailable}},
		{"LeaveGroup", func(h *harness, member string, _ int32) int16 {
			response := h.answer(h.send(&kmsg.LeaveGroupRequest{Version: 3, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: member}}})).(*kmsg.LeaveGroupResponse)
			if response.ErrorCode != 0 {
				return response.ErrorCode
			}
			return response.Members[0].ErrorCode
		}, []int16{unknown, 0, 0, 0, notAvailable}},
		{"JoinGroup, known member", func(h *harness, member string, _ int32) int16 {
			id := h.send(joinRequestFor(9, "g", member))
			if !h.answered(id) {
				return -100 // parked until the join phase ends
			}
			return h.answer(id).(*kmsg.JoinGroupResponse).ErrorCode
		}, []int16{unknown, -100, 0, 0, notAvailable}},
	} {
		for i, state := range states {
			h, member, generation := groupInState(t, state)
			if got := row.send(h, member, generation); got != row.want[i] {
				t.Errorf("%s in %s: %d, want %d", row.name, state, got, row.want[i])
			}
		}
	}
}

// TestLoadedGroupOverMaxSizeRebalances: a group loaded with more members
// than group.max.size (lowered since) is made to rebalance, and members
// beyond the limit are refused as they rejoin.
func TestLoadedGroupOverMaxSizeRebalances(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	stableGroup(t, h, "g")
	h.config.MaxSize = 1
	loaded := h.replay(false)
	if state := loaded.groups["g"].state; state != statePreparingRebalance {
		t.Fatalf("a loaded group over group.max.size is %s", state)
	}
	h.coordinator = loaded
	members := loaded.groups["g"].sortedMemberIDs()
	first := h.send(joinRequestFor(9, "g", members[0]))
	if got := joinResponseOf(t, h, h.send(joinRequestFor(9, "g", members[1]))).ErrorCode; got != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("the second member's rejoin: %d", got)
	}
	if got := joinResponseOf(t, h, first); got.ErrorCode != 0 || got.Generation != 2 {
		t.Fatalf("the first member's rejoin: %+v", got)
	}
}
