package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/rules"
)

// State is a member's reconciliation state; the numbers are Kafka's
// MemberState values, as ConsumerGroupCurrentMemberAssignment records
// persist them.
type State int8

const (
	// Stable: the member holds all of its target it may hold, at the
	// target epoch, or waits for a new target.
	Stable State = 0
	// UnrevokedPartitions: the member must revoke PendingRevocation and
	// say so in a heartbeat before it advances; its epoch stays.
	UnrevokedPartitions State = 1
	// UnreleasedPartitions: the member is at the target epoch but some of
	// its target partitions are still owned by other members.
	UnreleasedPartitions State = 2
	// Unknown: a state this version does not know (read from a newer
	// record); the member is fenced unless it reports owning nothing.
	Unknown State = 127
)

// Describe renders the member for scenario output: state, epoch, previous
// epoch, then the assigned and pending partitions.
func (m Member) Describe() string {
	return fmt.Sprintf("%s epoch %d (previous %d) assigned %s pending %s", m.State, m.MemberEpoch, m.PreviousMemberEpoch,
		describeAssignment(m.Assigned), describeAssignment(m.PendingRevocation))
}

// describeAssignment renders "orders 0 1; payments 2", or "none".
func describeAssignment(assignment assignor.Assignment) string {
	var topics []string
	for _, topic := range assignment.Topics() {
		text := topic
		for _, partition := range assignment[topic] {
			text += fmt.Sprintf(" %d", partition)
		}
		topics = append(topics, text)
	}
	if len(topics) == 0 {
		return "none"
	}
	return strings.Join(topics, "; ")
}

func (s State) String() string {
	switch s {
	case Stable:
		return "STABLE"
	case UnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case UnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Member is a member's current assignment as the coordinator keeps it.
//
// Invariants: Assigned and PendingRevocation are disjoint; in
// UnrevokedPartitions PendingRevocation is non-empty, in the other states
// it is empty; MemberEpoch >= 0 for a member in the group.
type Member struct {
	State State
	// MemberEpoch is the epoch the member's heartbeats must carry.
	MemberEpoch int32
	// PreviousMemberEpoch is the epoch before the last change: a heartbeat
	// whose answer was lost still carries it.
	PreviousMemberEpoch int32
	// Assigned are the partitions the member may use now; the heartbeat
	// answer lists exactly these.
	Assigned assignor.Assignment
	// PendingRevocation are partitions the member still owns but must
	// revoke before it gets anything new.
	PendingRevocation assignor.Assignment
}

// Heartbeat is what Next needs from one heartbeat and the group.
type Heartbeat struct {
	// TargetEpoch and Target are the group's assignment epoch and this
	// member's part of the target assignment.
	TargetEpoch int32
	Target      assignor.Assignment
	// Owned are the partitions the member reports owning (the request's
	// TopicPartitions); nil when the request did not say (the field was
	// null), which counts as "still owns everything it was given".
	Owned assignor.Assignment
	// Owners tells which member owns each partition now.
	Owners *Owners
	// MemberID is this member's id, so that its own partitions do not
	// count as owned by another.
	MemberID string
}

// ErrFenced is returned for a member in an unknown state that reports
// owning partitions: Kafka answers FENCED_MEMBER_EPOCH.
var ErrFenced = kerr.FencedMemberEpoch

// Next returns the member's next current assignment (Kafka's
// CurrentAssignmentBuilder.build). With the rule revoke-before-assign
// switched off (simulator only), partitions still owned by another member
// are assigned at once: the failure the rule prevents.
func Next(member Member, heartbeat Heartbeat, in rules.Rules) (Member, error) {
	switch member.State {
	case Stable:
		if member.MemberEpoch == heartbeat.TargetEpoch {
			return member, nil
		}
		return computeNext(member, heartbeat, in), nil
	case UnrevokedPartitions:
		if heartbeat.Owned == nil || ownsAny(heartbeat.Owned, member.PendingRevocation) {
			return member, nil
		}
		// Every pending partition is revoked: they are released when the
		// coordinator records the result (Owners.Update), and the member
		// moves on toward the target, which may have changed meanwhile.
		return computeNext(member, heartbeat, in), nil
	case UnreleasedPartitions:
		return computeNext(member, heartbeat, in), nil
	}
	if heartbeat.Owned != nil && heartbeat.Owned.Count() == 0 {
		return computeNext(member, heartbeat, in), nil
	}
	return member, fmt.Errorf("reconcile: member in state %d: %w", member.State, ErrFenced)
}

// computeNext moves the member toward its target: revoke first, then
// assign what is free, holding back what is still owned.
func computeNext(member Member, heartbeat Heartbeat, in rules.Rules) Member {
	kept, revoke, toAssign := split(member.Assigned, heartbeat.Target)
	if revoke.Count() > 0 && (heartbeat.Owned == nil || ownsAny(heartbeat.Owned, revoke)) {
		return Member{State: UnrevokedPartitions, MemberEpoch: member.MemberEpoch,
			PreviousMemberEpoch: member.MemberEpoch, Assigned: kept, PendingRevocation: revoke}
	}
	assigned, heldBack := kept, false
	for _, topic := range toAssign.Topics() {
		for _, partition := range toAssign[topic] {
			if in.On(rules.RevokeBeforeAssign) && heartbeat.Owners.ownedByOther(topic, partition, heartbeat.MemberID) {
				heldBack = true
				continue
			}
			assigned[topic] = append(assigned[topic], partition)
		}
	}
	for _, partitions := range assigned {
		slices.Sort(partitions)
	}
	state := Stable
	if heldBack {
		state = UnreleasedPartitions
	}
	return Member{State: state, MemberEpoch: heartbeat.TargetEpoch, PreviousMemberEpoch: member.MemberEpoch,
		Assigned: assigned, PendingRevocation: assignor.Assignment{}}
}

// split returns, topic by topic, current ∩ target, current − target and
// target − current, each sorted.
func split(current, target assignor.Assignment) (kept, revoke, toAssign assignor.Assignment) {
	kept, revoke, toAssign = assignor.Assignment{}, assignor.Assignment{}, assignor.Assignment{}
	for _, topic := range current.Topics() {
		for _, partition := range current[topic] {
			if target.Has(topic, partition) {
				kept[topic] = append(kept[topic], partition)
			} else {
				revoke[topic] = append(revoke[topic], partition)
			}
		}
	}
	for _, topic := range target.Topics() {
		for _, partition := range target[topic] {
			if !current.Has(topic, partition) {
				toAssign[topic] = append(toAssign[topic], partition)
			}
		}
	}
	return kept, revoke, toAssign
}

// ownsAny reports whether owned holds any partition of set.
func ownsAny(owned, set assignor.Assignment) bool {
	for topic, partitions := range set {
		for _, partition := range partitions {
			if owned.Has(topic, partition) {
				return true
			}
		}
	}
	return false
}
