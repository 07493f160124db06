package quorum

import (
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// The active controller decides a Reassign with its rules: a move of a
// partition onto a broker it is not on stays in progress (every rule on),
// and the committed image on every node shows it; with rule
// reassignment-completes-in-isr off it completes at once.
func TestActiveControllerReassigns(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		c := newTestCluster(t, 3, func(config *Config) {
			if legacy {
				config.Rules = config.Rules.Without(rules.ReassignmentCompletesInISR)
			}
		})
		for _, id := range []metadata.BrokerID{1, 2, 3} {
			c.register(id, "first")
		}
		createTopic(c, "events", 1, 2)
		active := c.active()
		before, _ := active.q.Image().Partition(metadata.TopicPartition{Topic: "events"})
		var target []metadata.BrokerID
		for _, id := range []metadata.BrokerID{1, 2, 3} {
			if !before.IsReplica(id) {
				target = append(target, id)
			}
		}
		target = append(target, before.Replicas[1])
		answer := c.request(active.id, Request{From: 1, Reassign: &controller.ReassignRequest{TopicPartition: before.TopicPartition, Replicas: target}})
		if answer.ErrorCode != 0 {
			t.Fatalf("legacy %t: reassign answered %s", legacy, controller.CodeName(answer.ErrorCode))
		}
		c.tick(5)
		after, _ := active.q.Image().Partition(before.TopicPartition)
		switch {
		case !legacy && (!after.Reassigning() || after.Adding[0] != target[0] || len(after.Replicas) != 3):
			t.Fatalf("the move is not in progress: %v", after)
		case legacy && (after.Reassigning() || !after.InISR(target[0]) || len(after.Replicas) != 2):
			t.Fatalf("legacy: the move did not complete at once: %v", after)
		}
		c.requireSameImages()
	}
}
