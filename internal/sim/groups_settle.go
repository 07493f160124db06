package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/wire"
)

// After healing, the KIP-848 group must settle (issue 14: "after healing,
// every group stabilizes and every partition has an owner"). Once the
// cluster has converged, the members keep heartbeating (they do nothing
// else: no crash, pause, leave or commit) and a checker client asks the
// group's coordinator with ConsumerGroupDescribe every
// groupSettleProbeTicks, until the answer shows the group Stable, every
// live member in it at the epoch the member itself holds, owning (in its
// own view) exactly what the coordinator assigned it, and every partition
// of the workload topic assigned to exactly one member. A group whose
// __consumer_offsets partition is offline by design (every replica that
// held its records lost them) is excused: it has no coordinator to settle
// on. Without the answer within groupSettleTicks the run fails with
// InvariantGroupUnsettled: a coordinator that never finishes a rebalance,
// loses a member it still hears from, or leaves a partition unowned.

// InvariantGroupUnsettled is a consumer group that does not settle after
// healing: not Stable, a live member out of it, or a partition without
// exactly one owner.
const InvariantGroupUnsettled = "group-does-not-settle"

const (
	// groupSettleTicks bounds the settling: a member paused at the heal
	// wakes within 1,200 ticks (consumerAct), is fenced after its
	// session (600 ticks) and joins again; the rest is rebalances.
	groupSettleTicks      = 3000
	groupSettleProbeTicks = 50
	// settleProbeAddress is the checker's client, apart from the members.
	settleProbeAddress = 1<<17 + 127
)

// settleConsumerGroup ticks until the KIP-848 group has settled, or fails
// the run.
func (w *world) settleConsumerGroup() {
	partition := metadata.TopicPartition{Topic: wire.OffsetsTopic, Partition: group.PartitionFor(simConsumerGroup, offsetsTopicPartitions)}
	if state, ok := w.metadataImage().Partition(partition); ok && w.allowedOffline(state) {
		w.trace("%s is excused from settling: %s is offline by design", simConsumerGroup, partition)
		return
	}
	w.membersOnly = true
	verdict, settled, waiting, probeAt := "no ConsumerGroupDescribe was answered", false, false, w.now
	started := w.now
	for deadline := w.now + groupSettleTicks; w.now < deadline && w.checker.violation == nil; {
		if !waiting && w.now >= probeAt {
			waiting = w.probeConsumerGroup(partition, func(answer string) {
				if answer != verdict && answer != "" {
					w.trace("%s has not settled: %s", simConsumerGroup, answer)
				}
				verdict, settled, waiting, probeAt = answer, answer == "", false, w.now+groupSettleProbeTicks
			})
			if !waiting {
				probeAt = w.now + groupSettleProbeTicks
			}
		}
		w.tick(false, false)
		if settled {
			w.trace("%s settled %d ticks after the cluster converged", simConsumerGroup, w.now-started)
			return
		}
	}
	if w.checker.violation == nil {
		w.checker.fail(InvariantGroupUnsettled, "%s did not settle within %d ticks of the cluster converging: %s; members: %s",
			simConsumerGroup, groupSettleTicks, verdict, w.describeConsumerMembers())
	}
}

// describeConsumerMembers is each member's view, for a failure.
func (w *world) describeConsumerMembers() string {
	var views []string
	for _, m := range w.consumers.members {
		views = append(views, fmt.Sprintf("%s epoch %d coordinator b%d waiting %t owns %v next act %d heartbeat %d paused until %d",
			m, m.epoch, m.coordinator, m.waiting, sortedClaims(m.owned), m.nextAt, m.heartbeatAt, m.pausedUntil))
	}
	return strings.Join(views, "; ")
}

