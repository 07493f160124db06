package group

import (
	"errors"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/group/consumerheartbeat"
	"github.com/tidelog/tide/internal/group/reconcile"
	"github.com/tidelog/tide/internal/rules"
)

// ConsumerGroupHeartbeat (68), v0-v1 (KIP-848; v1 is KIP-1082's
// client-generated member id), following Kafka's
// GroupMetadataManager.consumerGroupHeartbeat: validate, find or create
// the group and the member, check the member epoch, update the
// subscription and bump the group epoch on a change, compute the target
// assignment when the group epoch has passed it, move the member one step
// toward it (reconcile, revoke before assign), persist what changed, and
// answer once that is committed (rule answer-after-commit).

// heartbeatError answers a heartbeat with an error code and message.
func heartbeatError(request *kmsg.ConsumerGroupHeartbeatRequest, code int16, message string) *kmsg.ConsumerGroupHeartbeatResponse {
	response := request.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	response.ErrorCode = code
	if message != "" {
		response.ErrorMessage = &message
	}
	return response
}

func (c *Coordinator) handleConsumerGroupHeartbeat(id RequestID, client Client, request *kmsg.ConsumerGroupHeartbeatRequest) {
	if err := consumerheartbeat.Validate(request, consumerheartbeat.Options{ServerAssignors: assignor.Names(), AllowRegex: true}); err != nil {
		var refused *consumerheartbeat.Error
		errors.As(err, &refused)
		c.answer(id, heartbeatError(request, refused.Code.Code, refused.Message))
		return
	}
	if !c.canWrite() {
		c.answer(id, heartbeatError(request, kerr.CoordinatorNotAvailable.Code, ""))
		return
	}
	group, code := c.consumerGroupFor(request)
	if code != 0 {
		c.answer(id, heartbeatError(request, code, ""))
		return
	}
	c.beginChange(group)
	var response *kmsg.ConsumerGroupHeartbeatResponse
	switch request.MemberEpoch {
	case consumerheartbeat.LeaveEpoch, consumerheartbeat.StaticLeaveEpoch:
		response = c.consumerLeave(group, request)
	default:
		response = c.consumerHeartbeat(group, client, request)
	}
	// Even a refused heartbeat may have changed the group (a fenced
	// member's new subscription, a bumped epoch): what changed is written,
	// and the answer waits for it, so live state never runs ahead of the
	// log.
	c.writeConsumerGroup(group, func(errorCode int16) {
		if errorCode != 0 {
			response = heartbeatError(request, errorCode, "")
		}
		c.answer(id, response)
	})
	c.dropIfEmptyAndUnwritten(group)
}

// consumerGroupFor finds the request's group, or creates it on a join. A
// classic group of the id that is empty is replaced (its metadata
// tombstoned; its offsets stay); a non-empty one is GROUP_ID_NOT_FOUND, as
// Kafka answers when it does not convert a classic group (tide does not
// convert: group.consumer.migration.policy=disabled).
func (c *Coordinator) consumerGroupFor(request *kmsg.ConsumerGroupHeartbeatRequest) (*consumerGroup, int16) {
	if group := c.consumerGroups[request.Group]; group != nil {
		return group, 0
	}
	if request.MemberEpoch != consumerheartbeat.JoinEpoch {
		return nil, kerr.GroupIDNotFound.Code
	}
	if classic := c.groups[request.Group]; classic != nil {
		if classic.state != stateEmpty || len(classic.members) > 0 || len(classic.pendingMembers) > 0 {
			return nil, kerr.GroupIDNotFound.Code
		}
		delete(c.groups, request.Group)
		if durable := c.durable[request.Group]; (durable != nil && durable.metadata != nil) || c.hasPendingWritesFor(request.Group) {
			c.write([]Record{groupTombstone(request.Group)}, func(int16) {})
			// The classic group is gone from the live state: if the
			// tombstone fails, only a coordinator that loads the log
			// knows the group again.
			if write := c.pending[c.nextAppend]; write != nil {
				write.consumer = true
			}
		}
	}
	group := newConsumerGroup(request.Group)
	c.consumerGroups[request.Group] = group
	return group, 0
}

