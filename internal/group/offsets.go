package group

import (
	"slices"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit (8), v0-v9; OffsetFetch (9), v0-v9 (KIP-447 require-stable,
// KIP-709 several groups from v8; KIP-848's member fields of v9 are
// accepted and, for classic groups, not checked, as Kafka does).

// handleOffsetCommit validates the group and member (Kafka's
// OffsetMetadataManager.validateOffsetCommit and
// ClassicGroup.validateOffsetCommit), then writes one record per partition
// whose metadata fits and answers once they are committed.
func (c *Coordinator) handleOffsetCommit(id RequestID, request *kmsg.OffsetCommitRequest) {
	group, errorCode := c.validateOffsetCommit(request)
	if errorCode != 0 {
		c.answer(id, errorResponse(request, errorCode))
		return
	}
	response := request.ResponseKind().(*kmsg.OffsetCommitResponse)
	response.Version = request.Version
	var records []Record
	expireTimestampMs := int64(-1)
	if request.Version >= 2 && request.Version <= 4 && request.RetentionTimeMillis >= 0 {
		expireTimestampMs = c.nowMs + request.RetentionTimeMillis
	}
	for _, topic := range request.Topics {
		out := kmsg.OffsetCommitResponseTopic{Topic: topic.Topic}
		for _, partition := range topic.Partitions {
			result := kmsg.OffsetCommitResponseTopicPartition{Partition: partition.Partition}
			metadata := ""
			if partition.Metadata != nil {
				metadata = *partition.Metadata
			}
			if len(utf16.Encode([]rune(metadata))) > int(c.config.OffsetMetadataMaxBytes) {
				result.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			} else {
				leaderEpoch := int32(-1)
				if request.Version >= 6 {
					leaderEpoch = partition.LeaderEpoch
				}
				value := committedOffset{offset: partition.Offset, leaderEpoch: leaderEpoch, metadata: metadata,
					commitTimestampMs: c.nowMs, expireTimestampMs: expireTimestampMs}
				records = append(records, offsetCommitRecord(request.Group, topicPartition{topic.Topic, partition.Partition}, value))
			}
			out.Partitions = append(out.Partitions, result)
		}
		response.Topics = append(response.Topics, out)
	}
	if group == nil && c.consumerGroups[request.Group] == nil {
		group = newGroup(request.Group, c.nowMs)
		c.groups[request.Group] = group
	}
	if group == nil {
		// A consumer group: its members' sessions run on heartbeats alone.
	} else if member, ok := group.members[request.MemberID]; ok && (group.state == stateStable || group.state == statePreparingRebalance) {
		member.heartbeatDeadlineMs = c.at(c.nowMs + int64(member.sessionTimeoutMs))
	}
	if len(records) == 0 {
		c.answer(id, response)
		return
	}
	c.write(records, func(errorCode int16) {
		if errorCode != 0 {
			response = errorResponse(request, errorCode).(*kmsg.OffsetCommitResponse)
			c.dropIfForgotten(request.Group)
		}
		c.answer(id, response)
	})
}

// validateOffsetCommit returns the group the commit is for (nil when a
// simple commit will create it) or the error every partition gets.
func (c *Coordinator) validateOffsetCommit(request *kmsg.OffsetCommitRequest) (*group, int16) {
	if !c.canWrite() {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	generation, memberID, instanceID := int32(-1), "", ""
	if request.Version >= 1 {
		generation, memberID = request.Generation, request.MemberID
	}
	if request.InstanceID != nil {
		instanceID = *request.InstanceID
	}
	if consumer := c.consumerGroups[request.Group]; consumer != nil {
		return nil, c.validateConsumerOffsetCommit(consumer, request)
	}
	group := c.groups[request.Group]
	if group == nil {
		switch {
		case generation < 0:
			return nil, 0
		case request.Version >= 9:
			return nil, kerr.GroupIDNotFound.Code
		default:
			return nil, kerr.IllegalGeneration.Code
		}
	}
	switch {
	case group.state == stateDead:
		return nil, kerr.CoordinatorNotAvailable.Code
	case generation < 0 && group.state == stateEmpty:
		return group, 0
	case generation >= 0 || memberID != "" || instanceID != "":
		if errorCode := group.validateMember(memberID, instanceID); errorCode != 0 {
			return nil, errorCode
		}
		if generation != group.generation {
			return nil, kerr.IllegalGeneration.Code
		}
	default:
		return nil, kerr.UnknownMemberID.Code
	}
	if group.state == stateCompletingRebalance {
		return nil, kerr.RebalanceInProgress.Code
	}
	return group, 0
}

// dropIfForgotten removes a live group that has nothing: no members, no
// durable trace. A simple commit creates one; if its write fails, the
// group must not outlive it, or the live state would list a group replay
// does not know.
func (c *Coordinator) dropIfForgotten(id string) {
	group, ok := c.groups[id]
	if !ok || len(group.members) > 0 || len(group.pendingMembers) > 0 || group.state != stateEmpty {
		return
	}
	if _, durable := c.durable[id]; durable || c.hasPendingWritesFor(id) {
		return
	}
	delete(c.groups, id)
}

// stableFetch is an OffsetFetch with RequireStable, held until every
// append handed out before it has been reported: Kafka runs it as a write
// with no records, so it sees every earlier commit.
type stableFetch struct {
	request RequestID
	fetch   *kmsg.OffsetFetchRequest
	after   AppendID
}

// handleOffsetFetch answers from the durable view: what the partition's
// committed records say, never a commit still in flight.
func (c *Coordinator) handleOffsetFetch(id RequestID, request *kmsg.OffsetFetchRequest) {
	if request.Version >= 7 && request.RequireStable && len(c.pending) > 0 {
		if c.parked >= c.config.MaxParkedRequests {
			c.answer(id, errorResponse(request, kerr.CoordinatorNotAvailable.Code))
			return
		}
		c.parked++
		c.stableWaits = append(c.stableWaits, stableFetch{request: id, fetch: request, after: c.nextAppend})
		return
	}
	c.answer(id, c.offsetFetchResponse(request))
}

// answerStableFetches answers the held require-stable fetches whose
// earlier appends have all been reported.
func (c *Coordinator) answerStableFetches() {
	kept := c.stableWaits[:0]
	for _, wait := range c.stableWaits {
		if c.pendingUpTo(wait.after) {
			kept = append(kept, wait)
			continue
		}
		c.parked--
		c.answer(wait.request, c.offsetFetchResponse(wait.fetch))
	}
	c.stableWaits = kept
}

func (c *Coordinator) pendingUpTo(last AppendID) bool {
	for id := range c.pending {
		if id <= last {
			return true
		}
	}
	return false
}

func (c *Coordinator) offsetFetchResponse(request *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	response := request.ResponseKind().(*kmsg.OffsetFetchResponse)
	response.Version = request.Version
	if request.Version >= 8 {
		for _, group := range request.Groups {
			out := kmsg.OffsetFetchResponseGroup{Group: group.Group}
			if request.Version >= 9 {
				if out.ErrorCode = c.validateConsumerOffsetFetch(group); out.ErrorCode != 0 {
					response.Groups = append(response.Groups, out)
					continue
				}
			}
			var requested []requestedTopic
			if group.Topics != nil {
				requested = make([]requestedTopic, 0, len(group.Topics))
				for _, topic := range group.Topics {
					requested = append(requested, requestedTopic{topic.Topic, topic.Partitions})
				}
			}
			for _, topic := range c.fetchOffsets(group.Group, requested, group.Topics == nil) {
				entry := kmsg.OffsetFetchResponseGroupTopic{Topic: topic.name}
				for _, partition := range topic.partitions {
					entry.Partitions = append(entry.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: partition.partition,
						Offset: partition.value.offset, LeaderEpoch: partition.value.leaderEpoch, Metadata: &partition.value.metadata})
				}
				out.Topics = append(out.Topics, entry)
			}
			response.Groups = append(response.Groups, out)
		}
		return response
	}
	var requested []requestedTopic
	for _, topic := range request.Topics {
		requested = append(requested, requestedTopic{topic.Topic, topic.Partitions})
	}
	for _, topic := range c.fetchOffsets(request.Group, requested, request.Version >= 2 && request.Topics == nil) {
		entry := kmsg.OffsetFetchResponseTopic{Topic: topic.name}
		for _, partition := range topic.partitions {
			entry.Partitions = append(entry.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: partition.partition,
				Offset: partition.value.offset, LeaderEpoch: partition.value.leaderEpoch, Metadata: &partition.value.metadata})
		}
		response.Topics = append(response.Topics, entry)
	}
	return response
}

type requestedTopic struct {
	name       string
	partitions []int32
}

type fetchedTopic struct {
	name       string
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition int32
	value     committedOffset
}

// fetchOffsets looks up committed offsets: the requested partitions (-1
// and no error where none is committed, or for an unknown group, as
// Kafka answers), or with all every committed offset of the group, sorted.
func (c *Coordinator) fetchOffsets(groupID string, requested []requestedTopic, all bool) []fetchedTopic {
	var offsets map[topicPartition]committedOffset
	if durable := c.durable[groupID]; durable != nil {
		offsets = durable.offsets
	}
	if all {
		requested = nil
		byTopic := map[string][]int32{}
		for partition := range offsets {
			byTopic[partition.topic] = append(byTopic[partition.topic], partition.partition)
		}
		for _, topic := range sortedKeys(byTopic) {
			partitions := byTopic[topic]
			slices.Sort(partitions)
			requested = append(requested, requestedTopic{topic, partitions})
		}
	}
	fetched := make([]fetchedTopic, 0, len(requested))
	for _, topic := range requested {
		out := fetchedTopic{name: topic.name}
		for _, partition := range topic.partitions {
			value, ok := offsets[topicPartition{topic.name, partition}]
			if !ok {
				value = committedOffset{offset: -1, leaderEpoch: -1}
			}
			out.partitions = append(out.partitions, fetchedPartition{partition: partition, value: value})
		}
		fetched = append(fetched, out)
	}
	return fetched
}
