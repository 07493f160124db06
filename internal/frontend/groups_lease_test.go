package frontend

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/rules"
)

// Rule coordinator-lease: a broker cut off from the controller keeps
// serving its groups while the controller cannot yet have fenced it, and
// stops once the lease from its last acknowledged heartbeat has run out:
// OffsetFetch answers NOT_COORDINATOR and FindCoordinator does not name it,
// since the controller may have moved __consumer_offsets to a broker that
// has since acknowledged a newer commit (sim seed 89 with
// --batched-passes). Without the rule the stale coordinator answers from
// its own state for as long as the cut lasts. Once the cut heals, the
// broker heartbeats again, learns the metadata and serves the commit.
func TestStaleCoordinatorStopsAtLeaseEnd(t *testing.T) {
	for _, withRule := range []bool{true, false} {
		groupRules := rules.Rules{}
		if !withRule {
			groupRules = groupRules.Without(rules.CoordinatorLease)
		}
		w := newGroupHostWorld(t, groupRules)
		w.serving("app")
		if _, code := w.call("app", simpleCommit("app", 42)); code != 0 {
			t.Fatalf("commit: code %d", code)
		}
		w.cutOff = true
		for range 5 {
			w.step()
		}
		if offset, code := w.fetchOffset("app"); code != 0 || offset != 42 {
			t.Fatalf("rule %v: just after the cut the coordinator answers offset %d, code %d; want 42", withRule, offset, code)
		}
		for range groupHostSessionTicks {
			w.step()
		}
		b := (*backend)(w.fe)
		offset, code := w.fetchOffset("app")
		coordinator, findCode := b.GroupCoordinator("app")
		switch {
		case withRule && (code != kerr.NotCoordinator.Code || findCode != kerr.CoordinatorNotAvailable.Code):
			t.Fatalf("past the lease: OffsetFetch offset %d code %d, FindCoordinator %d code %d; want NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE",
				offset, code, coordinator, findCode)
		case !withRule && (code != 0 || offset != 42 || coordinator != 1):
			t.Fatalf("without the rule the stale coordinator answers offset %d, code %d, names %d; want 42 from broker 1", offset, code, coordinator)
		}
		w.cutOff = false
		// The old coordinator stays until a tick follows the leadership the
		// heartbeats bring (a new leader epoch, after the fence): it may not
		// answer meanwhile, the new one answers once loaded.
		w.stepUntil("a coordinator answers again", func() bool {
			offset, code = w.fetchOffset("app")
			return code == 0
		})
		if offset != 42 {
			t.Fatalf("rule %v: healed, the coordinator answers offset %d, code %d; want 42", withRule, offset, code)
		}
	}
}