// dropIfEmptyAndUnwritten forgets a group a refused join created: it has
// no records, and replay would not know it.
func (c *Coordinator) dropIfEmptyAndUnwritten(group *consumerGroup) {
	if len(group.members) == 0 && group.epoch == 0 && c.durable[group.id] == nil && !c.hasPendingWritesFor(group.id) {
		delete(c.consumerGroups, group.id)
	}
}

// writeConsumerGroup ends the group's change, writes what changed and
// runs done once it is committed; with nothing to write, done runs once
// the group's earlier writes are committed, so no answer shows state that
// is not yet durable.
func (c *Coordinator) writeConsumerGroup(group *consumerGroup, done func(errorCode int16)) {
	records := c.endChange(group)
	if len(records) > 0 {
		c.write(records, done)
		return
	}
	if !c.hasPendingWritesFor(group.id) {
		done(0)
		return
	}
	c.consumerWaits = append(c.consumerWaits, consumerWait{after: c.nextAppend, done: done})
}

// consumerWait is an answer held until the appends before it are
// reported.
type consumerWait struct {
	after AppendID
	done  func(errorCode int16)
}

// answerConsumerWaits runs the waits whose appends are all reported.
func (c *Coordinator) answerConsumerWaits() {
	kept := c.consumerWaits[:0]
	for _, wait := range c.consumerWaits {
		if c.pendingUpTo(wait.after) {
			kept = append(kept, wait)
			continue
		}
		wait.done(0)
	}
	c.consumerWaits = kept
}

// consumerHeartbeat handles a join (epoch 0) or a heartbeat (epoch > 0).
func (c *Coordinator) consumerHeartbeat(group *consumerGroup, client Client, request *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	if group.epoch == math.MaxInt32 {
		// Every change bumps the group epoch, which cannot grow any more:
		// refuse before anything changes rather than overflow (found by
		// FuzzLoad, from a stored epoch; 2^31 changes of one group
		// otherwise).
		return heartbeatError(request, kerr.UnknownServerError.Code, "the group epoch cannot grow any more: delete the group")
	}
	owned := consumerheartbeat.Owned(request, func(id [16]byte) (string, bool) { return c.topicName(group, id) })
	member, code := c.consumerMemberFor(group, client, request, owned)
	if code != 0 {
		return heartbeatError(request, code, "")
	}
	c.touch(group, member.id)
	previousAssigned := member.current.Assigned
	bump := c.updateSubscription(group, member, client, request)
	if c.refreshSubscriptionMetadata(group) {
		bump = true
	}
	if bump {
		group.epoch++
	}
	if group.epoch > group.assignmentEpoch {
		if err := c.computeTarget(group); err != nil {
			return heartbeatError(request, kerr.UnknownServerError.Code, err.Error())
		}
	}
	if code := c.reconcileMember(group, member, owned); code != 0 {
		return heartbeatError(request, code, "")
	}
	member.sessionDeadlineMs = c.at(c.nowMs + c.config.ConsumerSessionTimeoutMs)
	response := request.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	response.MemberID = &member.id
	response.MemberEpoch, response.HeartbeatIntervalMillis = member.current.MemberEpoch, c.config.ConsumerHeartbeatIntervalMs
	full := request.MemberEpoch == consumerheartbeat.JoinEpoch ||
		(request.RebalanceTimeoutMillis != -1 && request.SubscribedTopicNames != nil && request.Topics != nil)
	if full || !assignmentsEqual(previousAssigned, member.current.Assigned) {
		response.Assignment = consumerheartbeat.Assignment(member.current.Assigned, func(name string) ([16]byte, bool) { return c.topicID(group, name) })
	}
	return response
}

