package scenario

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/sim"
)

// runScript runs a script of commands, one a line, and returns each
// command's output joined.
func runScript(t *testing.T, script string) string {
	t.Helper()
	var s *sim.Script
	var all strings.Builder
	for i, line := range strings.Split(strings.TrimSpace(script), "\n") {
		var out string
		var err error
		if s, out, err = Run(s, parseCommand(fmt.Sprintf("script:%d", i+1), strings.TrimSpace(line))); err != nil {
			t.Fatalf("%v\n%s", err, all.String())
		}
		all.WriteString(out)
	}
	return all.String()
}

// Turning unclean.leader.election.enable on elects a leader at once for
// an offline partition whose only live replica is out of the ISR and ELR:
// r1 led alone (min.insync.replicas=1 dropped r2 from the ISR without
// keeping it eligible), r1 fails, r2 comes back, and the partition stays
// offline until the config change, whose metadata entry elects r2
// (recovering, KIP-704). r2 lacks the offsets r1 took alone, and the
// checker says so: that is the loss unclean election accepts.
func TestEnablingUncleanElectionElectsAtOnce(t *testing.T) {
	out := runScript(t, `
cluster brokers=2
topic replicas=1,2 min-isr=1
crash broker=2
run until=isr=1
produce broker=1 count=3
run until=answered
crash broker=1
run until=leader=none
restart broker=2
run until=unfenced=2
tick n=200
alter-config unclean.leader.election.enable=true
run until=leader=2 limit=20
check`)
	if !strings.Contains(out, "controller: config topic t unclean.leader.election.enable=true") ||
		!strings.Contains(out, "leader=2 after") || !strings.Contains(out, "recovering") {
		t.Fatalf("no unclean election at the config change:\n%s", out)
	}
	// The election came in the entry of the config change: nothing else
	// moved the partition while r2 waited.
	if strings.Count(out, "partition-change t-0 leader=2") != 1 {
		t.Fatalf("r2 elected more than once, or before the change:\n%s", out)
	}
	if !strings.Contains(out, "verdict: committed offsets 0..2 lost") {
		t.Fatalf("the unclean election's loss is not what the checker saw:\n%s", out)
	}
}
