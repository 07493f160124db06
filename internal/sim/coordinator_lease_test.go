package sim

import (
	"testing"

	"github.com/tidelog/tide/internal/rules"
)

// Seeds 89 and 786 with batched passes: a broker the controller fenced
// (cut off from it, or paused past its session) still leads a
// __consumer_offsets partition as far as it knows, while the new leader
// acknowledged a commit; the simple consumer, which asked the stale broker
// FindCoordinator, then got an OffsetFetch answer below the acknowledged
// commit from it (offset-commit-lost). With rule coordinator-lease the
// stale broker stops serving its groups once its session lease has run out,
// before the controller can fence it; without the rule both seeds fail so.
func TestStaleCoordinatorSeeds89And786(t *testing.T) {
	for _, seed := range []uint64{89, 786} {
		if result := Run(Options{Seed: seed, BatchedPasses: true}); result.Violation != nil {
			t.Fatalf("seed %d, every rule on: %s", seed, result.Violation)
		}
		result := Run(Options{Seed: seed, BatchedPasses: true, Legacy: []rules.Rule{rules.CoordinatorLease}})
		if result.Violation == nil || result.Violation.Invariant != InvariantCommitLost {
			t.Fatalf("seed %d without rule coordinator-lease: %v, want %s", seed, result.Violation, InvariantCommitLost)
		}
	}
}