// consumerMemberFor finds the member a heartbeat is from, or makes it on a
// join, with Kafka's answers: UNKNOWN_MEMBER_ID for a member the group
// does not have, FENCED_MEMBER_EPOCH for a wrong epoch, for static members
// UNRELEASED_INSTANCE_ID and FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED.
func (c *Coordinator) consumerMemberFor(group *consumerGroup, client Client, request *kmsg.ConsumerGroupHeartbeatRequest,
	owned assignor.Assignment) (*consumerMember, int16) {
	memberID := request.MemberID
	if request.InstanceID != nil {
		holder, held := group.instances[*request.InstanceID]
		switch {
		case request.MemberEpoch != consumerheartbeat.JoinEpoch && !held:
			return nil, kerr.UnknownMemberID.Code
		case request.MemberEpoch != consumerheartbeat.JoinEpoch && holder != memberID:
			return nil, kerr.FencedInstanceID.Code
		case request.MemberEpoch == consumerheartbeat.JoinEpoch && held:
			// Kafka's rule, whatever the member id: the instance rejoins
			// only after its holder left with -2.
			if group.members[holder].current.MemberEpoch != consumerheartbeat.StaticLeaveEpoch {
				return nil, kerr.UnreleasedInstanceID.Code
			}
			return c.replaceStaticConsumerMember(group, group.members[holder], memberID), 0
		}
	}
	member := group.members[memberID]
	if member == nil {
		if request.MemberEpoch != consumerheartbeat.JoinEpoch {
			return nil, kerr.UnknownMemberID.Code
		}
		if len(group.members) >= int(c.config.ConsumerMaxSize) {
			return nil, kerr.GroupMaxSizeReached.Code
		}
		if memberID == "" {
			memberID = c.newMemberID("")[1:] // v0: the coordinator names the member, a bare UUID as Kafka
		}
		c.touch(group, memberID)
		// Its session starts now, so a join that fails past this point
		// (no target can be computed) leaves a member that expires.
		member = &consumerMember{id: memberID, target: assignor.Assignment{}, metadata: consumerMemberMetadata{rebalanceTimeoutMs: -1},
			current:           reconcile.Member{Assigned: assignor.Assignment{}, PendingRevocation: assignor.Assignment{}},
			sessionDeadlineMs: c.at(c.nowMs + c.config.ConsumerSessionTimeoutMs)}
		group.members[memberID] = member
		return member, 0
	}
	if err := reconcile.ValidateEpoch(member.current, request.MemberEpoch, owned); err != nil {
		return nil, kerr.FencedMemberEpoch.Code
	}
	return member, 0
}

// replaceStaticConsumerMember gives a static member's place, after its temporary
// leave (epoch -2), to its new member id (or its old one, rejoining): the
// assignment is inherited with epochs 0, as Kafka does; an old id's
// records are tombstoned.
func (c *Coordinator) replaceStaticConsumerMember(group *consumerGroup, old *consumerMember, memberID string) *consumerMember {
	if memberID == "" {
		memberID = c.newMemberID("")[1:]
	}
	c.touch(group, old.id)
	c.touch(group, memberID)
	member := &consumerMember{id: memberID, metadata: old.metadata, regex: old.regex, target: old.target, current: old.current,
		sessionDeadlineMs: c.at(c.nowMs + c.config.ConsumerSessionTimeoutMs)}
	member.current.MemberEpoch, member.current.PreviousMemberEpoch = 0, 0
	group.owners.Remove(old.id, old.current)
	delete(group.members, old.id)
	group.members[memberID] = member
	group.instances[*old.metadata.instanceID] = memberID
	group.owners.Update(memberID, reconcile.Member{}, member.current)
	return member
}

