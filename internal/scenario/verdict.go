package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/sim"
)

// runUntil ticks until a condition holds, so that scripts say what they
// wait for (the controller fencing a broker, a new leader) rather than how
// many ticks it takes.
func runUntil(s *sim.Script, d Command) string {
	text := d.stringArg("until", "")
	if text == "" {
		fail("run needs until=CONDITION")
	}
	condition := parseCondition(s, text)
	ticks, ok := s.RunUntil(condition, int64(d.intArg("limit", defaultLimitTicks)))
	if !ok {
		fail("run: %s did not happen within %d ticks", text, ticks)
	}
	return fmt.Sprintf("%s after %d ticks\n", text, ticks)
}

// parseCondition reads a CONDITION (see the verbs above).
func parseCondition(s *sim.Script, text string) func() bool {
	name, value, _ := strings.Cut(text, "=")
	partition := func() metadata.PartitionState { state, _ := s.Partition(); return state }
	switch {
	case name == "answered":
		return s.Answered
	case name == "leader" && value == "none":
		return func() bool { return partition().Leader == metadata.NoBroker }
	case name == "leader":
		id := parseBroker(value)
		return func() bool { return partition().Leader == id && s.Leads(id) }
	case name == "isr":
		var want []metadata.BrokerID
		for _, field := range strings.Split(value, ",") {
			want = append(want, parseBroker(field))
		}
		slices.Sort(want)
		return func() bool {
			state := partition()
			got := slices.Clone(state.ISR)
			slices.Sort(got)
			leaderKnows := !s.Running(state.Leader) || s.Applied(state.Leader)
			return slices.Equal(got, want) && leaderKnows
		}
	case name == "leader-epoch":
		var want int
		if _, err := fmt.Sscan(value, &want); err != nil {
			fail("leader-epoch=%q: not an epoch", value)
		}
		return func() bool { return int(partition().LeaderEpoch) == want }
	case name == "fenced", name == "unfenced":
		id := parseBroker(value)
		return func() bool {
			for _, view := range s.BrokerViews(id) {
				if view.Fenced != (name == "fenced") {
					return false
				}
			}
			return true
		}
	case name == "stopped", name == "running":
		id := parseBroker(value)
		return func() bool { return s.Running(id) == (name == "running") }
	case strings.HasPrefix(name, "hw@"), strings.HasPrefix(name, "leo@"), strings.HasPrefix(name, "epoch@"):
		return offsetCondition(s, name, value)
	}
	fail("unknown condition %q (leader=N|none, isr=1,2, leader-epoch=E, fenced=N, unfenced=N, stopped=N, running=N, answered, hw@N=O, leo@N=O, epoch@N=E)", text)
	return nil
}

func offsetCondition(s *sim.Script, name, value string) func() bool {
	which, id, _ := strings.Cut(name, "@")
	broker := parseBroker(id)
	var want record.Offset
	if _, err := fmt.Sscan(value, &want); err != nil {
		fail("%s=%q: not an offset", name, value)
	}
	return func() bool {
		highWatermark, logEndOffset, leaderEpoch, ok := s.Offsets(broker)
		switch which {
		case "hw":
			return ok && highWatermark == want
		case "epoch":
			return ok && record.Offset(leaderEpoch) == want
		}
		return ok && logEndOffset == want
	}
}

// check prints the checker's verdict; with recover, it first heals
// everything and requires the cluster to converge (the liveness phase).
func check(s *sim.Script, recover bool) string {
	violation := s.Check()
	var out strings.Builder
	if recover && violation == nil {
		violation = s.Recover()
		out.WriteString(joinLines(s.Output()))
	}
	if violation != nil {
		fmt.Fprintf(&out, "violation: %s\n", violation)
	}
	fmt.Fprintf(&out, "verdict: %s\n", verdict(violation, s.PowerLosses() > 0))
	return out.String()
}

// verdict words the checker's finding as the seed documents do.
func verdict(v *sim.Violation, afterPowerLoss bool) string {
	if v == nil {
		return "safe"
	}
	switch v.Invariant {
	case sim.InvariantAckedWriteLost:
		if afterPowerLoss {
			return offsetRange(v.First, v.Last) + " lost after power loss"
		}
		return "committed " + offsetRange(v.First, v.Last) + " lost"
	case sim.InvariantHighWatermarkBack:
		return fmt.Sprintf("a client saw the HW go back from %d to %d", v.First, v.Last)
	case sim.InvariantPrefixesDisagree:
		return fmt.Sprintf("replicas disagree at offset %d", v.First)
	case sim.InvariantReadTakenBack:
		return "a read of " + offsetRange(v.First, v.Last) + " was taken back"
	case sim.InvariantTwoLeadersOneEpoch:
		return "two leaders in one epoch: " + v.Detail
	case sim.InvariantNoRecovery:
		return "does not recover: " + v.Detail
	}
	return "replica invariant broken: " + v.Detail
}

func offsetRange(first, last record.Offset) string {
	if first == last {
		return fmt.Sprintf("offset %d", first)
	}
	return fmt.Sprintf("offsets %d..%d", first, last)
}
