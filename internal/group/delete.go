package group

import (
	"cmp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (42), v0-v2, OffsetDelete (47), v0 (KIP-496), and the
// expiry of offsets (offsets.retention.minutes, KIP-211): each writes
// tombstones, and a request is answered once they are committed.

// handleDeleteGroups deletes empty groups: tombstones for every committed
// offset, then for the group. An unknown group is GROUP_ID_NOT_FOUND, one
// with members NON_EMPTY_GROUP.
func (c *Coordinator) handleDeleteGroups(id RequestID, request *kmsg.DeleteGroupsRequest) {
	response := request.ResponseKind().(*kmsg.DeleteGroupsResponse)
	response.Version = request.Version
	var records []Record
	var deleted []*group
	var deletedConsumers []string
	for _, groupID := range request.Groups {
		result := kmsg.DeleteGroupsResponseGroup{Group: groupID}
		if consumer := c.consumerGroups[groupID]; consumer != nil {
			var tombstones []Record
			tombstones, result.ErrorCode = c.deleteEmptyConsumerGroup(consumer)
			records = append(records, tombstones...)
			if tombstones != nil {
				deletedConsumers = append(deletedConsumers, groupID)
			}
			response.Groups = append(response.Groups, result)
			continue
		}
		group := c.groups[groupID]
		switch {
		case group == nil || group.state == stateDead:
			result.ErrorCode = kerr.GroupIDNotFound.Code
		case group.state != stateEmpty:
			result.ErrorCode = kerr.NonEmptyGroup.Code
		case !c.canWrite():
			result.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			records = append(records, c.groupTombstones(groupID)...)
			group.transition(stateDead, c.nowMs)
			deleted = append(deleted, group)
		}
		response.Groups = append(response.Groups, result)
	}
	if len(records) == 0 {
		c.answer(id, response)
		return
	}
	c.write(records, func(errorCode int16) {
		for i := range response.Groups {
			if errorCode != 0 && slices.Contains(deletedConsumers, response.Groups[i].Group) {
				response.Groups[i].ErrorCode = errorCode
			}
		}
		for _, group := range deleted {
			if errorCode != 0 {
				group.transition(stateEmpty, c.nowMs)
				for i := range response.Groups {
					if response.Groups[i].Group == group.id {
						response.Groups[i].ErrorCode = errorCode
					}
				}
			} else if c.groups[group.id] == group {
				delete(c.groups, group.id)
			}
		}
		c.answer(id, response)
	})
}

// groupTombstones deletes every offset of a group, committed or in
// flight (a tombstone follows the commit in the log, so it deletes it
// whichever way the commit ends), and the group.
func (c *Coordinator) groupTombstones(groupID string) []Record {
	keys := map[topicPartition]committedOffset{}
	if durable := c.durable[groupID]; durable != nil {
		for partition, value := range durable.offsets {
			keys[partition] = value
		}
	}
	for _, write := range c.pending {
		for _, partition := range write.offsets[groupID] {
			keys[partition] = committedOffset{}
		}
	}
	var records []Record
	for _, partition := range sortedPartitions(keys) {
		records = append(records, offsetTombstone(groupID, partition))
	}
	return append(records, groupTombstone(groupID))
}

// handleOffsetDelete deletes committed offsets of topics the group is not
// subscribed to: a non-empty group that is not a consumer group is
// NON_EMPTY_GROUP; a topic its members subscribe to answers
// GROUP_SUBSCRIBED_TO_TOPIC on every partition.
func (c *Coordinator) handleOffsetDelete(id RequestID, request *kmsg.OffsetDeleteRequest) {
	response := request.ResponseKind().(*kmsg.OffsetDeleteResponse)
	response.Version = request.Version
	group := c.groups[request.Group]
	consumer := c.consumerGroups[request.Group]
	switch {
	case consumer != nil:
		if !c.canWrite() {
			response.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
	case group == nil || group.state == stateDead:
		response.ErrorCode = kerr.GroupIDNotFound.Code
	case group.state != stateEmpty && group.protocolType != consumerProtocolType:
		response.ErrorCode = kerr.NonEmptyGroup.Code
	case !c.canWrite():
		response.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	if response.ErrorCode != 0 {
		c.answer(id, response)
		return
	}
	var subscribed map[string]bool
	all := false
	if consumer != nil {
		subscribed = c.consumerSubscribedTopics(consumer)
	} else {
		subscribed, all = group.subscribedTopics()
	}
	var records []Record
	var offsets map[topicPartition]committedOffset
	if durable := c.durable[request.Group]; durable != nil {
		offsets = durable.offsets
	}
	for _, topic := range request.Topics {
		out := kmsg.OffsetDeleteResponseTopic{Topic: topic.Topic}
		for _, partition := range topic.Partitions {
			result := kmsg.OffsetDeleteResponseTopicPartition{Partition: partition.Partition}
			key := topicPartition{topic.Topic, partition.Partition}
			if all || subscribed[topic.Topic] {
				result.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := offsets[key]; ok {
				records = append(records, offsetTombstone(request.Group, key))
			}
			out.Partitions = append(out.Partitions, result)
		}
		response.Topics = append(response.Topics, out)
	}
	if len(records) == 0 {
		c.answer(id, response)
		return
	}
	c.write(records, func(errorCode int16) {
		if errorCode != 0 {
			response = &kmsg.OffsetDeleteResponse{Version: request.Version, ErrorCode: errorCode}
		}
		c.answer(id, response)
	})
}

// consumerProtocolType is the protocol type of Kafka consumers, whose
// subscriptions the coordinator can read.
const consumerProtocolType = "consumer"

// subscribedTopics are the topics the members of a consumer group
// subscribe to, read from their subscription metadata for the chosen
// protocol. A subscription that does not parse counts as every topic, as
// Kafka treats it.
func (g *group) subscribedTopics() (topics map[string]bool, all bool) {
	topics = map[string]bool{}
	if g.state == stateEmpty || g.protocolType != consumerProtocolType {
		return topics, false
	}
	for _, member := range g.members {
		var metadata kmsg.ConsumerMemberMetadata
		if err := metadata.ReadFrom(member.metadataFor(g.protocol)); err != nil {
			return nil, true
		}
		for _, topic := range metadata.Topics {
			topics[topic] = true
		}
	}
	return topics, false
}

// expireOffsets writes tombstones for the offsets past retention (Kafka's
// OffsetExpirationCondition): an explicit expire timestamp (OffsetCommit
// v2-v4) decides alone; otherwise the offsets of an Empty group expire
// retention after it became Empty, a simple consumer's retention after
// each commit, a Stable consumer group's only for topics it does not
// subscribe to, and other groups' never. A group left with no offsets and
// no members is deleted. Groups with a write in flight wait: a tombstone
// written after an uncommitted commit would delete it.
func (c *Coordinator) expireOffsets() {
	var records []Record
	var deletedGroups []string
	for _, groupID := range sortedKeys(c.durable) {
		durable := c.durable[groupID]
		if consumer := c.consumerGroups[groupID]; consumer != nil && !c.hasPendingWritesFor(groupID) {
			records = append(records, c.expireConsumerGroupOffsets(consumer, durable)...)
			continue
		}
		group := c.groups[groupID]
		if group == nil || group.state == stateDead || c.hasPendingWritesFor(groupID) {
			continue
		}
		expired := 0
		subscribed, all := group.subscribedTopics()
		for _, partition := range sortedPartitions(durable.offsets) {
			if c.offsetExpired(group, durable.offsets[partition], all || subscribed[partition.topic]) {
				records = append(records, offsetTombstone(groupID, partition))
				expired++
			}
		}
		if expired == len(durable.offsets) && group.state == stateEmpty && len(group.pendingMembers) == 0 && (expired > 0 || durable.metadata != nil) {
			records = append(records, groupTombstone(groupID))
			delete(c.groups, groupID)
			deletedGroups = append(deletedGroups, groupID)
		}
	}
	if len(records) == 0 {
		return
	}
	c.write(records, func(errorCode int16) {
		if errorCode == 0 {
			return
		}
		// The tombstones were refused: the groups they would have
		// deleted are still in the log, so they come back to life as a
		// new coordinator would load them.
		for _, groupID := range deletedGroups {
			if _, live := c.groups[groupID]; !live && c.durable[groupID] != nil {
				revived := groupFromDurable(groupID, c.durable[groupID], c.config, c.nowMs)
				c.groups[groupID] = revived
				c.at(revived.earliestDeadlineMs())
			}
		}
	})
}

func (c *Coordinator) offsetExpired(group *group, offset committedOffset, subscribed bool) bool {
	if offset.expireTimestampMs >= 0 {
		return c.nowMs >= offset.expireTimestampMs
	}
	base := offset.commitTimestampMs
	switch {
	case group.protocolType == "":
	case group.state == stateEmpty:
		base = max(group.stateTimestampMs, 0)
		if group.stateTimestampMs < 0 {
			base = offset.commitTimestampMs
		}
	case group.state == stateStable && group.protocolType == consumerProtocolType:
		if subscribed {
			return false
		}
	default:
		return false
	}
	return c.nowMs-base >= c.config.OffsetsRetentionMs
}

func sortedPartitions(offsets map[topicPartition]committedOffset) []topicPartition {
	partitions := make([]topicPartition, 0, len(offsets))
	for partition := range offsets {
		partitions = append(partitions, partition)
	}
	slices.SortFunc(partitions, func(a, b topicPartition) int {
		if a.topic != b.topic {
			return strings.Compare(a.topic, b.topic)
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return partitions
}
