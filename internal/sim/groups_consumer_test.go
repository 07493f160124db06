package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/rules"
)

// The KIP-848 members of the group workload join, commit and rebalance
// under the faults with every rule on, and no partition has two owners;
// with rule revoke-before-assign off, the seed pinned here shows a
// partition given to a member while another, still in the group, owned
// it. (TestEachLegacyRuleIsFound searches for the rule too.)
func TestConsumerGroupMembers(t *testing.T) {
	commits, heartbeats, describes := 0, 0, 0
	var revocations, fences, crashes, pauses, leaves int
	for seed := uint64(1); seed <= 8; seed++ {
		result := Run(Options{Seed: seed})
		if result.Violation != nil {
			t.Fatalf("seed %d: %s\n%s", seed, result.Violation, strings.Join(result.Trace, "\n"))
		}
		commits += result.Stats.consumerCommits
		heartbeats += result.Stats.apiRequests[68]
		describes += result.Stats.apiRequests[69]
		revocations, fences, crashes = revocations+result.Stats.consumerRevocations, fences+result.Stats.consumerFences, crashes+result.Stats.consumerCrashes
		pauses, leaves = pauses+result.Stats.consumerPauses, leaves+result.Stats.consumerLeaves
	}
	t.Logf("KIP-848 members: %d heartbeats, %d accepted offset commits, %d describes, %d partitions revoked, %d fenced, %d crashes, %d pauses, %d leaves",
		heartbeats, commits, describes, revocations, fences, crashes, pauses, leaves)
	if commits == 0 || heartbeats == 0 || describes == 0 || revocations == 0 || fences == 0 {
		t.Fatalf("the KIP-848 members did not work: %d heartbeats, %d accepted commits, %d describes", heartbeats, commits, describes)
	}
	const pinned = 3
	legacy := Run(Options{Seed: pinned, Legacy: []rules.Rule{rules.RevokeBeforeAssign}})
	if legacy.Violation == nil || legacy.Violation.Invariant != InvariantTwoOwners {
		t.Fatalf("seed %d with rule %s off: %v, want %s", pinned, rules.RevokeBeforeAssign, legacy.Violation, InvariantTwoOwners)
	}
	t.Logf("seed %d, legacy: %s", pinned, legacy.Violation)
}
