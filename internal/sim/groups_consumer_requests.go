package sim

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/metadata"
)

// workloadTopicID is the workload topic's id in the newest metadata, the
// zero id while it does not exist.
func (w *world) workloadTopicID() metadata.TopicID {
	topic, _ := w.metadataImage().Topic(workloadTopic)
	return topic.ID
}

// consumerHeartbeat sends a member's ConsumerGroupHeartbeat at epoch: 0
// joins (again), -1 leaves, and a member epoch heartbeats, listing the
// partitions the member owns: those it was told to release are released
// now, as this heartbeat says so.
func (w *world) consumerHeartbeat(m *consumerMember, epoch int32) {
	load := w.consumers
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.MemberEpoch = 1, simConsumerGroup, m.memberID, epoch
	switch {
	case epoch == 0:
		request.RebalanceTimeoutMillis, request.SubscribedTopicNames = consumerRebalanceTimeoutMs, []string{workloadTopic}
		request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if draw := load.random.IntN(3); draw < len(assignor.Names()) {
			request.ServerAssignor = kmsg.StringPtr(assignor.Names()[draw])
		}
	case epoch > 0:
		m.releasing = map[int32]*partitionClaim{}
		if load.random.IntN(4) == 0 || m.full {
			request.SubscribedTopicNames = []string{workloadTopic} // unchanged, sent in full now and then
		}
		if m.full {
			request.RebalanceTimeoutMillis = consumerRebalanceTimeoutMs
		}
		request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if owned := sortedClaims(m.owned); len(owned) > 0 {
			topic := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			topic.TopicID, topic.Partitions = w.workloadTopicID(), owned
			request.Topics = append(request.Topics, topic)
		}
	}
	evidence := m.twoOwnersEvidence()
	w.sendConsumer(m, m.coordinator, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.ConsumerGroupHeartbeatResponse)
		if !m.handleConsumerCode(w, response.ErrorCode) {
			return
		}
		w.checkTwoOwners(m, "heartbeat", evidence)
		if epoch < 0 {
			w.trace("%s left", m)
			w.stats.consumerLeaves++
			m.epoch, m.heartbeatAt = 0, w.now+100+load.random.Int64N(300) // joins again later
			return
		}
		m.epoch, m.full = response.MemberEpoch, false
		m.heartbeatAt = w.now + int64(max(response.HeartbeatIntervalMillis, 10)/10)
		if response.Assignment != nil {
			w.takeAssignment(m, response.Assignment)
		}
	})
}

// takeAssignment moves a member to the partitions an answer assigns it:
// those it loses it releases (its next heartbeat says so, at once), those
// it gains it owns from now and first fetches their committed offsets. A
// partition it gains that another member still owns makes the other a
// suspect of two owners (checkTwoOwners).
func (w *world) takeAssignment(m *consumerMember, assignment *kmsg.ConsumerGroupHeartbeatResponseAssignment) {
	topicID := w.workloadTopicID()
	next := map[int32]bool{}
	for _, topic := range assignment.Topics {
		if topic.TopicID == topicID {
			for _, partition := range topic.Partitions {
				next[partition] = true
			}
		}
	}
	for _, partition := range sortedClaims(m.owned) {
		if !next[partition] {
			m.releasing[partition] = m.owned[partition]
			w.stats.consumerRevocations++
			delete(m.owned, partition)
			delete(m.position, partition)
			m.fetching = withoutPartition(m.fetching, partition)
		}
	}
	for _, partition := range slices.Sorted(maps.Keys(next)) {
		switch {
		case m.owned[partition] != nil:
		case m.releasing[partition] != nil: // given back before it said it released it
			m.owned[partition] = m.releasing[partition]
			delete(m.releasing, partition)
		default:
			w.claimPartition(m, partition)
		}
	}
}

// claimPartition makes m the owner of partition from now, suspecting any
// other member that owns it.
func (w *world) claimPartition(m *consumerMember, partition int32) {
	for _, other := range w.consumers.members {
		if other == m {
			continue
		}
		for _, claims := range []map[int32]*partitionClaim{other.owned, other.releasing} {
			if claim := claims[partition]; claim != nil {
				claim.suspects = append(claim.suspects, m.String())
				w.trace("%s is given %s-%d, which %s has owned since tick %d", m, workloadTopic, partition, other, claim.since)
			}
		}
	}
	m.owned[partition] = &partitionClaim{since: w.now}
	m.fetching = append(m.fetching, partition)
}

// fetchConsumerOffsets fetches the committed offsets of the partitions a
// member gained; each must be at least every commit of the partition
// acknowledged before the fetch was sent (InvariantCommitLost).
func (w *world) fetchConsumerOffsets(m *consumerMember) {
	request := kmsg.NewPtrOffsetFetchRequest()
	request.Version = int16(1 + w.consumers.random.IntN(9))
	partitions := append([]int32(nil), m.fetching...)
	if request.Version < 8 {
		request.Group = simConsumerGroup
		request.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: workloadTopic, Partitions: partitions}}
	} else {
		entry := kmsg.NewOffsetFetchRequestGroup()
		entry.Group, entry.Topics = simConsumerGroup, []kmsg.OffsetFetchRequestGroupTopic{{Topic: workloadTopic, Partitions: partitions}}
		if request.Version >= 9 {
			entry.MemberID, entry.MemberEpoch = kmsg.StringPtr(m.memberID), m.epoch
		}
		request.Groups = []kmsg.OffsetFetchRequestGroup{entry}
	}
	floors := map[int32]int64{}
	for _, partition := range partitions {
		floors[partition] = w.consumers.floorOf(partition)
	}
	w.sendConsumer(m, m.coordinator, request, func(answer kmsg.Response) {
		for _, partition := range partitions {
			code, offset, found := fetchedPartitionOffset(answer.(*kmsg.OffsetFetchResponse), simConsumerGroup, partition)
			if !found {
				w.checker.fail(InvariantReplicaViolation, "%s: OffsetFetch answered without %s-%d", m, workloadTopic, partition)
				return
			}
			if code == kerr.StaleMemberEpoch.Code {
				m.nextAt = w.now + groupRetryTicks // its epoch's record is still in flight: again later
				return
			}
			if !m.handleConsumerCode(w, code) {
				return
			}
			if offset < floors[partition] {
				w.checker.fail(InvariantCommitLost, "%s: OffsetFetch answered offset %d of %s-%d, below %d, which a commit was acknowledged with",
					m, offset, workloadTopic, partition, floors[partition])
				return
			}
			if m.owned[partition] != nil && slices.Contains(m.fetching, partition) {
				m.position[partition] = max(offset, 0)
				m.fetching = withoutPartition(m.fetching, partition)
			}
		}
	})
}

