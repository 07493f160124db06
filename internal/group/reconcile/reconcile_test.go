package reconcile

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/rules"
)

func describe(member Member) string {
	return fmt.Sprintf("%s epoch %d (previous %d) assigned %v pending %v", member.State, member.MemberEpoch,
		member.PreviousMemberEpoch, member.Assigned, member.PendingRevocation)
}

func TestDescribe(t *testing.T) {
	member := Member{State: UnrevokedPartitions, MemberEpoch: 4, PreviousMemberEpoch: 4,
		Assigned: assignor.Assignment{"orders": {0, 1}, "payments": {2}}, PendingRevocation: assignor.Assignment{}}
	if got := member.Describe(); got != "UNREVOKED_PARTITIONS epoch 4 (previous 4) assigned orders 0 1; payments 2 pending none" {
		t.Errorf("Describe() = %q", got)
	}
}

// TestNext walks the state machine through each transition of Kafka's
// CurrentAssignmentBuilder. Member "a" is reconciled; "b" owns orders-2.
func TestNext(t *testing.T) {
	owners := NewOwners()
	owners.Update("b", Member{}, Member{MemberEpoch: 4, Assigned: assignor.Assignment{"orders": {2}}})
	stable := Member{State: Stable, MemberEpoch: 4, PreviousMemberEpoch: 3, Assigned: assignor.Assignment{"orders": {0, 1}}}
	unrevoked := Member{State: UnrevokedPartitions, MemberEpoch: 4, PreviousMemberEpoch: 4,
		Assigned: assignor.Assignment{"orders": {0}}, PendingRevocation: assignor.Assignment{"orders": {1}}}
	for _, test := range []struct {
		name      string
		member    Member
		heartbeat Heartbeat
		legacy    bool
		want      string
	}{
		{"stable at the target epoch stays", stable, Heartbeat{TargetEpoch: 4, Target: assignor.Assignment{"orders": {5}}},
			false, "STABLE epoch 4 (previous 3) assigned map[orders:[0 1]] pending map[]"},
		{"a partition moved away is revoked first, at the same epoch", stable,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}, Owned: assignor.Assignment{"orders": {0, 1}}},
			false, "UNREVOKED_PARTITIONS epoch 4 (previous 4) assigned map[orders:[0]] pending map[orders:[1]]"},
		{"owned not reported counts as still owned", stable, Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}},
			false, "UNREVOKED_PARTITIONS epoch 4 (previous 4) assigned map[orders:[0]] pending map[orders:[1]]"},
		{"a partition the member already let go of needs no revocation", stable,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}, Owned: assignor.Assignment{"orders": {0}}},
			false, "STABLE epoch 5 (previous 4) assigned map[orders:[0 3]] pending map[]"},
		{"unrevoked waits while the member still owns a pending partition", unrevoked,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}, Owned: assignor.Assignment{"orders": {0, 1}}},
			false, describe(unrevoked)},
		{"unrevoked waits for a heartbeat that lists the owned partitions", unrevoked,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}}, false, describe(unrevoked)},
		{"unrevoked advances once revoked", unrevoked,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 3}}, Owned: assignor.Assignment{"orders": {0}}},
			false, "STABLE epoch 5 (previous 4) assigned map[orders:[0 3]] pending map[]"},
		{"a partition another member owns is held back", unrevoked,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 2}}, Owned: assignor.Assignment{"orders": {0}}},
			false, "UNRELEASED_PARTITIONS epoch 5 (previous 4) assigned map[orders:[0]] pending map[]"},
		{"legacy: a partition another member owns is given at once", unrevoked,
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 2}}, Owned: assignor.Assignment{"orders": {0}}},
			true, "STABLE epoch 5 (previous 4) assigned map[orders:[0 2]] pending map[]"},
		{"unreleased picks up a partition once free", Member{State: UnreleasedPartitions, MemberEpoch: 5, PreviousMemberEpoch: 4,
			Assigned: assignor.Assignment{"orders": {0}}},
			Heartbeat{TargetEpoch: 5, Target: assignor.Assignment{"orders": {0, 6}}, Owned: assignor.Assignment{"orders": {0}}},
			false, "STABLE epoch 5 (previous 5) assigned map[orders:[0 6]] pending map[]"},
		{"an unknown state that owns nothing is recomputed", Member{State: Unknown, MemberEpoch: 5},
			Heartbeat{TargetEpoch: 6, Target: assignor.Assignment{"orders": {7}}, Owned: assignor.Assignment{}},
			false, "STABLE epoch 6 (previous 5) assigned map[orders:[7]] pending map[]"},
	} {
		t.Run(test.name, func(t *testing.T) {
			var in rules.Rules
			if test.legacy {
				in = in.Without(rules.RevokeBeforeAssign)
			}
			test.heartbeat.Owners, test.heartbeat.MemberID = owners, "a"
			next, err := Next(test.member, test.heartbeat, in)
			if err != nil || describe(next) != test.want {
				t.Errorf("got %s, %v\nwant %s", describe(next), err, test.want)
			}
		})
	}
}

func TestUnknownStateOwningPartitionsIsFenced(t *testing.T) {
	_, err := Next(Member{State: Unknown, MemberEpoch: 5}, Heartbeat{TargetEpoch: 6, Owners: NewOwners(),
		Owned: assignor.Assignment{"orders": {1}}}, rules.Rules{})
	if !errors.Is(err, kerr.FencedMemberEpoch) {
		t.Errorf("got %v, want FENCED_MEMBER_EPOCH", err)
	}
}

func TestValidateEpoch(t *testing.T) {
	member := Member{MemberEpoch: 7, PreviousMemberEpoch: 5, Assigned: assignor.Assignment{"orders": {0, 1}}}
	for _, test := range []struct {
		received int32
		owned    assignor.Assignment
		ok       bool
	}{
		{7, nil, true},
		{8, nil, false},
		{5, assignor.Assignment{"orders": {1}}, true}, // the answer to epoch 5's heartbeat was lost
		{5, assignor.Assignment{"orders": {1, 2}}, false},
		{5, nil, false},
		{6, assignor.Assignment{}, false},
		{0, assignor.Assignment{}, false},
	} {
		err := ValidateEpoch(member, test.received, test.owned)
		if (err == nil) != test.ok || (err != nil && !errors.Is(err, kerr.FencedMemberEpoch)) {
			t.Errorf("epoch %d owning %v: %v", test.received, test.owned, err)
		}
	}
}

func TestOwnersUpdateReportsTakenPartitions(t *testing.T) {
	owners := NewOwners()
	a := Member{MemberEpoch: 3, Assigned: assignor.Assignment{"orders": {0}}, PendingRevocation: assignor.Assignment{"orders": {1}}}
	if taken := owners.Update("a", Member{}, a); len(taken) != 0 {
		t.Fatal(taken)
	}
	if owners.Epoch("orders", 1) != 3 || owners.Owner("orders", 1) != "a" || owners.Epoch("orders", 2) != -1 {
		t.Error("a partition pending revocation is still owned")
	}
	if taken := owners.Update("b", Member{}, Member{MemberEpoch: 4, Assigned: assignor.Assignment{"orders": {1}}}); len(taken) != 1 {
		t.Errorf("claiming a's partition: taken %v", taken)
	}
	owners.Remove("a", a)
	if owners.Owner("orders", 0) != "" || owners.Owner("orders", 1) != "b" {
		t.Error("removing a released what b owns, or kept what a owned")
	}
}
