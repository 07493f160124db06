package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup (11), v0-v9: KIP-394 (v4+: a new member is handed its id with
// MEMBER_ID_REQUIRED and joins again with it), KIP-345 (v5+: static
// members by group.instance.id; a zombie of a replaced one is
// FENCED_INSTANCE_ID), KIP-800 (v8 reason, ignored), KIP-814 (v9:
// SkipAssignment for a static leader replaced in Stable).

// joinRequest is a JoinGroup with its defaults filled.
type joinRequest struct {
	id                 RequestID
	version            int16
	client             Client
	memberID           string
	instanceID         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocolType       string
	protocols          []protocol
}

func (c *Coordinator) handleJoinGroup(id RequestID, client Client, request *kmsg.JoinGroupRequest) {
	join := joinRequest{id: id, version: request.Version, client: client, memberID: request.MemberID,
		sessionTimeoutMs: request.SessionTimeoutMillis, rebalanceTimeoutMs: request.RebalanceTimeoutMillis, protocolType: request.ProtocolType}
	if request.Version < 1 || join.rebalanceTimeoutMs <= 0 {
		join.rebalanceTimeoutMs = join.sessionTimeoutMs
	}
	if request.InstanceID != nil {
		join.instanceID = *request.InstanceID
	}
	for _, offered := range request.Protocols {
		join.protocols = append(join.protocols, protocol{name: offered.Name, metadata: offered.Metadata})
	}
	errorCode := int16(0)
	switch {
	case request.Group == "":
		errorCode = kerr.InvalidGroupID.Code
	case join.sessionTimeoutMs < c.config.MinSessionTimeoutMs || join.sessionTimeoutMs > c.config.MaxSessionTimeoutMs:
		errorCode = kerr.InvalidSessionTimeout.Code
	case c.parked >= c.config.MaxParkedRequests || !c.canWrite():
		errorCode = kerr.CoordinatorNotAvailable.Code
	}
	if errorCode != 0 {
		c.answer(id, errorResponse(request, errorCode))
		return
	}
	group := c.groups[request.Group]
	if group == nil {
		if join.memberID != "" {
			c.answer(id, errorResponse(request, kerr.UnknownMemberID.Code))
			return
		}
		group = newGroup(request.Group, c.nowMs)
		c.groups[request.Group] = group
		defer c.writeCreatedGroup(group)
	}
	if !c.acceptJoiningMember(group, join.memberID) {
		if member, ok := group.members[join.memberID]; ok {
			c.removeMember(group, member, kerr.GroupMaxSizeReached.Code)
		}
		c.answerJoin(&parked{request: id, version: join.version}, &kmsg.JoinGroupResponse{ErrorCode: kerr.GroupMaxSizeReached.Code, Generation: -1})
		return
	}
	if join.memberID == "" {
		c.joinNewMember(group, join)
	} else {
		c.joinExistingMember(group, join)
	}
}

// writeCreatedGroup persists a group a JoinGroup created, when the join
// itself wrote nothing, as Kafka does (newEmptyGroupMetadataRecord): no
// protocol type, generation 0, no members (they are still joining, and a
// coordinator that loaded them would take them for a Stable generation 0),
// so the group survives a coordinator change.
func (c *Coordinator) writeCreatedGroup(group *group) {
	if current := c.groups[group.id]; current != group || c.hasPendingWritesFor(group.id) {
		return
	}
	empty := groupMetadata{stateTimestampMs: group.stateTimestampMs}
	c.write([]Record{groupMetadataRecord(group.id, empty)}, func(int16) {})
}

// acceptJoiningMember is Kafka's group.max.size check: Empty always
// accepts; PreparingRebalance accepts a member already joining or while
// fewer than the maximum are; otherwise a known member or while the group
// is below the maximum.
func (c *Coordinator) acceptJoiningMember(group *group, memberID string) bool {
	member, known := group.members[memberID]
	switch group.state {
	case stateEmpty, stateDead:
		return true
	case statePreparingRebalance:
		return (known && member.join != nil) || group.awaitingJoinCount() < int(c.config.MaxSize)
	}
	return known || len(group.members) < int(c.config.MaxSize)
}

// joinNewMember handles a JoinGroup without a member id.
func (c *Coordinator) joinNewMember(group *group, join joinRequest) {
	if group.state == stateDead {
		c.answerJoinError(&parked{request: join.id, version: join.version}, "", kerr.CoordinatorNotAvailable.Code)
		return
	}
	if !group.supportsProtocols(join.protocolType, join.protocols) {
		c.answerJoinError(&parked{request: join.id, version: join.version}, "", kerr.InconsistentGroupProtocol.Code)
		return
	}
	prefix := join.client.ID
	if join.instanceID != "" {
		prefix = join.instanceID
	}
	join.memberID = c.newMemberID(prefix)
	switch {
	case join.instanceID != "" && group.instances[join.instanceID] != "":
		c.replaceStaticMember(group, group.members[group.instances[join.instanceID]], join)
	case join.instanceID == "" && join.version >= 4:
		group.pendingMembers[join.memberID] = c.at(c.nowMs + int64(join.sessionTimeoutMs))
		c.answerJoinError(&parked{request: join.id, version: join.version}, join.memberID, kerr.MemberIDRequired.Code)
	default:
		c.addMember(group, join)
	}
}

// joinExistingMember handles a JoinGroup with a member id: a pending one
// joins now; a known one rejoins, with an effect that depends on the state.
func (c *Coordinator) joinExistingMember(group *group, join joinRequest) {
	park := &parked{request: join.id, version: join.version}
	if group.state == stateDead {
		c.answerJoinError(park, join.memberID, kerr.CoordinatorNotAvailable.Code)
		return
	}
	if !group.supportsProtocols(join.protocolType, join.protocols) {
		c.answerJoinError(park, join.memberID, kerr.InconsistentGroupProtocol.Code)
		return
	}
	if _, pending := group.pendingMembers[join.memberID]; pending {
		delete(group.pendingMembers, join.memberID)
		if join.instanceID != "" {
			c.answerJoinError(park, join.memberID, kerr.UnknownMemberID.Code)
			return
		}
		c.addMember(group, join)
		return
	}
	if errorCode := group.validateMember(join.memberID, join.instanceID); errorCode != 0 {
		c.answerJoinError(park, join.memberID, errorCode)
		return
	}
	member := group.members[join.memberID]
	switch group.state {
	case statePreparingRebalance:
		c.updateMember(member, join)
		c.maybeCompleteJoin(group)
	case stateCompletingRebalance:
		if member.matches(join) {
			c.answerJoin(park, c.joinResponse(group, member.id, true))
			return
		}
		c.updateMember(member, join)
		c.prepareRebalance(group)
	case stateStable:
		if member.id == group.leader || !member.matches(join) {
			c.updateMember(member, join)
			c.prepareRebalance(group)
			return
		}
		c.answerJoin(park, c.joinResponse(group, member.id, false))
	default:
		c.answerJoinError(park, join.memberID, kerr.UnknownMemberID.Code)
	}
}

// matches reports whether a rejoin changes nothing of the member's
// protocols.
func (m *member) matches(join joinRequest) bool {
	if len(m.protocols) != len(join.protocols) {
		return false
	}
	for i, protocol := range m.protocols {
		if protocol.name != join.protocols[i].name || !bytes.Equal(protocol.metadata, join.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// addMember adds a joining member and parks its JoinGroup; the first
// member sets the group's protocol type and becomes leader.
func (c *Coordinator) addMember(group *group, join joinRequest) {
	if len(group.members) == 0 {
		group.protocolType = join.protocolType
	}
	member := &member{id: join.memberID, instanceID: join.instanceID, clientID: join.client.ID, clientHost: join.client.Host, isNew: true}
	group.members[member.id] = member
	if group.leader == "" {
		group.leader = member.id
	}
	if member.instanceID != "" {
		group.instances[member.instanceID] = member.id
	}
	c.updateMember(member, join)
	member.heartbeatDeadlineMs = c.at(c.nowMs + int64(c.config.NewMemberJoinTimeoutMs))
	if group.state == statePreparingRebalance && group.initialRebalance {
		group.newMemberAdded = true
	}
	if group.canRebalance() {
		c.prepareRebalance(group)
	} else {
		c.maybeCompleteJoin(group)
	}
}

// updateMember takes a JoinGroup's protocols and timeouts and parks it.
func (c *Coordinator) updateMember(member *member, join joinRequest) {
	member.protocolType, member.protocols = join.protocolType, join.protocols
	member.sessionTimeoutMs, member.rebalanceTimeoutMs = join.sessionTimeoutMs, join.rebalanceTimeoutMs
	if member.join != nil {
		c.answerJoinError(member.join, member.id, kerr.RebalanceInProgress.Code)
	}
	member.join = c.parkFor(join)
}

func (c *Coordinator) parkFor(join joinRequest) *parked {
	c.parked++
	return &parked{request: join.id, version: join.version, held: true}
}

// joinResponse is the answer of a member at the group's current
// generation; the leader gets every member's metadata when withMembers.
func (c *Coordinator) joinResponse(group *group, memberID string, withMembers bool) *kmsg.JoinGroupResponse {
	protocolType, protocol := group.protocolType, group.protocol
	response := &kmsg.JoinGroupResponse{Generation: group.generation, ProtocolType: &protocolType, Protocol: &protocol,
		LeaderID: group.leader, MemberID: memberID}
	if withMembers && memberID == group.leader {
		response.Members = c.joinMembers(group)
	}
	return response
}

func (c *Coordinator) joinMembers(group *group) []kmsg.JoinGroupResponseMember {
	members := make([]kmsg.JoinGroupResponseMember, 0, len(group.members))
	for _, id := range group.sortedMemberIDs() {
		member := group.members[id]
		entry := kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: member.metadataFor(group.protocol)}
		if member.instanceID != "" {
			instanceID := member.instanceID
			entry.InstanceID = &instanceID
		}
		members = append(members, entry)
	}
	return members
}

// answerJoin answers a JoinGroup at its version and unparks it.
func (c *Coordinator) answerJoin(park *parked, response *kmsg.JoinGroupResponse) {
	response.Version = park.version
	c.release(park)
	c.answer(park.request, response)
}

// answerJoinError answers a JoinGroup with an error (for
// MEMBER_ID_REQUIRED, with the member id to join with).
func (c *Coordinator) answerJoinError(park *parked, memberID string, errorCode int16) {
	c.answerJoin(park, &kmsg.JoinGroupResponse{ErrorCode: errorCode, Generation: -1, MemberID: memberID})
}