// updateSubscription applies the request's non-null fields to the member
// and reports whether the subscription changed (which bumps the epoch).
func (c *Coordinator) updateSubscription(group *consumerGroup, member *consumerMember, client Client, request *kmsg.ConsumerGroupHeartbeatRequest) bool {
	metadata := &member.metadata
	metadata.clientID, metadata.clientHost = client.ID, client.Host
	if request.InstanceID != nil {
		metadata.instanceID = request.InstanceID
		group.instances[*request.InstanceID] = member.id
	}
	if request.RackID != nil {
		metadata.rackID = request.RackID
	}
	if request.RebalanceTimeoutMillis != -1 {
		metadata.rebalanceTimeoutMs = request.RebalanceTimeoutMillis
	}
	if request.ServerAssignor != nil {
		metadata.serverAssignor = request.ServerAssignor
	}
	changed := false
	if request.SubscribedTopicRegex != nil {
		regex := *request.SubscribedTopicRegex
		var pointer *string
		if regex != "" {
			pointer = &regex // an empty expression drops the member's regex
		}
		if stringOrEmpty(pointer) != stringOrEmpty(metadata.subscribedTopicRegex) {
			metadata.subscribedTopicRegex, member.regex = pointer, compileSubscription(pointer)
			changed = true
		}
	}
	if request.SubscribedTopicNames == nil {
		return changed
	}
	names := slices.Clone(request.SubscribedTopicNames)
	slices.Sort(names)
	names = slices.Compact(names)
	if metadata.subscribedTopicNames != nil && slices.Equal(names, metadata.subscribedTopicNames) {
		return changed
	}
	metadata.subscribedTopicNames = names
	return true
}

// refreshSubscriptionMetadata computes the subscription metadata from the
// members' subscriptions and the metadata image, and reports whether it
// changed.
func (c *Coordinator) refreshSubscriptionMetadata(group *consumerGroup) bool {
	subscribed := c.consumerSubscribedTopics(group)
	subscription := []consumerTopicMetadata{}
	for _, name := range sortedKeys(subscribed) {
		if topic, ok := c.topics[name]; ok {
			subscription = append(subscription, consumerTopicMetadata{id: topic.ID, name: name, partitions: topic.Partitions})
		}
	}
	if slices.Equal(subscription, group.subscription) {
		return false
	}
	// The members' records name topics through the subscription: encode
	// them as they were before it changes.
	for _, id := range group.sortedMemberIDs() {
		c.touch(group, id)
	}
	group.subscription = subscription
	return true
}

// computeTarget assigns the group's partitions with its preferred
// assignor, at the group epoch.
func (c *Coordinator) computeTarget(group *consumerGroup) error {
	spec := assignor.Spec{Partitions: map[string]int32{}}
	var chosen []string
	for _, id := range group.sortedMemberIDs() {
		member := group.members[id]
		entry := assignor.Member{ID: id, Topics: c.memberTopics(member), Current: member.target}
		if member.metadata.instanceID != nil {
			entry.InstanceID = *member.metadata.instanceID
		}
		spec.Members = append(spec.Members, entry)
		chosen = append(chosen, stringOrEmpty(member.metadata.serverAssignor))
	}
	for _, topic := range group.subscription {
		spec.Partitions[topic.name] = topic.partitions
	}
	name := assignor.Preferred(chosen, assignor.Names())
	assign, _ := assignor.Lookup(name)
	targets, err := assign.Assign(spec)
	if err != nil {
		return err
	}
	for id, member := range group.members {
		c.touch(group, id)
		member.target = targets[id]
		if member.target == nil {
			member.target = assignor.Assignment{}
		}
	}
	group.assignmentEpoch = group.epoch
	return nil
}

// reconcileMember moves the member one step toward its target (rule
// revoke-before-assign: a partition goes to a new owner only once its
// previous owner reported it revoked) and arms or clears its rebalance
// timer.
func (c *Coordinator) reconcileMember(group *consumerGroup, member *consumerMember, owned assignor.Assignment) int16 {
	before := member.current
	next, err := reconcile.Next(before, reconcile.Heartbeat{TargetEpoch: group.assignmentEpoch, Target: member.target, Owned: owned,
		Owners: group.owners, MemberID: member.id}, c.config.Rules)
	if err != nil {
		return kerr.FencedMemberEpoch.Code
	}
	taken := group.owners.Update(member.id, before, next)
	if len(taken) > 0 && c.config.Rules.On(rules.RevokeBeforeAssign) {
		panic("group: reconciliation gave a member partitions another member owns: " + taken[0])
	}
	member.current = next
	switch {
	case next.State != reconcile.UnrevokedPartitions:
		member.rebalanceDeadlineMs = 0
	case before.State != reconcile.UnrevokedPartitions || member.rebalanceDeadlineMs == 0:
		member.rebalanceDeadlineMs = c.at(c.nowMs + int64(max(member.metadata.rebalanceTimeoutMs, 0)))
	}
	return 0
}

