package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/assignor"
)

// ConsumerGroupDescribe (69), v0-v1, and what the classic APIs see of a
// consumer group: DescribeGroups and ListGroups show it with type
// "consumer"; OffsetCommit checks the member epoch; DeleteGroups deletes
// it when empty; JoinGroup and the other classic member requests are
// refused, since tide does not mix classic members into consumer groups.

// handleConsumerGroupDescribe describes each group from the live state:
// an unknown one (or a classic one) is GROUP_ID_NOT_FOUND, as Kafka
// answers.
func (c *Coordinator) handleConsumerGroupDescribe(id RequestID, request *kmsg.ConsumerGroupDescribeRequest) {
	response := request.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, groupID := range request.Groups {
		out := kmsg.NewConsumerGroupDescribeResponseGroup()
		out.Group = groupID
		if request.IncludeAuthorizedOperations {
			out.AuthorizedOperations = authorizedGroupOperations
		}
		group := c.consumerGroups[groupID]
		if group == nil {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			message := "Group " + groupID + " not found."
			out.ErrorMessage = &message
			response.Groups = append(response.Groups, out)
			continue
		}
		out.State, out.Epoch, out.AssignmentEpoch, out.AssignorName = group.state(), group.epoch, group.assignmentEpoch, c.preferredAssignor(group)
		for _, memberID := range group.sortedMemberIDs() {
			member := group.members[memberID]
			entry := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			entry.MemberID, entry.InstanceID, entry.RackID = member.id, member.metadata.instanceID, member.metadata.rackID
			entry.MemberEpoch, entry.ClientID, entry.ClientHost = member.current.MemberEpoch, member.metadata.clientID, member.metadata.clientHost
			entry.SubscribedTopics = append([]string{}, member.metadata.subscribedTopicNames...)
			entry.SubscribedTopicRegex = member.metadata.subscribedTopicRegex
			entry.Assignment, entry.TargetAssignment = c.describedAssignment(group, member.current.Assigned), c.describedAssignment(group, member.target)
			if request.Version >= 1 {
				entry.MemberType = 1 // consumer protocol (0 is classic)
			}
			out.Members = append(out.Members, entry)
		}
		response.Groups = append(response.Groups, out)
	}
	c.answer(id, response)
}

func (c *Coordinator) describedAssignment(group *consumerGroup, assignment assignor.Assignment) kmsg.Assignment {
	out := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, name := range assignment.Topics() {
		topicID, _ := c.topicID(group, name)
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: topicID, Topic: name,
			Partitions: append([]int32{}, assignment[name]...)})
	}
	return out
}

// preferredAssignor is the assignor the group uses now.
func (c *Coordinator) preferredAssignor(group *consumerGroup) string {
	var chosen []string
	for _, id := range group.sortedMemberIDs() {
		chosen = append(chosen, stringOrEmpty(group.members[id].metadata.serverAssignor))
	}
	return assignor.Preferred(chosen, assignor.Names())
}

// describeConsumerGroup is a consumer group as DescribeGroups shows it
// (Kafka's ConsumerGroup.asDescribedGroup): protocol type "consumer", the
// assignor as protocol, each member's subscription and assignment in the
// classic consumer protocol's encoding.
func (c *Coordinator) describeConsumerGroup(out *kmsg.DescribeGroupsResponseGroup, group *consumerGroup) {
	out.State, out.ProtocolType, out.Protocol = group.state(), consumerProtocolType, c.preferredAssignor(group)
	for _, memberID := range group.sortedMemberIDs() {
		member := group.members[memberID]
		entry := kmsg.DescribeGroupsResponseGroupMember{MemberID: member.id, InstanceID: member.metadata.instanceID,
			ClientID: member.metadata.clientID, ClientHost: member.metadata.clientHost}
		subscription := kmsg.ConsumerMemberMetadata{Version: 0, Topics: append([]string{}, c.memberTopics(member)...)}
		assignment := kmsg.ConsumerMemberAssignment{Version: 0}
		for _, name := range member.current.Assigned.Topics() {
			assignment.Topics = append(assignment.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: member.current.Assigned[name]})
		}
		entry.ProtocolMetadata, entry.MemberAssignment = subscription.AppendTo(nil), assignment.AppendTo(nil)
		out.Members = append(out.Members, entry)
	}
}

// refuseClassicRequest answers a classic member request for a consumer
// group and reports whether it did. JoinGroup to a non-empty one is
// INCONSISTENT_GROUP_PROTOCOL (Kafka would convert it or join the member
// through the consumer protocol; tide does neither), and to an empty one
// deletes it so the classic group can be created, as Kafka does. A
// SyncGroup, Heartbeat or LeaveGroup names a member the group cannot
// have: UNKNOWN_MEMBER_ID.
func (c *Coordinator) refuseClassicRequest(id RequestID, request kmsg.Request) bool {
	var groupID string
	switch request := request.(type) {
	case *kmsg.JoinGroupRequest:
		group := c.consumerGroups[request.Group]
		if group == nil {
			return false
		}
		if len(group.members) > 0 || !c.canWrite() {
			code := kerr.InconsistentGroupProtocol.Code
			if len(group.members) == 0 {
				code = kerr.CoordinatorNotAvailable.Code
			}
			c.answer(id, errorResponse(request, code))
			return true
		}
		c.write(c.deleteConsumerGroup(group, false), func(int16) {})
		return false
	case *kmsg.SyncGroupRequest:
		groupID = request.Group
	case *kmsg.HeartbeatRequest:
		groupID = request.Group
	case *kmsg.LeaveGroupRequest:
		groupID = request.Group
	default:
		return false
	}
	if c.consumerGroups[groupID] == nil {
		return false
	}
	c.answer(id, errorResponse(request, kerr.UnknownMemberID.Code))
	return true
}

