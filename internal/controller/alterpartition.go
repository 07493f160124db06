package controller

import (
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartitionRequest is a partition leader's proposal to change ISRs
// (Kafka's AlterPartition, v3+).
type AlterPartitionRequest struct {
	BrokerID    metadata.BrokerID
	BrokerEpoch metadata.BrokerEpoch
	Partitions  []AlterPartitionItem
}

// AlterPartitionItem proposes one partition's new ISR, built on the leader
// and partition epochs the leader holds.
type AlterPartitionItem struct {
	metadata.TopicPartition
	LeaderEpoch    record.LeaderEpoch
	PartitionEpoch metadata.PartitionEpoch
	// NewISR carries, for each member, the broker epoch the leader saw in
	// that follower's fetches (its own current epoch for itself), so that a
	// member that restarted since cannot be added on the strength of its
	// previous life's fetches (KIP-903). NoBrokerEpoch skips the check for
	// that member, as in Kafka.
	NewISR              []BrokerIDAndEpoch
	LeaderRecoveryState metadata.LeaderRecoveryState
}

// BrokerIDAndEpoch names one incarnation of a broker.
type BrokerIDAndEpoch struct {
	ID    metadata.BrokerID
	Epoch metadata.BrokerEpoch
}

// AlterPartitionResponse answers AlterPartition: a top-level code (set, with
// no per-partition results, when the whole request is refused) and one
// result per item, in request order.
type AlterPartitionResponse struct {
	ErrorCode  int16
	Partitions []AlterPartitionResult
}

// AlterPartitionResult is one partition's answer. On success Partition is
// the partition's state after the change (or its unchanged state), which
// the leader commits as its ISR and partition epoch.
type AlterPartitionResult struct {
	metadata.TopicPartition
	ErrorCode int16
	Partition metadata.PartitionState
}

// AlterPartition decides a leader's ISR proposal: the compare-and-set of
// KIP-497 with the broker epochs of KIP-903, checked in the order of Kafka's
// ReplicationControlManager.alterPartition and validateAlterPartitionData:
//
//  1. The requester's broker epoch must be its registered one, else
//     STALE_BROKER_EPOCH for the whole request: a leader from an earlier
//     incarnation must not change anything.
//  2. Per partition: UNKNOWN_TOPIC_OR_PARTITION if it does not exist.
//  3. A leader or partition epoch newer than the image's: NOT_CONTROLLER
//     (this controller is behind; see errors.go).
//  4. An older leader epoch: FENCED_LEADER_EPOCH (a deposed leader).
//  5. A requester that is not the leader: INVALID_REQUEST.
//  6. An older partition epoch: INVALID_UPDATE_VERSION. This is the
//     compare-and-set: the proposal was built on an ISR that has changed
//     since, and applying it could undo that change (say, re-add a replica
//     the controller removed when its broker was fenced).
//  7. A new ISR with duplicates or non-replicas, or without the leader:
//     INVALID_REQUEST. A Recovering leader (after an unclean election) may
//     not grow the ISR beyond itself, nor may a Recovered one go back to
//     Recovering (KIP-704): INVALID_REQUEST.
//  8. Every new ISR member must be registered, unfenced, not shutting down,
//     and of the epoch the leader saw, else INELIGIBLE_REPLICA (KIP-841,
//     KIP-903): a fenced or restarted replica may have lost records.
//
// A proposal that changes nothing succeeds with the current state and no
// record. Otherwise the PartitionChange keeps the leader and leader epoch,
// bumps the partition epoch, and updates the ELR (elrAfter): members
// dropped from an ISR below min.insync.replicas join it, members added
// leave it.
//
// One change in flight per partition is the leader's duty, and the replica
// core enforces it: a leader that sent a second proposal before the first
// was answered would have built it on an ISR the controller may never
// commit, and would count that ISR toward the high watermark meanwhile. The
// controller cannot see that and rejects nothing on that basis; step 6
// rejects whatever was built on a superseded partition epoch.
func AlterPartition(img *metadata.Image, request AlterPartitionRequest) ([]metadata.Record, AlterPartitionResponse, error) {
	requester, ok := img.Broker(request.BrokerID)
	if !ok || requester.Epoch != request.BrokerEpoch {
		return nil, AlterPartitionResponse{ErrorCode: kerr.StaleBrokerEpoch.Code}, nil
	}
	if len(request.Partitions) > MaxPartitionsPerRequest {
		return nil, AlterPartitionResponse{ErrorCode: kerr.InvalidRequest.Code}, nil
	}
	d := newDecision(img)
	response := AlterPartitionResponse{Partitions: make([]AlterPartitionResult, 0, len(request.Partitions))}
	for _, item := range request.Partitions {
		result := AlterPartitionResult{TopicPartition: item.TopicPartition}
		result.ErrorCode = validateAlterPartition(d.image, request.BrokerID, item)
		if result.ErrorCode == 0 {
			state, err := d.alterPartition(item)
			if err != nil {
				return nil, AlterPartitionResponse{}, err
			}
			result.Partition = state
		}
		response.Partitions = append(response.Partitions, result)
	}
	return d.records, response, nil
}

// validateAlterPartition runs checks 2 to 8 of AlterPartition.
func validateAlterPartition(img *metadata.Image, requester metadata.BrokerID, item AlterPartitionItem) int16 {
	partition, ok := img.Partition(item.TopicPartition)
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition.Code
	case item.LeaderEpoch > partition.LeaderEpoch || item.PartitionEpoch > partition.PartitionEpoch:
		return kerr.NotController.Code
	case item.LeaderEpoch < partition.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case requester != partition.Leader:
		return kerr.InvalidRequest.Code
	case item.PartitionEpoch < partition.PartitionEpoch:
		return kerr.InvalidUpdateVersion.Code
	}
	newISR := make([]metadata.BrokerID, len(item.NewISR))
	for i, member := range item.NewISR {
		newISR[i] = member.ID
		if !partition.IsReplica(member.ID) || slices.Contains(newISR[:i], member.ID) {
			return kerr.InvalidRequest.Code
		}
	}
	switch {
	case !slices.Contains(newISR, partition.Leader):
		return kerr.InvalidRequest.Code
	case item.LeaderRecoveryState != metadata.Recovered && item.LeaderRecoveryState != metadata.Recovering:
		return kerr.InvalidRequest.Code
	case item.LeaderRecoveryState == metadata.Recovering && len(newISR) > 1:
		return kerr.InvalidRequest.Code
	case partition.LeaderRecoveryState == metadata.Recovered && item.LeaderRecoveryState == metadata.Recovering:
		return kerr.InvalidRequest.Code
	}
	for _, member := range item.NewISR {
		broker, registered := img.Broker(member.ID)
		if !registered || !broker.EligibleForISR(member.Epoch) {
			return kerr.IneligibleReplica.Code
		}
	}
	return 0
}

