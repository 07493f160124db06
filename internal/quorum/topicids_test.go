package quorum

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
)

// The upgrade of a metadata log written before topic ids: a topic in it
// has none, and the active controller assigns it one on its ticks, once,
// the same on every node; later topics come with theirs.
func TestActiveControllerAssignsMissingTopicIDs(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.register(1, "first")
	active := c.active()
	legacy := metadata.CreateTopic{Name: "legacy", Config: metadata.TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
		Partitions: []metadata.PartitionState{{TopicPartition: metadata.TopicPartition{Topic: "legacy"},
			Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1}}}
	// As today's build proposed it; the flag stands for a log replayed
	// from before topic ids, which a new activation looks through.
	if !active.q.propose([]metadata.Record{legacy}) {
		t.Fatal("the proposal was dropped")
	}
	active.q.topicIDsAssigned = false
	c.tick(10)
	c.requireSameImages()
	id, ok := c.nodes[2].q.Image().TopicID("legacy")
	if !ok || !id.Usable() {
		t.Fatalf("legacy has id %v (%t)", id, ok)
	}
	if answer := createTopic(c, "modern", 1, 1); answer.ErrorCode != 0 {
		t.Fatalf("create: %d", answer.ErrorCode)
	}
	c.tick(10)
	c.requireSameImages()
	if again, _ := c.active().q.Image().TopicID("legacy"); again != id {
		t.Fatalf("the id changed from %v to %v", id, again)
	}
	if modern, _ := c.active().q.Image().TopicID("modern"); !modern.Usable() || modern == id {
		t.Fatalf("modern has id %v", modern)
	}
}
