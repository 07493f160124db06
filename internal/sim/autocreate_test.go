package sim

import (
	"strings"
	"testing"
)

// The admin workload's Metadata requests name new topics with
// AllowAutoTopicCreation (auto.create.topics.enable is on in the
// simulator, as Kafka's default): some are answered LEADER_NOT_AVAILABLE
// while the topic is created through the controller forwarding.
// Auto creation then runs under every fault with every invariant holding.
func TestAdminWorkloadAutoCreatesTopics(t *testing.T) {
	autoCreates := 0
	for seed := uint64(1); seed <= 6; seed++ {
		result := Run(Options{Seed: seed})
		if result.Violation != nil {
			t.Fatalf("seed %d: %s\n%s", seed, result.Violation, strings.Join(result.Trace, "\n"))
		}
		autoCreates += result.Stats.AutoCreates()
	}
	if autoCreates == 0 {
		t.Fatal("no Metadata request of seeds 1-6 began a topic's creation")
	}
	t.Logf("%d topics auto-created over seeds 1-6", autoCreates)
}