// consumerLeave handles epoch -1 (leave for good) and -2 (a static member
// leaving for a while: it keeps its assignment for its session timeout).
func (c *Coordinator) consumerLeave(group *consumerGroup, request *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	memberID := request.MemberID
	if request.InstanceID != nil {
		holder, held := group.instances[*request.InstanceID]
		if !held {
			return heartbeatError(request, kerr.UnknownMemberID.Code, "")
		}
		if holder != memberID {
			return heartbeatError(request, kerr.FencedInstanceID.Code, "")
		}
	}
	member := group.members[memberID]
	if member == nil {
		return heartbeatError(request, kerr.UnknownMemberID.Code, "")
	}
	response := request.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	response.MemberID, response.MemberEpoch = &member.id, request.MemberEpoch
	response.HeartbeatIntervalMillis = c.config.ConsumerHeartbeatIntervalMs
	c.touch(group, member.id)
	if request.MemberEpoch == consumerheartbeat.StaticLeaveEpoch {
		before := member.current
		member.current = reconcile.Member{State: reconcile.Stable, MemberEpoch: consumerheartbeat.StaticLeaveEpoch,
			PreviousMemberEpoch: before.MemberEpoch, Assigned: before.Assigned, PendingRevocation: assignor.Assignment{}}
		group.owners.Update(member.id, before, member.current)
		member.rebalanceDeadlineMs = 0
		return response
	}
	c.removeConsumerMember(group, member)
	return response
}

// removeConsumerMember removes a member that left or was fenced: its
// partitions are free, and the group epoch is bumped so the others get a
// new target.
func (c *Coordinator) removeConsumerMember(group *consumerGroup, member *consumerMember) {
	c.touch(group, member.id)
	group.owners.Remove(member.id, member.current)
	delete(group.members, member.id)
	if member.metadata.instanceID != nil && group.instances[*member.metadata.instanceID] == member.id {
		delete(group.instances, *member.metadata.instanceID)
	}
	c.refreshSubscriptionMetadata(group)
	if group.epoch < math.MaxInt32 { // a group at the largest epoch takes no heartbeat (consumerHeartbeat)
		group.epoch++
	}
}

// tickConsumerGroup fences the members whose session or rebalance timeout
// has passed, as a leave (-1) would remove them. Each removal is its own
// append, as each of Kafka's session timers fences one member: the
// records of many members removed at once could outgrow a batch the
// offsets topic takes (MESSAGE_TOO_LARGE), and a refused append unloads
// the coordinator, whose successor starts every loaded member's session
// again and, when they expire together, writes the same batch again,
// forever (the simulator's check that groups settle after healing found
// a group stuck so with five dead members).
func (c *Coordinator) tickConsumerGroup(group *consumerGroup) {
	if group.earliestDeadlineMs() > c.nowMs {
		return
	}
	for _, id := range group.sortedMemberIDs() {
		member := group.members[id]
		sessionOver := c.nowMs >= member.sessionDeadlineMs
		rebalanceOver := member.rebalanceDeadlineMs != 0 && c.nowMs >= member.rebalanceDeadlineMs
		if !sessionOver && !rebalanceOver {
			continue
		}
		if !c.canWrite() {
			member.sessionDeadlineMs = c.at(c.nowMs + 1) // again at the next tick
			continue
		}
		c.beginChange(group)
		c.removeConsumerMember(group, member)
		c.writeConsumerGroup(group, func(int16) {})
	}
}

func stringOrEmpty(value *string) string {
	if value == nil {
		return ""
	}
	return *value
}

func assignmentsEqual(a, b assignor.Assignment) bool {
	if a.Count() != b.Count() {
		return false
	}
	for topic, partitions := range a {
		if !slices.Equal(partitions, b[topic]) {
			return false
		}
	}
	return true
}
