package reconcile

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/rules"
)

// TestDatadriven runs the scripts in testdata/: a group's target set by
// hand and members' heartbeats, with each member's state after each
// heartbeat and who owns what.
//
// Commands:
//
//	target epoch=N      one "member: topic partition..." line per member
//	heartbeat member=M [epoch=E] [null] [legacy]
//	                    owned partitions as "topic partition..." lines
//	                    (none: owns nothing; null: the field left null);
//	                    epoch, when given, is checked first (ValidateEpoch);
//	                    legacy switches revoke-before-assign off
//	owners
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		group := scriptGroup{members: map[string]Member{}, target: map[string]assignor.Assignment{}, owners: NewOwners()}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "target":
				d.ScanArgs(t, "epoch", &group.targetEpoch)
				group.target = map[string]assignor.Assignment{}
				for _, line := range lines(d.Input) {
					member, partitions, _ := strings.Cut(line, ":")
					group.target[member] = parseAssignment(t, partitions)
				}
				return fmt.Sprintf("target epoch %d\n", group.targetEpoch)
			case "heartbeat":
				return group.heartbeat(t, d)
			case "owners":
				return group.owners.Describe() + "\n"
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

type scriptGroup struct {
	targetEpoch int32
	target      map[string]assignor.Assignment
	members     map[string]Member
	owners      *Owners
}

func (g *scriptGroup) heartbeat(t *testing.T, d *datadriven.TestData) string {
	var id string
	d.ScanArgs(t, "member", &id)
	var owned assignor.Assignment
	if !d.HasArg("null") {
		owned = assignor.Assignment{}
		for _, line := range lines(d.Input) {
			for topic, partitions := range parseAssignment(t, line) {
				owned[topic] = append(owned[topic], partitions...)
			}
		}
		owned = owned.Normalized()
	}
	member, known := g.members[id]
	if !known {
		member = Member{State: Stable}
	}
	if d.HasArg("epoch") {
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		if err := ValidateEpoch(member, epoch, owned); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
	}
	var in rules.Rules
	if d.HasArg("legacy") {
		in = in.Without(rules.RevokeBeforeAssign)
	}
	next, err := Next(member, Heartbeat{TargetEpoch: g.targetEpoch, Target: g.target[id], Owned: owned, Owners: g.owners, MemberID: id}, in)
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	var out strings.Builder
	if taken := g.owners.Update(id, member, next); len(taken) > 0 {
		fmt.Fprintf(&out, "TWO OWNERS: %s took %s\n", id, strings.Join(taken, ", "))
	}
	g.members[id] = next
	fmt.Fprintf(&out, "%s: %s\n", id, next.Describe())
	return out.String()
}

func lines(input string) []string {
	var result []string
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		if line = strings.TrimSpace(line); line != "" && line != "none" {
			result = append(result, line)
		}
	}
	return result
}

// parseAssignment reads "topic partition...; topic partition...".
func parseAssignment(t *testing.T, text string) assignor.Assignment {
	t.Helper()
	assignment := assignor.Assignment{}
	for _, part := range strings.Split(text, ";") {
		fields := strings.Fields(part)
		if len(fields) == 0 {
			continue
		}
		for _, field := range fields[1:] {
			partition, err := strconv.ParseInt(field, 10, 32)
			if err != nil {
				t.Fatalf("partition %q: %v", field, err)
			}
			assignment[fields[0]] = append(assignment[fields[0]], int32(partition))
		}
	}
	return assignment.Normalized()
}