// alterPartition appends the change a validated item asks for, if any, and
// returns the partition's resulting state.
func (d *decision) alterPartition(item AlterPartitionItem) (metadata.PartitionState, error) {
	current, _ := d.image.Partition(item.TopicPartition)
	config, _ := d.image.TopicConfig(item.Topic)
	var targetISR []metadata.BrokerID
	for _, replica := range current.Replicas {
		if slices.ContainsFunc(item.NewISR, func(member BrokerIDAndEpoch) bool { return member.ID == replica }) {
			targetISR = append(targetISR, replica)
		}
	}
	change, changed := changeRecord(current, election{
		leader:        current.Leader,
		isr:           targetISR,
		elr:           elrAfter(current, targetISR, config.MinInsyncReplicas, nil),
		recoveryState: item.LeaderRecoveryState,
	})
	if !changed {
		return current, nil
	}
	if err := d.append(change); err != nil {
		return metadata.PartitionState{}, err
	}
	// The ISR grew: a reassignment waiting for its added replicas may
	// complete now (reassign.go). The leader gets the state after it,
	// under a new leader if the move took it out.
	if err := d.maybeCompleteReassignment(item.TopicPartition, config); err != nil {
		return metadata.PartitionState{}, err
	}
	next, _ := d.image.Partition(item.TopicPartition)
	return next, nil
}
