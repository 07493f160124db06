package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup (14), v0-v5: KIP-345 instance ids from v3; v5 requires the
// protocol type and name (KIP-559), INCONSISTENT_GROUP_PROTOCOL without
// them or when they differ from the group's.

func (c *Coordinator) handleSyncGroup(id RequestID, request *kmsg.SyncGroupRequest) {
	park := &parked{request: id, version: request.Version}
	group := c.groups[request.Group]
	instanceID := ""
	if request.InstanceID != nil {
		instanceID = *request.InstanceID
	}
	errorCode := int16(0)
	switch {
	case request.Version >= 5 && (request.ProtocolType == nil || request.Protocol == nil):
		errorCode = kerr.InconsistentGroupProtocol.Code
	case group == nil || group.state == stateEmpty:
		errorCode = kerr.UnknownMemberID.Code
	case group.state == stateDead:
		errorCode = kerr.CoordinatorNotAvailable.Code
	}
	if errorCode == 0 {
		errorCode = group.validateMember(request.MemberID, instanceID)
	}
	switch {
	case errorCode != 0:
	case request.Generation != group.generation:
		errorCode = kerr.IllegalGeneration.Code
	case request.ProtocolType != nil && *request.ProtocolType != group.protocolType,
		request.Protocol != nil && *request.Protocol != group.protocol:
		errorCode = kerr.InconsistentGroupProtocol.Code
	case group.state == statePreparingRebalance:
		errorCode = kerr.RebalanceInProgress.Code
	case c.parked >= c.config.MaxParkedRequests || !c.canWrite():
		errorCode = kerr.CoordinatorNotAvailable.Code
	}
	if errorCode != 0 {
		c.answerSync(park, errorCode, group, nil)
		return
	}
	member := group.members[request.MemberID]
	delete(group.pendingSync, member.id)
	member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
	if group.state == stateStable {
		c.answerSync(park, 0, group, member.assignment)
		return
	}
	if member.sync != nil {
		c.answerSync(member.sync, kerr.RebalanceInProgress.Code, group, nil)
	}
	c.parked++
	park.held = true
	member.sync = park
	if member.id == group.leader {
		c.persistAssignment(group, request.GroupAssignment)
	}
}

// persistAssignment takes the leader's assignment (members it left out get
// an empty one) and writes the group's metadata record. Once it is
// committed, and the group is still completing the same generation, every
// parked SyncGroup gets its assignment and the group is Stable: no member
// starts consuming on an assignment a new coordinator would not know. If
// the write fails, the parked SyncGroups get the error and the group
// rebalances.
func (c *Coordinator) persistAssignment(group *group, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	byMember := map[string][]byte{}
	for _, assignment := range assignments {
		byMember[assignment.MemberID] = assignment.MemberAssignment
	}
	for id, member := range group.members {
		member.assignment = byMember[id]
		if member.assignment == nil {
			member.assignment = []byte{}
		}
	}
	generation := group.generation
	c.write([]Record{groupMetadataRecord(group.id, group.metadataValue())}, func(errorCode int16) {
		if c.groups[group.id] != group || group.generation != generation || group.state != stateCompletingRebalance {
			return
		}
		if errorCode != 0 {
			for _, id := range group.sortedMemberIDs() {
				if member := group.members[id]; member.sync != nil {
					c.answerSync(member.sync, errorCode, group, nil)
					member.sync = nil
				}
			}
			c.prepareRebalance(group)
			return
		}
		group.transition(stateStable, c.nowMs)
		for _, id := range group.sortedMemberIDs() {
			member := group.members[id]
			if member.sync != nil {
				c.answerSync(member.sync, 0, group, member.assignment)
				member.sync = nil
				member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
			}
		}
	})
}

// answerSync answers a SyncGroup at its version (v5+ with the group's
// protocol type and name when it succeeds) and unparks it.
func (c *Coordinator) answerSync(park *parked, errorCode int16, group *group, assignment []byte) {
	response := syncErrorResponse(errorCode)
	response.Version = park.version
	if errorCode == 0 {
		response.MemberAssignment = assignment
		if response.MemberAssignment == nil {
			response.MemberAssignment = []byte{}
		}
		protocolType, protocol := group.protocolType, group.protocol
		response.ProtocolType, response.Protocol = &protocolType, &protocol
	}
	c.release(park)
	c.answer(park.request, response)
}
