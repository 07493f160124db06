package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// reassign draws a reassignment of a random partition: a random target of
// the topic's replication factor over brokers 1 to 6 (6 is never
// registered, so some targets are refused), or, one time in four, a
// cancellation.
func (s *simulation) reassign() (string, []metadata.Record, error) {
	partitions := s.image.Partitions()
	if len(partitions) == 0 {
		return "reassign none", nil, nil
	}
	partition := partitions[s.random.IntN(len(partitions))]
	request := ReassignRequest{TopicPartition: partition.TopicPartition}
	if s.random.IntN(4) > 0 {
		config, _ := s.image.TopicConfig(partition.Topic)
		brokers := []metadata.BrokerID{1, 2, 3, 4, 5, 6}
		s.random.Shuffle(len(brokers), func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
		request.Replicas = brokers[:config.ReplicationFactor]
	}
	records, code, err := Reassign(s.image, request, s.rules)
	return fmt.Sprintf("reassign %s to %v %s", request.TopicPartition, request.Replicas, CodeName(code)), records, err
}

// checkReassignmentChange checks rule reassignment-completes-in-isr on one
// partition change: a change of assignment never adds to the ISR (the ISR
// after a move is a subset of the ISR before it, whose members hold every
// committed record), and one that completes a reassignment does so only
// once every added replica is in the ISR.
func checkReassignmentChange(old metadata.PartitionState, change metadata.PartitionChange) string {
	if change.Replicas == nil {
		return ""
	}
	for _, member := range change.ISR {
		if !old.InISR(member) {
			return fmt.Sprintf("the assignment changed to %v and %d joined the ISR with it", change.Replicas, member)
		}
	}
	if old.Reassigning() && slices.Equal(change.Replicas, old.Target()) {
		for _, added := range old.Adding {
			if !old.InISR(added) {
				return fmt.Sprintf("the reassignment completed before %d joined the ISR", added)
			}
		}
	}
	return ""
}

// classifyReassignment names what a partition change did to a
// reassignment, for the coverage count.
func classifyReassignment(old metadata.PartitionState, change metadata.PartitionChange) string {
	switch {
	case change.Replicas == nil:
		return "no assignment change"
	case old.Reassigning() && slices.Equal(change.Replicas, old.Target()):
		return "reassignment completed"
	case old.Reassigning() && len(change.Replicas) < len(old.Replicas):
		return "reassignment cancelled"
	case len(change.Replicas) > len(old.Replicas):
		return "reassignment started"
	}
	return "assignment reordered"
}

// TestRandomReassignmentsCatchTheLegacyMove: with rule
// reassignment-completes-in-isr off, the same walks find a move that put
// replicas in the ISR that were not there: the checks see the failure the
// rule prevents.
func TestRandomReassignmentsCatchTheLegacyMove(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		var problem string
		s := newRandomSimulation(t, seed, map[string]int{})
		s.rules = rules.Rules{}.Without(rules.ReassignmentCompletesInISR)
		s.problem = &problem
		s.run(400)
		if problem != "" {
			t.Logf("seed %d: %s", seed, problem)
			return
		}
	}
	t.Fatal("no walk of 200 showed a legacy move breaking a check")
}