// floorOf is the highest offset of partition a commit of the consumer
// group was acknowledged with, -1 for none.
func (load *consumerLoad) floorOf(partition int32) int64 {
	if floor, ok := load.floor[partition]; ok {
		return floor
	}
	return -1
}

// fetchedPartitionOffset finds a group's offset of one workload topic
// partition in an OffsetFetch answer: the code (the group's, else the
// partition's), the offset, and whether the answer had it.
func fetchedPartitionOffset(response *kmsg.OffsetFetchResponse, group string, partition int32) (int16, int64, bool) {
	topics := response.Topics
	code := response.ErrorCode
	if response.Version >= 8 {
		topics, code = nil, 0
		for _, entry := range response.Groups {
			if entry.Group != group {
				continue
			}
			if entry.ErrorCode != 0 {
				return entry.ErrorCode, -1, true
			}
			for _, topic := range entry.Topics {
				answered := kmsg.NewOffsetFetchResponseTopic()
				answered.Topic = topic.Topic
				for _, p := range topic.Partitions {
					answered.Partitions = append(answered.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, ErrorCode: p.ErrorCode})
				}
				topics = append(topics, answered)
			}
		}
	}
	for _, topic := range topics {
		for _, p := range topic.Partitions {
			if topic.Topic == workloadTopic && p.Partition == partition {
				return max(code, p.ErrorCode), p.Offset, true
			}
		}
	}
	return code, -1, code != 0
}

// commitConsumerOffsets commits a member's positions of the partitions
// it owns, with its member epoch (OffsetCommit v9, as KIP-848 members
// commit). An accepted commit raises the partitions' floors, and shows the
// member alive at its epoch (checkTwoOwners).
func (w *world) commitConsumerOffsets(m *consumerMember) {
	var partitions []int32
	for _, partition := range sortedClaims(m.owned) {
		if !slices.Contains(m.fetching, partition) {
			partitions = append(partitions, partition)
		}
	}
	if len(partitions) == 0 || m.epoch <= 0 {
		return
	}
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation, request.MemberID = 9, simConsumerGroup, m.epoch, m.memberID
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic = workloadTopic
	offsets := map[int32]int64{}
	for _, partition := range partitions {
		entry := kmsg.NewOffsetCommitRequestTopicPartition()
		entry.Partition, entry.Offset = partition, m.position[partition]
		offsets[partition] = entry.Offset
		topic.Partitions = append(topic.Partitions, entry)
	}
	request.Topics = append(request.Topics, topic)
	evidence := m.twoOwnersEvidence()
	w.sendConsumer(m, m.coordinator, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.OffsetCommitResponse)
		accepted := false
		for _, answered := range response.Topics {
			for _, partition := range answered.Partitions {
				if answered.Topic != workloadTopic {
					continue
				}
				if partition.ErrorCode != 0 {
					if partition.ErrorCode != kerr.StaleMemberEpoch.Code {
						m.handleConsumerCode(w, partition.ErrorCode)
					}
					continue
				}
				accepted = true
				w.consumers.floor[partition.Partition] = max(w.consumers.floorOf(partition.Partition), offsets[partition.Partition])
			}
		}
		if accepted {
			w.stats.consumerCommits++
			w.checkTwoOwners(m, "offset commit", evidence)
		}
	})
}

// describeConsumerGroup asks for the consumer group and the classic one
// with ConsumerGroupDescribe (split by coordinator); a partition in two
// members' assignments is InvariantTwoOwners.
func (w *world) describeConsumerGroup(m *consumerMember) {
	request := kmsg.NewPtrConsumerGroupDescribeRequest()
	request.Version, request.Groups = int16(w.consumers.random.IntN(2)), []string{simConsumerGroup, simGroup}
	request.IncludeAuthorizedOperations = w.consumers.random.IntN(2) == 0
	w.sendConsumer(m, m.coordinator, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.ConsumerGroupDescribeResponse)
		for _, described := range response.Groups {
			if described.Group != simConsumerGroup || described.ErrorCode != 0 {
				continue
			}
			owner := map[int32]string{}
			for _, member := range described.Members {
				for _, topic := range member.Assignment.TopicPartitions {
					for _, partition := range topic.Partitions {
						if other, taken := owner[partition]; taken {
							w.checker.fail(InvariantTwoOwners, "ConsumerGroupDescribe shows %s-%d assigned to %s and %s at group epoch %d",
								topic.Topic, partition, other, member.MemberID, described.Epoch)
							return
						}
						owner[partition] = member.MemberID
					}
				}
			}
		}
	})
}

// withoutPartition is partitions without partition.
func withoutPartition(partitions []int32, partition int32) []int32 {
	return slices.DeleteFunc(partitions, func(p int32) bool { return p == partition })
}