// deleteConsumerGroup forgets an empty consumer group and returns the
// tombstones of its records, and with offsets of its committed offsets
// too.
func (c *Coordinator) deleteConsumerGroup(group *consumerGroup, offsets bool) []Record {
	var records []Record
	if offsets {
		records = c.groupTombstones(group.id)
		records = records[:len(records)-1] // no classic metadata to delete
	}
	records = append(records, diffRecords(c.recordSet(group), map[consumerKey][]byte{})...)
	delete(c.consumerGroups, group.id)
	return records
}

// validateConsumerOffsetCommit is Kafka's ConsumerGroup.validateOffsetCommit:
// a commit without a member (epoch < 0) only while the group has none; an
// unknown member UNKNOWN_MEMBER_ID; a consumer-protocol member needs
// OffsetCommit v9+ (UNSUPPORTED_VERSION); and its generation must be its
// current member epoch (STALE_MEMBER_EPOCH): a member fenced or behind a
// rebalance must not move offsets of partitions it may have lost.
func (c *Coordinator) validateConsumerOffsetCommit(group *consumerGroup, request *kmsg.OffsetCommitRequest) int16 {
	generation, memberID := int32(-1), ""
	if request.Version >= 1 {
		generation, memberID = request.Generation, request.MemberID
	}
	if generation < 0 && len(group.members) == 0 {
		return 0
	}
	member := group.members[memberID]
	switch {
	case member == nil:
		return kerr.UnknownMemberID.Code
	case request.Version < 9:
		return kerr.UnsupportedVersion.Code
	case generation != member.current.MemberEpoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// deleteEmptyConsumerGroup is DeleteGroups for a consumer group:
// NON_EMPTY_GROUP while it has members; otherwise the tombstones of its
// records and offsets, which the request writes with its others and
// answers once committed (a failed write unloads the coordinator, whose
// successor loads the group back).
func (c *Coordinator) deleteEmptyConsumerGroup(group *consumerGroup) ([]Record, int16) {
	switch {
	case len(group.members) > 0:
		return nil, kerr.NonEmptyGroup.Code
	case !c.canWrite():
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return c.deleteConsumerGroup(group, true), 0
}

// consumerSubscribedTopics are the topics the group's members subscribe
// to, by name or regular expression.
func (c *Coordinator) consumerSubscribedTopics(g *consumerGroup) map[string]bool {
	topics := map[string]bool{}
	for _, member := range g.members {
		for _, name := range c.memberTopics(member) {
			topics[name] = true
		}
	}
	return topics
}

// expireConsumerGroupOffsets is offset expiry for a consumer group (Kafka's
// ConsumerGroup.offsetExpirationCondition and isSubscribedToTopic): an
// offset expires retention after its commit unless a member subscribes
// to its topic (or its commit's own expire timestamp passed). An empty
// group left without offsets is deleted with them, as Kafka deletes it.
func (c *Coordinator) expireConsumerGroupOffsets(group *consumerGroup, durable *durableGroup) []Record {
	subscribed := c.consumerSubscribedTopics(group)
	var records []Record
	for _, partition := range sortedPartitions(durable.offsets) {
		offset := durable.offsets[partition]
		expired := c.nowMs-offset.commitTimestampMs >= c.config.OffsetsRetentionMs && !subscribed[partition.topic]
		if offset.expireTimestampMs >= 0 {
			expired = c.nowMs >= offset.expireTimestampMs
		}
		if expired {
			records = append(records, offsetTombstone(group.id, partition))
		}
	}
	if len(records) > 0 && len(records) == len(durable.offsets) && len(group.members) == 0 {
		records = append(records, c.deleteConsumerGroup(group, false)...)
	}
	return records
}

// validateConsumerOffsetFetch is Kafka's ConsumerGroup.validateOffsetFetch
// for OffsetFetch v9+: a fetch without a member (null id, epoch < 0) is
// an admin's and passes; otherwise the member must exist
// (UNKNOWN_MEMBER_ID) at that epoch (STALE_MEMBER_EPOCH) in the committed
// state, which OffsetFetch answers from: a member is not refused for an
// epoch whose record is still in flight. Other groups pass.
func (c *Coordinator) validateConsumerOffsetFetch(request kmsg.OffsetFetchRequestGroup) int16 {
	durable := c.durable[request.Group]
	if durable == nil || len(durable.consumer) == 0 || (request.MemberID == nil && request.MemberEpoch < 0) {
		return 0
	}
	memberID := stringOrEmpty(request.MemberID)
	value, ok := durable.consumer[consumerKey{recordType: recordTypeConsumerGroupCurrentMemberAssignment, group: request.Group, member: memberID}]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	current, err := decodeCurrentAssignmentValue(value)
	if err != nil || current.memberEpoch != request.MemberEpoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
