package sim

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// After healing, each run waits for the KIP-848 group to settle and says
// so in its trace, or excuses it when its __consumer_offsets partition is
// offline by design.
func TestConsumerGroupSettlesAfterHealing(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		result := Run(Options{Seed: seed})
		if result.Violation != nil {
			t.Fatalf("seed %d: %s\n%s", seed, result.Violation, strings.Join(result.Trace, "\n"))
		}
		settled := false
		for _, line := range result.Trace {
			settled = settled || strings.Contains(line, simConsumerGroup+" settled") || strings.Contains(line, simConsumerGroup+" is excused")
		}
		if !settled {
			t.Fatalf("seed %d: the trace does not say the group settled:\n%s", seed, strings.Join(result.Trace, "\n"))
		}
	}
}

// consumerGroupUnsettled finds each way a described group falls short of
// settled, and nothing in a settled one.
func TestConsumerGroupUnsettled(t *testing.T) {
	member := func(index int, epoch int32, owned ...int32) *consumerMember {
		m := &consumerMember{index: index}
		m.reset()
		m.epoch = epoch
		for _, partition := range owned {
			m.owned[partition] = &partitionClaim{}
		}
		return m
	}
	described := func(state string, members []*consumerMember, assigned ...[]int32) *kmsg.ConsumerGroupDescribeResponse {
		group := kmsg.NewConsumerGroupDescribeResponseGroup()
		group.Group, group.State, group.Epoch = simConsumerGroup, state, 9
		for i, m := range members {
			described := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			described.MemberID, described.MemberEpoch = m.memberID, m.epoch
			topic := kmsg.NewAssignmentTopicPartition()
			topic.Topic, topic.Partitions = workloadTopic, assigned[i]
			described.Assignment.TopicPartitions = append(described.Assignment.TopicPartitions, topic)
			group.Members = append(group.Members, described)
		}
		return &kmsg.ConsumerGroupDescribeResponse{Groups: []kmsg.ConsumerGroupDescribeResponseGroup{group}}
	}
	a, b := member(0, 5, 0), member(1, 5, 1, 2)
	cases := []struct {
		name     string
		response *kmsg.ConsumerGroupDescribeResponse
		members  []*consumerMember
		want     string
	}{
		{"settled", described("Stable", []*consumerMember{a, b}, []int32{0}, []int32{1, 2}), []*consumerMember{a, b}, ""},
		{"rebalancing", described("Reconciling", []*consumerMember{a, b}, []int32{0}, []int32{1, 2}), []*consumerMember{a, b}, "the group is Reconciling"},
		{"a live member out", described("Stable", []*consumerMember{a}, []int32{0}), []*consumerMember{a, b}, "is not in the group"},
		{"the member disagrees", described("Stable", []*consumerMember{a, b}, []int32{0, 1}, []int32{2}), []*consumerMember{a, b}, "owns [0], releasing [], and is assigned [0 1]"},
		{"a partition unowned", described("Stable", []*consumerMember{a, b}, []int32{0}, []int32{1}), []*consumerMember{a, member(1, 5, 1)}, "events-2 is assigned to []"},
		{"a partition twice", described("Stable", []*consumerMember{a, b}, []int32{0, 1}, []int32{1, 2}), []*consumerMember{member(0, 5, 0, 1), b}, "events-1 is assigned to"},
		{"a stale epoch", described("Stable", []*consumerMember{a, b}, []int32{0}, []int32{1, 2}), []*consumerMember{a, member(1, 4, 1, 2)}, "holds epoch 4, the coordinator 5"},
		{"a member of no process", described("Stable", []*consumerMember{a, b}, []int32{0, 1, 2}, nil), []*consumerMember{member(0, 5, 0, 1, 2)}, "members no live process is"},
	}
	for _, c := range cases {
		got := consumerGroupUnsettled(c.response, c.members, 3, 100)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Seed 506 once left the KIP-848 group Stable at epoch 13 with events-2
// in no member's target: appends of its coordinator were refused for the
// write backlog (REQUEST_TIMED_OUT before the replica decided) while
// later ones, built on the live state the refused ones made, were
// written; the coordinator that loaded the log after the refusal unloaded
// the old one read those later deltas without the records they followed.
// It settles with every rule on. With rule ordered-coordinator-appends off
// it failed so on the branch that added the rule; the coordinator's own
// stop on a failure report (owners799, merged beside it) covers this seed
// too, so the rule's remaining case, appends handed out before the
// refusal is reported, is shown by internal/frontend's
// TestRefusedCoordinatorAppendHoldsBackLaterOnes.
func TestGroupSettlesSeed506(t *testing.T) {
	const pinned = 506
	result := Run(Options{Seed: pinned})
	if result.Violation != nil {
		t.Fatalf("seed %d: %s", pinned, result.Violation)
	}
}
