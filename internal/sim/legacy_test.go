package sim

import (
	"testing"

	"github.com/tidelog/tide/internal/rules"
)

var legacyBudget = 1500

// TestEachLegacyRuleIsFound switches each rule off in turn and searches
// seeds for a violation: a rule whose absence the simulator cannot tell
// apart is a rule it does not protect.
func TestEachLegacyRuleIsFound(t *testing.T) {
	for _, rule := range rules.All() {
		t.Run(string(rule), func(t *testing.T) {
			if rule == rules.LoadCommittedOnly {
				// The group workload's checks (groups.go) see a loaded
				// phantom only when the offsets partition's leadership
				// moves twice before its tail commits, which 300 seeds did
				// not bring about; internal/group's replay property finds
				// it (TestReplayPropertyCatchesEachLegacyRule).
				t.Skip("not found by the simulator's group workload yet")
			}
			if rule == rules.MinISRRace {
				// The race needs an ISR shrink to reach the controller
				// after a min.insync.replicas change and its answer to
				// reach the leader before the change does; the random
				// workload changes no min.insync.replicas of a topic it
				// produces to. internal/scenario/scenarios/min-isr-race
				// replays it step by step (tide scenario run
				// min-isr-race --legacy).
				t.Skip("found by the min-isr-race scenario, not by random seeds")
			}
			if rule == rules.FetchByTopicID {
				// No random run re-creates a topic under a name it had:
				// TestRecreatedTopicDoesNotCountALaggingFollower shows it.
				t.Skip("a scripted test shows this rule")
			}
			if rule == rules.OrderedCoordinatorAppends {
				// Seed 506 failed with it off until the coordinator learned
				// to stop handing out appends on a failure report
				// (owners799); what the rule adds, appends handed out
				// before the refusal is reported, internal/frontend's
				// TestRefusedCoordinatorAppendHoldsBackLaterOnes shows.
				// A broker here flushes after each request, so a refusal
				// is reported before the next request is handled: seeds 1
				// to 1500 pass with it off. With BatchedPasses (a tick's
				// requests in one pass, as tide serve takes them) only
				// seeds 89 and 786 of 1 to 1500 failed with it off, and
				// the same way with it on: a stale coordinator's read,
				// which rule coordinator-lease prevents (docs/simulation.md).
				// The case needs a refused append and a later one of the
				// same group in one pass before any fetch delivers the
				// refusal, which the workload brings about too rarely.
				t.Skip("a unit test in internal/frontend shows this rule")
			}
			if rule == rules.CoordinatorLease {
				// A stale coordinator serves a read after the new one
				// acknowledged a commit only in a schedule batched passes
				// bring about: seeds 89 and 786 (TestStaleCoordinatorSeeds89And786).
				if result := Run(Options{Seed: 89, BatchedPasses: true, Legacy: []rules.Rule{rule}}); result.Violation == nil {
					t.Fatal("seed 89 with batched passes did not find the failure rule coordinator-lease prevents")
				}
				return
			}
			t.Parallel()
			for seed := uint64(1); seed <= uint64(legacyBudget); seed++ {
				result := Run(Options{Seed: seed, Legacy: []rules.Rule{rule}})
				if result.Violation != nil {
					t.Logf("seed %d: %s", seed, result.Violation)
					return
				}
			}
			t.Fatalf("no seed in %d found the failure rule %s prevents", legacyBudget, rule)
		})
	}
}
