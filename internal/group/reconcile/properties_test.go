package reconcile

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/rules"
)

// randomAssignment draws up to 6 partitions of topics t0 and t1.
func randomAssignment(random *rand.Rand) assignor.Assignment {
	assignment := assignor.Assignment{}
	for range random.IntN(7) {
		topic := fmt.Sprintf("t%d", random.IntN(2))
		assignment[topic] = append(assignment[topic], int32(random.IntN(6)))
	}
	return assignment.Normalized()
}

// randomMember draws a member in a consistent state: pending revocation
// disjoint from assigned, and non-empty exactly in UNREVOKED_PARTITIONS.
func randomMember(random *rand.Rand) Member {
	member := Member{State: State(random.IntN(3)), MemberEpoch: int32(1 + random.IntN(5)),
		Assigned: randomAssignment(random), PendingRevocation: assignor.Assignment{}}
	member.PreviousMemberEpoch = member.MemberEpoch - int32(random.IntN(2))
	if member.State == UnrevokedPartitions {
		for member.PendingRevocation.Count() == 0 {
			for topic, partitions := range randomAssignment(random) {
				for _, partition := range partitions {
					if !member.Assigned.Has(topic, partition) {
						member.PendingRevocation[topic] = append(member.PendingRevocation[topic], partition)
					}
				}
			}
		}
	}
	return member
}

// TestNextProperties checks Next on random members, targets, owned lists
// and other owners: what it hands out is in the target and owned by no
// one else; pending revocations are disjoint from the assignment and only
// in UNREVOKED_PARTITIONS; epochs never go back, and a member that moved
// on is at the target epoch.
func TestNextProperties(t *testing.T) {
	for seed := range uint64(20000) {
		random := rand.New(rand.NewPCG(seed, 3))
		member, target := randomMember(random), randomAssignment(random)
		owners := NewOwners()
		owners.Update("a", Member{}, member)
		owners.Update("other", Member{}, Member{MemberEpoch: 1, Assigned: randomAssignment(random)})
		var owned assignor.Assignment
		if random.IntN(4) != 0 {
			owned = randomAssignment(random)
		}
		heartbeat := Heartbeat{TargetEpoch: member.MemberEpoch + int32(random.IntN(2)), Target: target, Owned: owned, Owners: owners, MemberID: "a"}
		next, err := Next(member, heartbeat, rules.Rules{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if problem := nextProblem(member, next, heartbeat, owners); problem != "" {
			t.Fatalf("seed %d: %s\nfrom %s\nto   %s\ntarget %v owned %v", seed, problem, member.Describe(), next.Describe(), target, owned)
		}
	}
}

func nextProblem(member, next Member, heartbeat Heartbeat, owners *Owners) string {
	unchanged := next.Describe() == member.Describe()
	for topic, partitions := range next.Assigned {
		for _, partition := range partitions {
			if next.PendingRevocation.Has(topic, partition) {
				return "a partition both assigned and pending revocation"
			}
			if !unchanged && !heartbeat.Target.Has(topic, partition) {
				return "a partition assigned outside the target"
			}
			if !member.Assigned.Has(topic, partition) && owners.ownedByOther(topic, partition, "a") {
				return "a partition another member owns was handed out"
			}
		}
	}
	switch {
	case (next.State == UnrevokedPartitions) != (next.PendingRevocation.Count() > 0):
		return "pending revocations outside UNREVOKED_PARTITIONS, or none in it"
	case next.MemberEpoch < member.MemberEpoch:
		return "the member epoch went back"
	case !unchanged && next.State != UnrevokedPartitions && next.MemberEpoch != heartbeat.TargetEpoch:
		return "the member moved on but not to the target epoch"
	}
	return ""
}
