package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic rebalance (Kafka's GroupMetadataManager): prepare, the join
// phase and its timers, the next generation, static member replacement,
// and member removal.

// prepareRebalance starts a join phase. Parked SyncGroups of the
// generation being abandoned get REBALANCE_IN_PROGRESS. Out of Empty the
// phase waits group.initial.rebalance.delay.ms (re-armed while members
// keep arriving, up to the rebalance timeout) and never ends early;
// otherwise it ends when every member has rejoined, or at the rebalance
// timeout.
func (c *Coordinator) prepareRebalance(group *group) {
	if group.state == stateCompletingRebalance {
		for _, id := range group.sortedMemberIDs() {
			member := group.members[id]
			member.assignment = nil
			if member.sync != nil {
				c.answerSync(member.sync, kerr.RebalanceInProgress.Code, group, nil)
				member.sync = nil
			}
		}
	}
	group.syncDeadlineMs = 0
	wasEmpty := group.state == stateEmpty
	group.transition(statePreparingRebalance, c.nowMs)
	if wasEmpty {
		delay := int64(c.config.InitialRebalanceDelayMs)
		group.initialRebalance, group.newMemberAdded = true, false
		group.initialRemainingMs = max(group.rebalanceTimeoutMs()-delay, 0)
		group.joinDeadlineMs = c.at(c.nowMs + delay)
		return
	}
	group.initialRebalance = false
	group.joinDeadlineMs = c.at(c.nowMs + group.rebalanceTimeoutMs())
	c.maybeCompleteJoin(group)
}

// maybeCompleteJoin ends the join phase once everyone has joined, except
// during the initial delay.
func (c *Coordinator) maybeCompleteJoin(group *group) {
	if group.state == statePreparingRebalance && group.allJoined() && !group.initialRebalance {
		c.completeJoin(group)
	}
}

// joinTimerFired runs when the join phase's timer is due: the initial
// delay is re-armed while new members arrived and time remains; otherwise
// the phase ends.
func (c *Coordinator) joinTimerFired(group *group) {
	group.joinDeadlineMs = 0
	if group.initialRebalance && group.newMemberAdded && group.initialRemainingMs > 0 {
		delay := min(int64(c.config.InitialRebalanceDelayMs), group.initialRemainingMs)
		group.initialRemainingMs = max(group.initialRemainingMs-delay, 0)
		group.newMemberAdded = false
		group.joinDeadlineMs = c.at(c.nowMs + delay)
		return
	}
	group.initialRebalance = false
	c.completeJoin(group)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed (static ones are kept); if members remain and none rejoined,
// the phase waits another rebalance timeout; otherwise the generation is
// bumped, the protocol chosen, and every parked JoinGroup answered (the
// leader with the members' metadata).
func (c *Coordinator) completeJoin(group *group) {
	for _, id := range group.sortedMemberIDs() {
		if member := group.members[id]; member.join == nil && member.instanceID == "" {
			c.dropMember(group, member, kerr.UnknownMemberID.Code)
		}
	}
	if len(group.members) > 0 && group.awaitingJoinCount() == 0 {
		group.joinDeadlineMs = c.at(c.nowMs + group.rebalanceTimeoutMs())
		return
	}
	if leader, ok := group.members[group.leader]; !ok || leader.join == nil {
		for _, id := range group.sortedMemberIDs() {
			if group.members[id].join != nil {
				group.leader = id
				break
			}
		}
	}
	group.joinDeadlineMs = 0
	group.generation++
	if len(group.members) == 0 {
		group.protocol, group.leader = "", ""
		group.transition(stateEmpty, c.nowMs)
		c.write([]Record{groupMetadataRecord(group.id, group.metadataValue())}, func(int16) {})
		return
	}
	group.protocol = group.selectProtocol()
	group.transition(stateCompletingRebalance, c.nowMs)
	for _, id := range group.sortedMemberIDs() {
		member := group.members[id]
		if member.join == nil {
			continue
		}
		c.answerJoin(member.join, c.joinResponse(group, id, true))
		member.join, member.isNew = nil, false
		member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
		group.pendingSync[id] = true
	}
	group.syncDeadlineMs = c.at(c.nowMs + group.rebalanceTimeoutMs())
	group.syncDeadlineGeneration = group.generation
}

// replaceStaticMember gives a known group.instance.id a new member id: the
// old id is fenced (its parked requests get FENCED_INSTANCE_ID). In Stable,
// when the protocol would not change, there is no rebalance: the group's
// metadata is written with the new id and, once committed, the member gets
// the current generation (a v9+ leader with SkipAssignment and the
// members); if the write fails the swap is undone. Otherwise the member
// rejoins as in any rebalance.
func (c *Coordinator) replaceStaticMember(group *group, old *member, join joinRequest) {
	previous := *old
	replaced := &previous
	replaced.id, replaced.join, replaced.sync = join.memberID, nil, nil
	replaced.clientID, replaced.clientHost = join.client.ID, join.client.Host
	c.swapMember(group, old, replaced)
	if old.join != nil {
		c.answerJoinError(old.join, old.id, kerr.FencedInstanceID.Code)
	}
	if old.sync != nil {
		c.answerSync(old.sync, kerr.FencedInstanceID.Code, group, nil)
	}
	old.join, old.sync = nil, nil
	if group.state == stateStable && group.protocolAfter(replaced, join.protocols) == group.protocol {
		replaced.protocols, replaced.sessionTimeoutMs, replaced.rebalanceTimeoutMs = join.protocols, join.sessionTimeoutMs, join.rebalanceTimeoutMs
		replaced.heartbeatDeadlineMs = c.at(c.nowMs + int64(replaced.sessionTimeoutMs))
		park := &parked{request: join.id, version: join.version} // held by the append, bounded by MaxPendingAppends
		generation := group.generation
		c.write([]Record{groupMetadataRecord(group.id, group.metadataValue())}, func(errorCode int16) {
			if errorCode != 0 {
				if group.members[replaced.id] == replaced {
					c.swapMember(group, replaced, old)
				}
				c.answerJoinError(park, "", errorCode)
				return
			}
			response := c.joinResponse(group, replaced.id, false)
			response.Generation = generation
			if replaced.id == group.leader && join.version >= 9 {
				response.SkipAssignment, response.Members = true, c.joinMembers(group)
			} else if replaced.id == group.leader {
				response.LeaderID = old.id
			}
			c.answerJoin(park, response)
		})
		return
	}
	c.updateMember(replaced, join)
	if group.state == statePreparingRebalance {
		c.maybeCompleteJoin(group)
		return
	}
	c.prepareRebalance(group)
}

// swapMember puts next in the place of current (same instance id).
func (c *Coordinator) swapMember(group *group, current, next *member) {
	delete(group.members, current.id)
	group.members[next.id] = next
	group.instances[next.instanceID] = next.id
	if group.leader == current.id {
		group.leader = next.id
	}
	if group.pendingSync[current.id] {
		delete(group.pendingSync, current.id)
		group.pendingSync[next.id] = true
	}
}

// protocolAfter is the protocol the vote would choose if member offered
// protocols.
func (g *group) protocolAfter(member *member, protocols []protocol) string {
	saved := member.protocols
	member.protocols = protocols
	chosen := g.selectProtocol()
	member.protocols = saved
	return chosen
}

// removeMember removes a member that left, timed out or was rejected, and
// moves the group on: a rebalance from Stable or CompletingRebalance, the
// end of the join phase if everyone else has joined.
func (c *Coordinator) removeMember(group *group, member *member, errorCode int16) {
	c.dropMember(group, member, errorCode)
	switch group.state {
	case stateStable, stateCompletingRebalance:
		c.prepareRebalance(group)
	case statePreparingRebalance:
		c.maybeCompleteJoin(group)
	}
}

// dropMember takes a member out of the group, answering its parked
// requests with errorCode, and hands leadership on.
func (c *Coordinator) dropMember(group *group, member *member, errorCode int16) {
	if member.join != nil {
		c.answerJoinError(member.join, member.id, errorCode)
		member.join = nil
	}
	if member.sync != nil {
		c.answerSync(member.sync, errorCode, group, nil)
		member.sync = nil
	}
	delete(group.members, member.id)
	delete(group.pendingSync, member.id)
	if member.instanceID != "" && group.instances[member.instanceID] == member.id {
		delete(group.instances, member.instanceID)
	}
	if group.leader == member.id {
		group.leader = ""
		for _, id := range group.sortedMemberIDs() {
			if group.leader == "" || group.members[id].join != nil && group.members[group.leader].join == nil {
				group.leader = id
			}
		}
	}
}

// tick runs the group's due timers: pending member ids and sessions that
// expired, the join phase, and the sync phase.
func (g *group) tick(c *Coordinator) {
	for _, id := range sortedKeys(g.pendingMembers) {
		if c.nowMs >= g.pendingMembers[id] {
			delete(g.pendingMembers, id)
			c.maybeCompleteJoin(g)
		}
	}
	for _, id := range g.sortedMemberIDs() {
		member, ok := g.members[id]
		if !ok || c.nowMs < member.heartbeatDeadlineMs {
			continue
		}
		if !member.isNew && (member.join != nil || member.sync != nil) {
			member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
			continue
		}
		c.removeMember(g, member, kerr.UnknownMemberID.Code)
	}
	if g.joinDeadlineMs != 0 && c.nowMs >= g.joinDeadlineMs && g.state == statePreparingRebalance {
		c.joinTimerFired(g)
	}
	if g.syncDeadlineMs != 0 && c.nowMs >= g.syncDeadlineMs {
		g.syncDeadlineMs = 0
		if g.generation == g.syncDeadlineGeneration && (g.state == stateCompletingRebalance || g.state == stateStable) && len(g.pendingSync) > 0 {
			for _, id := range sortedKeys(g.pendingSync) {
				if member, ok := g.members[id]; ok {
					c.dropMember(g, member, kerr.UnknownMemberID.Code)
				}
			}
			c.prepareRebalance(g)
		}
	}
}

// answerSyncError is a SyncGroup answer with only an error.
func syncErrorResponse(errorCode int16) *kmsg.SyncGroupResponse {
	return &kmsg.SyncGroupResponse{ErrorCode: errorCode}
}
