package sim

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// commitOffset commits an offset of the workload topic's partition 0: the
// simple consumer its next one, with generation -1; a member the tick, in
// its generation.
func (w *world) commitOffset(c *groupClient) {
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version = int16(2 + w.groups.random.IntN(8))
	request.Group, request.Generation, request.MemberID = c.group, -1, ""
	offset := c.nextOffset
	if !c.simple {
		request.Generation, request.MemberID, offset = c.generation, c.memberID, w.now
	}
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic = workloadTopic
	partition := kmsg.NewOffsetCommitRequestTopicPartition()
	partition.Partition, partition.Offset = 0, offset
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	w.sendGroup(c, c.coordinator, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.OffsetCommitResponse)
		code := int16(-1) // an answer without the partition is broken
		if len(response.Topics) == 1 && len(response.Topics[0].Partitions) == 1 {
			code = response.Topics[0].Partitions[0].ErrorCode
		}
		if code == -1 {
			w.checker.fail(InvariantReplicaViolation, "%s: OffsetCommit answered without its partition: %+v", c, response)
			return
		}
		if !c.handleGroupCode(w, code) || !c.simple {
			return
		}
		w.stats.groupCommits++
		c.floor = max(c.floor, offset)
		c.nextOffset++
		w.trace("%s committed offset %d", c, offset)
	})
}

// fetchOffsets fetches the client's committed offset of the workload
// topic's partition 0; from v8 with the other group's offsets in the same
// request. The simple consumer checks the answer against what it was told
// before it asked (InvariantCommitLost).
func (w *world) fetchOffsets(c *groupClient) {
	request := kmsg.NewPtrOffsetFetchRequest()
	request.Version = int16(w.groups.random.IntN(10))
	topic := kmsg.NewOffsetFetchRequestTopic()
	topic.Topic, topic.Partitions = workloadTopic, []int32{0}
	if request.Version < 8 {
		request.Group, request.Topics = c.group, []kmsg.OffsetFetchRequestTopic{topic}
	} else {
		for _, id := range []string{c.group, otherGroup(c.group)} {
			group := kmsg.NewOffsetFetchRequestGroup()
			group.Group, group.Topics = id, []kmsg.OffsetFetchRequestGroupTopic{{Topic: workloadTopic, Partitions: []int32{0}}}
			request.Groups = append(request.Groups, group)
		}
	}
	floor := c.floor
	w.sendGroup(c, c.coordinator, request, func(answer kmsg.Response) {
		code, offset, found := fetchedOffset(answer.(*kmsg.OffsetFetchResponse), c.group)
		if !found {
			w.checker.fail(InvariantReplicaViolation, "%s: OffsetFetch answered without its partition", c)
			return
		}
		if !c.handleGroupCode(w, code) || !c.simple {
			return
		}
		if offset < floor {
			w.checker.fail(InvariantCommitLost, "%s: OffsetFetch answered offset %d of %s-0, below %d, which a commit was acknowledged with or a fetch answered before",
				c, offset, workloadTopic, floor)
			return
		}
		c.floor = max(c.floor, offset)
	})
}

// fetchedOffset finds group's offset of the workload topic's partition 0
// in an OffsetFetch answer: the code (the group's, else the partition's),
// the offset, and whether the answer had it.
func fetchedOffset(response *kmsg.OffsetFetchResponse, group string) (int16, int64, bool) {
	if response.Version < 8 {
		for _, topic := range response.Topics {
			for _, partition := range topic.Partitions {
				if topic.Topic == workloadTopic && partition.Partition == 0 {
					return max(response.ErrorCode, partition.ErrorCode), partition.Offset, true
				}
			}
		}
		return response.ErrorCode, -1, response.ErrorCode != 0
	}
	for _, entry := range response.Groups {
		if entry.Group != group {
			continue
		}
		if entry.ErrorCode != 0 {
			return entry.ErrorCode, -1, true
		}
		for _, topic := range entry.Topics {
			for _, partition := range topic.Partitions {
				if topic.Topic == workloadTopic && partition.Partition == 0 {
					return partition.ErrorCode, partition.Offset, true
				}
			}
		}
	}
	return 0, -1, false
}

// otherGroup is the group workload's other group.
func otherGroup(group string) string {
	if group == simGroup {
		return simSimpleGroup
	}
	return simGroup
}

func (w *world) describeGroups(c *groupClient) {
	request := kmsg.NewPtrDescribeGroupsRequest()
	request.Version, request.Groups = int16(w.groups.random.IntN(6)), []string{simGroup, simSimpleGroup}
	w.sendGroup(c, c.coordinator, request, func(kmsg.Response) {})
}

// listGroups asks a random broker, as a client lists groups by asking
// every broker.
func (w *world) listGroups(c *groupClient) {
	request := kmsg.NewPtrListGroupsRequest()
	request.Version = int16(w.groups.random.IntN(6))
	if request.Version >= 4 {
		request.StatesFilter = []string{"Stable", "Empty"}
	}
	to := metadata.BrokerID(1 + w.groups.random.IntN(len(w.brokers)))
	c.waiting = true
	if !w.client(c.address).send(to, request, func(kmsg.Response, bool) { c.waiting = false }) {
		c.waiting = false
	}
}

func (w *world) leaveGroup(c *groupClient) {
	request := kmsg.NewPtrLeaveGroupRequest()
	request.Version = int16(w.groups.random.IntN(6))
	request.Group, request.MemberID = c.group, c.memberID
	if request.Version >= 3 {
		member := kmsg.NewLeaveGroupRequestMember()
		member.MemberID = c.memberID
		request.Members = append(request.Members, member)
	}
	w.sendGroup(c, c.coordinator, request, func(kmsg.Response) {
		c.memberID, c.phase, c.nextAt = "", phaseLeft, w.now+100
	})
}

// afterLeave deletes the group (NON_EMPTY_GROUP while another member is
// in it) or its offsets of the workload topic, then joins again.
func (w *world) afterLeave(c *groupClient) {
	var request kmsg.Request
	if w.groups.random.IntN(2) == 0 {
		deletion := kmsg.NewPtrDeleteGroupsRequest()
		deletion.Version, deletion.Groups = int16(w.groups.random.IntN(3)), []string{c.group}
		request = deletion
	} else {
		deletion := kmsg.NewPtrOffsetDeleteRequest()
		deletion.Group = c.group
		topic := kmsg.NewOffsetDeleteRequestTopic()
		topic.Topic = workloadTopic
		partition := kmsg.NewOffsetDeleteRequestTopicPartition()
		topic.Partitions = append(topic.Partitions, partition)
		deletion.Topics = append(deletion.Topics, topic)
		request = deletion
	}
	w.sendGroup(c, c.coordinator, request, func(kmsg.Response) { c.phase = phaseFind })
}
