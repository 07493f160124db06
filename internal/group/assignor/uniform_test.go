package assignor

import (
	"math/rand/v2"
	"testing"
)

// TestUniformProperties checks the uniform assignor on random groups:
// complete and exclusive, balanced, sticky, stable and deterministic.
func TestUniformProperties(t *testing.T) {
	for seed := range propertySeeds() {
		random := rand.New(rand.NewPCG(seed, 1))
		spec := randomSpec(random, UniformAssignor{})
		result, err := UniformAssignor{}.Assign(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("", func(t *testing.T) {
			checkComplete(t, spec, result)
			checkUniformBalance(t, spec, result)
			checkUniformSticky(t, spec, result)
			checkStable(t, UniformAssignor{}, spec, result)
			checkDeterministic(t, random, UniformAssignor{}, spec, result)
		})
		if t.Failed() {
			t.Fatalf("seed %d: %+v", seed, spec)
		}
	}
}

// checkUniformBalance: with homogeneous subscriptions member loads differ
// by at most one; in any group, no partition could move to another member
// subscribed to its topic holding two or more fewer partitions.
func checkUniformBalance(t *testing.T, spec Spec, result map[string]Assignment) {
	t.Helper()
	b := newBuilder(sortedMembers(spec.Members), spec.Partitions)
	if len(spec.Members) > 0 && b.homogeneous() {
		low, high := int(^uint(0)>>1), 0
		for _, assignment := range result {
			low, high = min(low, assignment.Count()), max(high, assignment.Count())
		}
		if high-low > 1 {
			t.Fatalf("homogeneous group, loads from %d to %d", low, high)
		}
	}
	for _, from := range spec.Members {
		for topic := range result[from.ID] {
			for _, to := range spec.Members {
				if subscribes(to, topic) && result[to.ID].Count() < result[from.ID].Count()-1 {
					t.Fatalf("%s holds %d with a partition of %s; %s, subscribed, holds %d",
						from.ID, result[from.ID].Count(), topic, to.ID, result[to.ID].Count())
				}
			}
		}
	}
}

// checkUniformSticky: in a homogeneous group each member keeps at least
// min(its valid current partitions, the minimum quota), and the group as
// a whole keeps as many as balance allows. Heterogeneous
// groups may move partitions along a chain of members (one loses in topic
// X and gains in Y) for balance; there checkStable is the stickiness
// check: a balanced target is never moved.
func checkUniformSticky(t *testing.T, spec Spec, result map[string]Assignment) {
	t.Helper()
	if len(spec.Members) == 0 {
		return
	}
	b := newBuilder(sortedMembers(spec.Members), spec.Partitions)
	if !b.homogeneous() {
		return
	}
	quota, extra := len(b.topicOf)/len(spec.Members), len(b.topicOf)%len(spec.Members)
	keptTotal, fewestMoves, fuller := 0, 0, 0
	for _, member := range spec.Members {
		kept, valid := keptCount(member, result[member.ID], ""), validKept(spec, member, "")
		if kept < min(valid, quota) {
			t.Fatalf("member %s kept %d of its partitions, want at least %d", member.ID, kept, min(valid, quota))
		}
		keptTotal += kept
		fewestMoves += min(valid, quota)
		if valid > quota {
			fuller++
		}
	}
	// The extra partitions go first to members that hold more than the
	// quota: then as few partitions move as balance allows.
	if want := fewestMoves + min(extra, fuller); keptTotal != want {
		t.Fatalf("members kept %d partitions in all; balance allows %d", keptTotal, want)
	}
}
