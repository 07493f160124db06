package controller

import (
	"slices"

	"github.com/tidelog/tide/internal/metadata"
)

// eligibility says whether a broker may lead or be in an ISR in the state
// being decided: registered, unfenced, not shutting down, and not one of the
// brokers the decision is taking out.
type eligibility func(metadata.BrokerID) bool

// election is what electLeader decided for a partition.
type election struct {
	leader        metadata.BrokerID
	isr           []metadata.BrokerID
	elr           []metadata.BrokerID
	recoveryState metadata.LeaderRecoveryState
	unclean       bool
}

// electLeader chooses a partition's leader, given its target ISR and ELR
// (already without the brokers that are leaving), following Kafka's
// PartitionChangeBuilder.electAnyLeader:
//
//  1. The current leader stays if it is still an eligible ISR member: a
//     needless change of leader costs clients a metadata refresh and the
//     followers a truncation round.
//  2. Otherwise the first replica, in assignment order, that is an eligible
//     ISR member (a clean election: every ISR member holds every committed
//     record). Assignment order prefers the preferred replica (KAFKA-3670).
//  3. Only if the ISR is empty, the first eligible ELR member in assignment
//     order (KIP-966). ELR members left the ISR while it was below
//     min.insync.replicas, when the high watermark could not advance, so
//     they too hold every committed record. The elected member becomes the
//     ISR and leaves the ELR.
//  4. Only if the topic allows unclean election, the first eligible replica
//     of any kind: ISR := {leader}, ELR := {}, LeaderRecoveryState :=
//     Recovering (KIP-704). This loses every committed record the new leader
//     lacks, and the other replicas later truncate to its log; consumers may
//     have read records that vanish. It trades durability for availability.
//  5. Otherwise no leader (NoBroker, Kafka's -1): the partition is offline
//     until an ISR or ELR member comes back (see decision.electLeaderless).
//
// ok is false in case 5. The caller turns the election into a record with
// changeRecord, which bumps the epochs.
//
// Simplification relative to KIP-966: tide keeps no LastKnownELR and offers
// no "unclean recovery" (choosing the most complete replica by asking each
// for its log end); unclean election picks by assignment order, as Kafka did
// before KIP-966.
func electLeader(partition metadata.PartitionState, eligible eligibility, config metadata.TopicConfig) (election, bool) {
	result := election{
		leader:        partition.Leader,
		isr:           partition.ISR,
		elr:           partition.ELR,
		recoveryState: partition.LeaderRecoveryState,
	}
	if partition.Leader != metadata.NoBroker && partition.InISR(partition.Leader) && eligible(partition.Leader) {
		return result, true
	}
	for _, replica := range partition.Replicas {
		if partition.InISR(replica) && eligible(replica) {
			result.leader = replica
			return result, true
		}
	}
	if len(partition.ISR) == 0 {
		for _, replica := range partition.Replicas {
			if slices.Contains(partition.ELR, replica) && eligible(replica) {
				result.leader = replica
				result.isr = []metadata.BrokerID{replica}
				result.elr = elrAfter(partition, result.isr, config.MinInsyncReplicas, nil)
				return result, true
			}
		}
	}
	if config.UncleanLeaderElection {
		for _, replica := range partition.Replicas {
			if eligible(replica) {
				return election{
					leader:        replica,
					isr:           []metadata.BrokerID{replica},
					recoveryState: metadata.Recovering,
					unclean:       true,
				}, true
			}
		}
	}
	result.leader = metadata.NoBroker
	return result, false
}

// elrAfter is the ELR once the ISR becomes targetISR (KIP-966,
// PartitionChangeBuilder.maybePopulateTargetElr): empty while the target
// ISR has at least min.insync.replicas members, since the high watermark can
// then advance past what former members hold; otherwise the old ISR and ELR
// members that are not in the target ISR, less the brokers that restarted
// after an unclean shutdown. So a member removed from an ISR that is (after
// removal) below min.insync.replicas is kept as eligible instead of being
// forgotten, and a replica that rejoins the ISR leaves the ELR. The result
// is in assignment order, so decisions are deterministic.
func elrAfter(current metadata.PartitionState, targetISR []metadata.BrokerID, minInsyncReplicas int,
	uncleanShutdown []metadata.BrokerID) []metadata.BrokerID {
	if len(targetISR) >= minInsyncReplicas {
		return nil
	}
	var elr []metadata.BrokerID
	for _, replica := range current.Replicas {
		wasCandidate := current.InISR(replica) || slices.Contains(current.ELR, replica)
		if wasCandidate && !slices.Contains(targetISR, replica) && !slices.Contains(uncleanShutdown, replica) {
			elr = append(elr, replica)
		}
	}
	return elr
}

// reconcile recomputes a partition after brokers changed state: ISR members
// that are no longer eligible (or that shut down uncleanly) leave the ISR,
// the ELR follows (elrAfter), and the leader is kept or re-elected
// (electLeader). It returns the change, if anything changed.
func reconcile(partition metadata.PartitionState, config metadata.TopicConfig, eligible eligibility,
	uncleanShutdown []metadata.BrokerID) (metadata.PartitionChange, bool) {
	var targetISR []metadata.BrokerID
	for _, replica := range partition.Replicas {
		if partition.InISR(replica) && eligible(replica) && !slices.Contains(uncleanShutdown, replica) {
			targetISR = append(targetISR, replica)
		}
	}
	target := partition.Clone()
	target.ISR = targetISR
	target.ELR = elrAfter(partition, targetISR, config.MinInsyncReplicas, uncleanShutdown)
	result, _ := electLeader(target, eligible, config)
	return changeRecord(partition, result)
}

// changeRecord turns an election into the record that moves the partition
// there, or reports that nothing changes. Every leader change bumps the
// leader epoch by exactly one, so that each epoch has one leader and a
// zombie leader's requests can be fenced (KIP-101, KIP-320); every change at
// all bumps the partition epoch by one, so that AlterPartition can
// compare-and-set on it (KIP-497) and brokers can ignore stale state.
func changeRecord(current metadata.PartitionState, result election) (metadata.PartitionChange, bool) {
	isr, elr := result.isr, result.elr
	if sameSet(isr, current.ISR) {
		isr = current.ISR
	}
	if sameSet(elr, current.ELR) {
		elr = current.ELR
	}
	if result.leader == current.Leader && slices.Equal(isr, current.ISR) && slices.Equal(elr, current.ELR) &&
		result.recoveryState == current.LeaderRecoveryState {
		return metadata.PartitionChange{}, false
	}
	change := metadata.PartitionChange{
		TopicPartition:      current.TopicPartition,
		Leader:              result.leader,
		ISR:                 slices.Clone(isr),
		ELR:                 slices.Clone(elr),
		LeaderEpoch:         current.LeaderEpoch,
		PartitionEpoch:      current.PartitionEpoch + 1,
		LeaderRecoveryState: result.recoveryState,
	}
	if result.leader != current.Leader {
		change.LeaderEpoch++
	}
	return change, true
}

// sameSet reports whether a and b hold the same brokers, in any order.
func sameSet(a, b []metadata.BrokerID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}
