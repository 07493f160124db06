package reconcile

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/group/assignor"
)

// ValidateEpoch checks the member epoch of a heartbeat from a known member
// (Kafka's throwIfConsumerGroupMemberEpochIsInvalid): an epoch above the
// member's is fenced (it cannot come from this member's history); one
// below is fenced unless it is the member's previous epoch and the
// partitions it reports owning are all in its current Assigned, which is
// a heartbeat whose answer was lost. owned is nil when the request did not
// list the owned partitions; then the previous epoch is not accepted.
func ValidateEpoch(member Member, received int32, owned assignor.Assignment) error {
	switch {
	case received == member.MemberEpoch:
		return nil
	case received > member.MemberEpoch:
		return fmt.Errorf("member epoch %d is ahead of the member's %d: %w", received, member.MemberEpoch, kerr.FencedMemberEpoch)
	case received == member.PreviousMemberEpoch && owned != nil && subset(owned, member.Assigned):
		return nil
	}
	return fmt.Errorf("member epoch %d is behind the member's %d: %w", received, member.MemberEpoch, kerr.FencedMemberEpoch)
}

// subset reports whether every partition of small is in large.
func subset(small, large assignor.Assignment) bool {
	for topic, partitions := range small {
		for _, partition := range partitions {
			if !large.Has(topic, partition) {
				return false
			}
		}
	}
	return true
}
