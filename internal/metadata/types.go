// Package metadata holds the cluster's metadata as tide replicates it: the
// records of the metadata log (brokers registering, being fenced and
// unfenced, shutting down; topics created and deleted; partition changes)
// and the image they build when applied strictly in log order. It is pure:
// no I/O, no clock, no goroutines.
package metadata

import (
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/record"
)

// BrokerID identifies a broker (Kafka's node.id).
type BrokerID int32

// NoBroker is the leader of a partition that has none.
const NoBroker BrokerID = -1

// BrokerEpoch identifies one incarnation of a broker: a restarted broker
// registers again and gets a new, larger epoch, so that requests from its
// previous life can be told apart and rejected (KIP-380, KIP-903).
type BrokerEpoch int64

// NoBrokerEpoch means the epoch is unknown or not checked.
const NoBrokerEpoch BrokerEpoch = -1

// PartitionEpoch is bumped at every change of a partition's leader, ISR,
// ELR or replicas. AlterPartition compare-and-sets on it (KIP-497), and
// brokers ignore partition state older than the one they hold.
type PartitionEpoch int32

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// LeaderRecoveryState says whether a leader elected uncleanly may still be
// missing committed records (KIP-704).
type LeaderRecoveryState int8

const (
	Recovered  LeaderRecoveryState = 0
	Recovering LeaderRecoveryState = 1
)

// PartitionState is what the metadata log says about one partition.
//
// Invariants: Leader is NoBroker or a member of ISR (or, right after an
// unclean election, the only member); ISR and ELR are disjoint subsets of
// Replicas; LeaderEpoch and PartitionEpoch never decrease.
type PartitionState struct {
	TopicPartition
	// Replicas is the assignment, in preference order: the first is the
	// preferred leader.
	Replicas []BrokerID
	// ISR is the in-sync replica set.
	ISR []BrokerID
	// ELR is the eligible leader replicas: members removed from the ISR
	// while it was below min.insync.replicas that still hold every
	// committed record (KIP-966).
	ELR                 []BrokerID
	Leader              BrokerID
	LeaderEpoch         record.LeaderEpoch
	PartitionEpoch      PartitionEpoch
	LeaderRecoveryState LeaderRecoveryState
	// Adding and Removing are the replicas a reassignment in progress
	// adds and takes out (KIP-455), both nil when none is: disjoint
	// subsets of Replicas, which holds the target and the replicas being
	// removed. They come from Reassignment records (reassignment.go).
	Adding   []BrokerID
	Removing []BrokerID
}

// Clone returns a deep copy.
func (p PartitionState) Clone() PartitionState {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.ELR = slices.Clone(p.ELR)
	p.Adding = slices.Clone(p.Adding)
	p.Removing = slices.Clone(p.Removing)
	return p
}

// Reassigning reports whether a reassignment is in progress.
func (p PartitionState) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the assignment a reassignment in progress moves to: Replicas
// without Removing, in order; Replicas when none is in progress.
func (p PartitionState) Target() []BrokerID {
	var target []BrokerID
	for _, id := range p.Replicas {
		if !slices.Contains(p.Removing, id) {
			target = append(target, id)
		}
	}
	return target
}

// InISR reports whether broker is in the ISR.
func (p PartitionState) InISR(broker BrokerID) bool { return slices.Contains(p.ISR, broker) }

// IsReplica reports whether broker is in the assignment.
func (p PartitionState) IsReplica(broker BrokerID) bool { return slices.Contains(p.Replicas, broker) }

func (p PartitionState) String() string {
	text := fmt.Sprintf("%s leader=%d leader-epoch=%d partition-epoch=%d replicas=%v isr=%v elr=%v",
		p.TopicPartition, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas, p.ISR, p.ELR)
	if p.Reassigning() {
		text += fmt.Sprintf(" adding=%v removing=%v", p.Adding, p.Removing)
	}
	return text
}

// BrokerState is what the metadata log says about one broker.
type BrokerState struct {
	ID    BrokerID
	Epoch BrokerEpoch
	// Fenced brokers may not lead or join an ISR: they missed heartbeats or
	// have just registered and not caught up with the metadata log.
	Fenced bool
	// ShuttingDown brokers are in controlled shutdown: leadership moves away
	// from them and they may not join an ISR (KIP-841).
	ShuttingDown bool
	// ServedEpoch is the last epoch under which the broker was ever
	// unfenced, across registrations, or NoBrokerEpoch. An incarnation that
	// registered but never got unfenced served nothing, so its successor may
	// vouch for the log of the one that served (KIP-966's
	// PreviousBrokerEpoch).
	ServedEpoch BrokerEpoch
}

// EligibleForISR reports whether the broker may join an ISR when it fetches
// with brokerEpoch (KIP-841, KIP-903): registered, unfenced, not shutting
// down, and the same incarnation (NoBrokerEpoch skips the incarnation check,
// for fetches that do not carry one).
func (b BrokerState) EligibleForISR(brokerEpoch BrokerEpoch) bool {
	if b.Fenced || b.ShuttingDown {
		return false
	}
	return brokerEpoch == NoBrokerEpoch || brokerEpoch == b.Epoch
}
