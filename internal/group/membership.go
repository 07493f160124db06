package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat (12), v0-v4, and LeaveGroup (13), v0-v5 (KIP-345: a batch of
// members by member id or instance id from v3; v5 reasons, ignored).

// handleHeartbeat keeps a member's session and tells it whether to rejoin:
// REBALANCE_IN_PROGRESS while the group prepares a rebalance. A member of
// the previous generation passes the generation check then, since the
// generation is bumped only when the join phase ends.
func (c *Coordinator) handleHeartbeat(id RequestID, request *kmsg.HeartbeatRequest) {
	response := request.ResponseKind().(*kmsg.HeartbeatResponse)
	response.Version = request.Version
	group := c.groups[request.Group]
	instanceID := ""
	if request.InstanceID != nil {
		instanceID = *request.InstanceID
	}
	switch {
	case group == nil:
		response.ErrorCode = kerr.UnknownMemberID.Code
	case group.state == stateDead:
		response.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		response.ErrorCode = group.validateMember(request.MemberID, instanceID)
	}
	if response.ErrorCode == 0 && request.Generation != group.generation {
		response.ErrorCode = kerr.IllegalGeneration.Code
	}
	if response.ErrorCode == 0 {
		member := group.members[request.MemberID]
		member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
		if group.state == statePreparingRebalance {
			response.ErrorCode = kerr.RebalanceInProgress.Code
		}
	}
	c.answer(id, response)
}

// handleLeaveGroup removes members: v0-v2 one by member id (its error
// becomes the top-level one), v3+ a batch, each by member id or, with an
// empty member id, by instance id (the admin's removal of a static
// member). If any left, the group rebalances (or ends its join phase).
func (c *Coordinator) handleLeaveGroup(id RequestID, request *kmsg.LeaveGroupRequest) {
	response := request.ResponseKind().(*kmsg.LeaveGroupResponse)
	response.Version = request.Version
	group := c.groups[request.Group]
	switch {
	case group == nil:
		response.ErrorCode = kerr.UnknownMemberID.Code
	case group.state == stateDead:
		response.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	if response.ErrorCode != 0 {
		c.answer(id, response)
		return
	}
	leaving := request.Members
	if request.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: request.MemberID}}
	}
	left := false
	for _, entry := range leaving {
		result := kmsg.LeaveGroupResponseMember{MemberID: entry.MemberID, InstanceID: entry.InstanceID}
		result.ErrorCode = c.leaveOne(group, entry)
		left = left || result.ErrorCode == 0
		response.Members = append(response.Members, result)
	}
	if request.Version < 3 {
		response.ErrorCode, response.Members = response.Members[0].ErrorCode, nil
	}
	if left {
		switch group.state {
		case stateStable, stateCompletingRebalance:
			c.prepareRebalance(group)
		case statePreparingRebalance:
			c.maybeCompleteJoin(group)
		}
	}
	c.answer(id, response)
}

// leaveOne removes one member without moving the group on.
func (c *Coordinator) leaveOne(group *group, entry kmsg.LeaveGroupRequestMember) int16 {
	instanceID := ""
	if entry.InstanceID != nil {
		instanceID = *entry.InstanceID
	}
	memberID := entry.MemberID
	if memberID == "" && instanceID != "" {
		holder, ok := group.instances[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		memberID = holder
	} else if _, pending := group.pendingMembers[memberID]; pending {
		delete(group.pendingMembers, memberID)
		return 0
	} else if errorCode := group.validateMember(memberID, instanceID); errorCode != 0 {
		return errorCode
	}
	c.dropMember(group, group.members[memberID], kerr.UnknownMemberID.Code)
	return 0
}
