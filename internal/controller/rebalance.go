package controller

import (
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
)

// DefaultLeaderImbalancePercentage is Kafka's
// leader.imbalance.per.broker.percentage.
const DefaultLeaderImbalancePercentage = 10

// MaxRebalanceElections bounds the preferred elections one rebalance
// decides, and so the records of one proposal (KRaft's controller elects
// at most 1,000 imbalanced partitions per batch, maxElectionsPerImbalance).
// The caller checks again at once while more remain.
const MaxRebalanceElections = 1000

// Rebalance is rule auto-leader-rebalance (Kafka's
// auto.leader.rebalance.enable, with the imbalance check of its
// controller's checkAndTriggerAutoLeaderRebalance): for every broker, its
// imbalance ratio is the share of the partitions it is the preferred
// (first) replica of that some other broker leads; where that ratio is
// above percentage (0 to 100), each of those partitions whose preferred
// replica may lead (in the ISR and eligible: registered, unfenced, not
// shutting down) elects it, as ElectPreferred does.
//
// It prevents the annoyance that made Kafka add it: after a broker
// restarts (or every broker, as `tide dev --dir` does), the partitions it
// preferred stay led by whoever took them over, so one broker can lead
// everything, carrying all the produce and fetch load, until an operator
// runs an election by hand. The percentage keeps a cluster that is only
// slightly off balance from churning leaderships (each election makes
// clients refresh metadata and retry); only an ISR member is ever elected,
// so no committed record is lost (see ElectPreferred).
//
// Partitions being reassigned are left out of both counts and elected by
// nobody: their leadership moves when the reassignment completes.
//
// Partitions are visited in topic and partition order and at most
// MaxRebalanceElections are elected; more reports whether eligible
// imbalanced partitions were left for another call.
func Rebalance(img *metadata.Image, percentage int) (records []metadata.Record, more bool, err error) {
	if percentage < 0 || percentage > 100 {
		return nil, false, fmt.Errorf("controller: leader imbalance percentage %d: want 0 to 100", percentage)
	}
	preferred := map[metadata.BrokerID]int{}  // partitions each broker is preferred for
	imbalanced := map[metadata.BrokerID]int{} // of those, led by another broker
	for _, partition := range img.Partitions() {
		if len(partition.Replicas) == 0 || partition.Reassigning() {
			continue
		}
		first := partition.Replicas[0]
		preferred[first]++
		if partition.Leader != first {
			imbalanced[first]++
		}
	}
	over := func(id metadata.BrokerID) bool {
		// ratio > percentage/100, in integers.
		return imbalanced[id]*100 > percentage*preferred[id]
	}
	d := newDecision(img)
	elected := 0
	for _, partition := range img.Partitions() {
		if len(partition.Replicas) == 0 || partition.Reassigning() || partition.Leader == partition.Replicas[0] || !over(partition.Replicas[0]) {
			continue
		}
		if !partition.InISR(partition.Replicas[0]) || !img.Active(partition.Replicas[0]) {
			continue
		}
		if elected == MaxRebalanceElections {
			return d.records, true, nil
		}
		code, err := d.electPreferred(partition.TopicPartition)
		if err != nil {
			return nil, false, err
		}
		if code != 0 {
			return nil, false, fmt.Errorf("controller: rebalancing %v: %s", partition.TopicPartition, CodeName(code))
		}
		elected++
	}
	return d.records, false, nil
}
