package controller

import (
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ReassignRequest asks to move one partition to a new assignment (one
// partition of Kafka's AlterPartitionReassignments, KIP-455).
type ReassignRequest struct {
	metadata.TopicPartition
	// Replicas is the target assignment, the first its preferred leader;
	// nil cancels the reassignment in progress.
	Replicas []metadata.BrokerID
}

// Reassign decides one partition's reassignment, or its cancellation: the
// records, or a code. It follows Kafka's ReplicationControlManager
// (alterPartitionReassignment and PartitionChangeBuilder):
//
//  1. The partition's assignment becomes the target followed by the
//     current replicas that are not in it, with the replicas being added
//     (target minus current) and removed (current minus target) recorded
//     (a PartitionChange, then a Reassignment record). Leader and ISR stay.
//  2. The added replicas fetch from the leader as followers and join the
//     ISR through the ordinary ISR expansion (AlterPartition), with the
//     epoch-safe join of KAFKA-7128.
//  3. Once every added replica is in the ISR, and the ISR holds a target
//     replica, the reassignment completes (completeReassignment): the
//     assignment becomes the target and the ISR the ISR's target members;
//     a leader that is removed hands over to the first target replica in
//     the ISR. A reassignment that adds nothing completes at once.
//
// That is rule reassignment-completes-in-isr: the ISR after the move is a
// subset of the ISR before it, whose members hold every committed record.
// Switched off (legacy), the move completes at once with the target taken
// for in sync, and a target replica with an empty log may lead or count
// toward the high watermark: the high watermark goes back and
// acknowledged writes are lost.
//
// A new target for a partition already being moved replaces the one in
// progress, computed from the assignment the partition has now (the old
// target and the replicas being removed), as Kafka does; a replica the old
// target added that the new one keeps still counts as added, so the move
// still waits for it to join the ISR. A cancellation
// (nil Replicas) reverts to that assignment less the replicas being added,
// and takes them out of the ISR; a leader among them hands over to the
// first remaining ISR member.
//
// Codes, as Kafka answers them: UNKNOWN_TOPIC_OR_PARTITION;
// NO_REASSIGNMENT_IN_PROGRESS for a cancellation with none in progress;
// INVALID_REPLICA_ASSIGNMENT for an empty target, a target naming a broker
// twice or a broker that is not registered, a cancellation whose reverted
// ISR would be empty (the leader would have to come from outside it), and,
// unlike Kafka, a target whose size is not the topic's replication factor:
// tide keeps one replication factor per topic (docs/compatibility.md).
// Targets on a fenced broker are accepted, as in Kafka: its replica joins
// the ISR once it is back, and the move completes then.
func Reassign(img *metadata.Image, request ReassignRequest, in rules.Rules) ([]metadata.Record, int16, error) {
	partition, ok := img.Partition(request.TopicPartition)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code, nil
	}
	config, _ := img.TopicConfig(request.Topic)
	d := newDecision(img)
	if request.Replicas == nil {
		if !partition.Reassigning() {
			return nil, kerr.NoReassignmentInProgress.Code, nil
		}
		code, err := d.cancelReassignment(partition, config)
		if code != 0 || err != nil {
			return nil, code, err
		}
		return d.records, 0, nil
	}
	if !validReassignmentTarget(img, request.Replicas, config.ReplicationFactor) {
		return nil, kerr.InvalidReplicaAssignment.Code, nil
	}
	if !in.On(rules.ReassignmentCompletesInISR) {
		if err := d.moveAtOnce(partition, request.Replicas); err != nil {
			return nil, 0, err
		}
		return d.records, 0, nil
	}
	if err := d.startReassignment(partition, request.Replicas, config); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}

// validReassignmentTarget checks a target assignment: the topic's
// replication factor of distinct registered brokers.
func validReassignmentTarget(img *metadata.Image, target []metadata.BrokerID, replicationFactor int) bool {
	if len(target) == 0 || len(target) != replicationFactor {
		return false
	}
	for i, id := range target {
		if _, registered := img.Broker(id); !registered || slices.Contains(target[:i], id) {
			return false
		}
	}
	return true
}

// startReassignment appends step 1 of Reassign, and step 3 at once when
// nothing is added.
func (d *decision) startReassignment(partition metadata.PartitionState, target []metadata.BrokerID, config metadata.TopicConfig) error {
	merged := slices.Clone(target)
	var adding, removing []metadata.BrokerID
	for _, id := range partition.Replicas {
		if !slices.Contains(target, id) {
			merged = append(merged, id)
			removing = append(removing, id)
		}
	}
	for _, id := range target {
		// Added: not a replica before any reassignment in progress began,
		// so a replica a replaced target added still has to join the ISR.
		if !partition.IsReplica(id) || slices.Contains(partition.Adding, id) {
			adding = append(adding, id)
		}
	}
	if slices.Equal(merged, partition.Replicas) && slices.Equal(adding, partition.Adding) && slices.Equal(removing, partition.Removing) {
		return d.maybeCompleteReassignment(partition.TopicPartition, config)
	}
	change := metadata.PartitionChange{
		TopicPartition:      partition.TopicPartition,
		Leader:              partition.Leader,
		ISR:                 slices.Clone(partition.ISR),
		ELR:                 slices.Clone(partition.ELR),
		Replicas:            merged,
		LeaderEpoch:         partition.LeaderEpoch,
		PartitionEpoch:      partition.PartitionEpoch + 1,
		LeaderRecoveryState: partition.LeaderRecoveryState,
	}
	if err := d.append(change); err != nil {
		return err
	}
	if len(adding) > 0 || len(removing) > 0 {
		err := d.append(metadata.Reassignment{TopicPartition: partition.TopicPartition, PartitionEpoch: change.PartitionEpoch,
			Adding: adding, Removing: removing})
		if err != nil {
			return err
		}
	}
	if partition.Leader == metadata.NoBroker {
		// An offline partition may now have a replica that can lead: an
		// added one, on a topic that allows unclean election. The
		// election is the topic's own choice, as when a broker comes back
		// (decision.electLeaderless).
		moved, _ := d.image.Partition(partition.TopicPartition)
		if election, elected := reconcile(moved, config, d.image.Active, nil); elected {
			if err := d.append(election); err != nil {
				return err
			}
		}
	}
	return d.maybeCompleteReassignment(partition.TopicPartition, config)
}

// maybeCompleteReassignment appends step 3 of Reassign if the partition's
// reassignment may complete: every added replica is in the ISR, and so is
// a target replica. Until then nothing is removed.
func (d *decision) maybeCompleteReassignment(tp metadata.TopicPartition, config metadata.TopicConfig) error {
	partition, _ := d.image.Partition(tp)
	if !partition.Reassigning() {
		return nil
	}
	target := partition.Target()
	for _, id := range partition.Adding {
		if !partition.InISR(id) {
			return nil
		}
	}
	var isr []metadata.BrokerID
	for _, id := range partition.ISR {
		if slices.Contains(target, id) {
			isr = append(isr, id)
		}
	}
	if len(isr) == 0 {
		return nil
	}
	return d.setAssignment(partition, target, isr, config)
}

// cancelReassignment appends the revert of a reassignment in progress: the
// assignment without the replicas being added, and the ISR without them.
func (d *decision) cancelReassignment(partition metadata.PartitionState, config metadata.TopicConfig) (int16, error) {
	var replicas, isr []metadata.BrokerID
	for _, id := range partition.Replicas {
		if !slices.Contains(partition.Adding, id) {
			replicas = append(replicas, id)
		}
	}
	for _, id := range partition.ISR {
		if !slices.Contains(partition.Adding, id) {
			isr = append(isr, id)
		}
	}
	if len(isr) == 0 {
		return kerr.InvalidReplicaAssignment.Code, nil
	}
	return 0, d.setAssignment(partition, replicas, isr, config)
}

// setAssignment appends the PartitionChange that gives a partition a new
// assignment and ISR (a subset of the current ISR, so every member holds
// every committed record), which ends its reassignment state. The leader
// stays if it is in the new ISR, else the first replica of the new
// assignment in it leads, in a new leader epoch (electLeader); the ELR
// keeps only replicas of the new assignment.
func (d *decision) setAssignment(partition metadata.PartitionState, replicas, isr []metadata.BrokerID, config metadata.TopicConfig) error {
	target := partition.Clone()
	target.Replicas, target.ISR = replicas, isr
	target.ELR = nil
	for _, id := range elrAfter(partition, isr, config.MinInsyncReplicas, nil) {
		if slices.Contains(replicas, id) {
			target.ELR = append(target.ELR, id)
		}
	}
	result, _ := electLeader(target, d.image.Active, metadata.TopicConfig{MinInsyncReplicas: config.MinInsyncReplicas})
	change := metadata.PartitionChange{
		TopicPartition:      partition.TopicPartition,
		Leader:              result.leader,
		ISR:                 slices.Clone(result.isr),
		ELR:                 slices.Clone(result.elr),
		Replicas:            slices.Clone(replicas),
		LeaderEpoch:         partition.LeaderEpoch,
		PartitionEpoch:      partition.PartitionEpoch + 1,
		LeaderRecoveryState: partition.LeaderRecoveryState,
	}
	if result.leader != partition.Leader {
		change.LeaderEpoch++
	}
	return d.append(change)
}

// moveAtOnce is Reassign with rule reassignment-completes-in-isr switched
// off: the assignment becomes the target at once, and every active target
// replica is taken for in sync, whether or not it holds a record. The
// leader stays if it is a target replica, else the first one leads.
func (d *decision) moveAtOnce(partition metadata.PartitionState, target []metadata.BrokerID) error {
	var isr []metadata.BrokerID
	for _, id := range target {
		if d.image.Active(id) {
			isr = append(isr, id)
		}
	}
	leader := metadata.NoBroker
	switch {
	case slices.Contains(isr, partition.Leader):
		leader = partition.Leader
	case len(isr) > 0:
		leader = isr[0]
	}
	change := metadata.PartitionChange{
		TopicPartition: partition.TopicPartition,
		Leader:         leader,
		ISR:            isr,
		Replicas:       slices.Clone(target),
		LeaderEpoch:    partition.LeaderEpoch,
		PartitionEpoch: partition.PartitionEpoch + 1,
	}
	if leader != partition.Leader {
		change.LeaderEpoch++
	}
	return d.append(change)
}

// ListReassignments answers ListPartitionReassignments from an image: the
// partitions being reassigned, sorted by topic and partition; with topics
// named, only their partitions named there, those without a reassignment
// in progress left out, as Kafka's controller leaves them out.
func ListReassignments(img *metadata.Image, named map[string][]int32) []metadata.PartitionState {
	var list []metadata.PartitionState
	for _, partition := range img.Reassignments() {
		if named == nil || slices.Contains(named[partition.Topic], partition.Partition) {
			list = append(list, partition)
		}
	}
	return list
}