// probeConsumerGroup sends ConsumerGroupDescribe to the leader of the
// group's __consumer_offsets partition, reporting whether it was sent;
// answered gets what keeps the group from having settled, or "".
func (w *world) probeConsumerGroup(partition metadata.TopicPartition, answered func(string)) bool {
	state, ok := w.metadataImage().Partition(partition)
	if !ok || state.Leader == metadata.NoBroker {
		return false
	}
	request := kmsg.NewPtrConsumerGroupDescribeRequest()
	request.Groups = []string{simConsumerGroup}
	return w.client(clientAddress(settleProbeAddress)).send(state.Leader, request, func(answer kmsg.Response, ok bool) {
		if !ok {
			answered("the describe request failed")
			return
		}
		response := answer.(*kmsg.ConsumerGroupDescribeResponse)
		partitions := int32(0)
		if topic, exists := w.metadataImage().Topic(workloadTopic); exists {
			partitions = int32(len(topic.Partitions))
		}
		answered(consumerGroupUnsettled(response, w.consumers.members, partitions, w.now))
	})
}

// consumerGroupUnsettled says what keeps the described group from having
// settled, or "": it must be Stable; its members must be the live members
// (none paused at now), each at the epoch it holds and owning what it was
// assigned; and each of the workload topic's partitions must be assigned
// to exactly one member.
func consumerGroupUnsettled(response *kmsg.ConsumerGroupDescribeResponse, members []*consumerMember, partitions int32, now int64) string {
	if len(response.Groups) != 1 || response.Groups[0].Group != simConsumerGroup {
		return "no answer for the group"
	}
	described := response.Groups[0]
	if described.ErrorCode != 0 {
		return fmt.Sprintf("ConsumerGroupDescribe answered %s", kerr.ErrorForCode(described.ErrorCode))
	}
	if described.State != "Stable" {
		var members []string
		for _, member := range described.Members {
			members = append(members, fmt.Sprintf("%s at epoch %d assigned %v, target %v", member.MemberID, member.MemberEpoch,
				assignedPartitions(member.Assignment), assignedPartitions(member.TargetAssignment)))
		}
		return fmt.Sprintf("the group is %s at epoch %d (assignment epoch %d): %s", described.State, described.Epoch, described.AssignmentEpoch, strings.Join(members, "; "))
	}
	byID := map[string]kmsg.ConsumerGroupDescribeResponseGroupMember{}
	for _, member := range described.Members {
		byID[member.MemberID] = member
	}
	owners := map[int32][]string{}
	for _, m := range members {
		if now < m.pausedUntil {
			continue // a zombie: not live until it wakes
		}
		member, in := byID[m.memberID]
		if !in {
			return fmt.Sprintf("live member %s is not in the group", m)
		}
		delete(byID, m.memberID)
		if member.MemberEpoch != m.epoch {
			return fmt.Sprintf("%s holds epoch %d, the coordinator %d", m, m.epoch, member.MemberEpoch)
		}
		assigned := assignedPartitions(member.Assignment)
		if owned := sortedClaims(m.owned); !slices.Equal(owned, assigned) || len(m.releasing) > 0 {
			return fmt.Sprintf("%s owns %v, releasing %v, and is assigned %v", m, owned, sortedClaims(m.releasing), assigned)
		}
		for _, partition := range assigned {
			owners[partition] = append(owners[partition], m.memberID)
		}
	}
	if len(byID) > 0 {
		return fmt.Sprintf("the group holds %d members no live process is", len(byID))
	}
	for partition := range partitions {
		if len(owners[partition]) != 1 {
			return fmt.Sprintf("%s-%d is assigned to %v", workloadTopic, partition, owners[partition])
		}
	}
	return ""
}

// assignedPartitions are the workload topic's partitions of an
// assignment, sorted; any other topic's partition is reported as -1, which
// no member can own.
func assignedPartitions(assignment kmsg.Assignment) []int32 {
	var partitions []int32
	for _, topic := range assignment.TopicPartitions {
		for _, partition := range topic.Partitions {
			if topic.Topic != workloadTopic {
				partition = -1
			}
			partitions = append(partitions, partition)
		}
	}
	slices.Sort(partitions)
	return partitions
}
