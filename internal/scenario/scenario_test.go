package scenario

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/sim"
)

// Every scenario is safe with every rule on and shows its seed's failure,
// in the seed's words, with its rule switched off.
func TestReplayBothWays(t *testing.T) {
	want := map[string]string{
		"kafka-1211":   "verdict: committed offset 37 lost",
		"kafka-2334":   "verdict: a client saw the HW go back from 100 to 0",
		"kafka-4414":   "verdict: replica invariant broken: broker 2 t-0: leader epoch went backwards from 3 to 2",
		"kafka-6880":   "verdict: replicas disagree at offset 40",
		"kafka-7128":   "verdict: committed offsets 5..9 lost",
		"min-isr-race": "verdict: committed offsets 5..9 lost",
		"unsynced-ack": "verdict: offsets 0..4 lost after power loss",
		// The leader's and its followers' syncs overlap (docs/replication.md).
		"leader-power-loss": "verdict: offsets 5..9 lost after power loss",
	}
	list := List()
	if len(list) != len(want) {
		t.Fatalf("want the five seeds, the two power-loss cases and the min.insync.replicas race, got %v", list)
	}
	for _, scenario := range list {
		var out bytes.Buffer
		verdict, safe, err := Replay(scenario.Name, false, &out)
		if err != nil || !safe || verdict != "verdict: safe" {
			t.Errorf("%s: %q, %v", scenario.Name, verdict, err)
		}
		if !strings.Contains(out.String(), "[hw=") {
			t.Errorf("%s prints no replica table", scenario.Name)
		}
		verdict, safe, err = Replay(scenario.Name, true, &out)
		if err != nil || safe || verdict != want[scenario.Name] {
			t.Errorf("%s --legacy: %q, %v; want %q", scenario.Name, verdict, err, want[scenario.Name])
		}
	}
	if _, _, err := Replay("kafka-9999", false, &bytes.Buffer{}); err == nil {
		t.Error("an unknown scenario replayed")
	}
}

func TestParseRefusesACommandWithoutItsSeparator(t *testing.T) {
	if _, err := Parse("bad", "cluster brokers=3\nstate\n"); err == nil {
		t.Fatal("parsed a command with no ----")
	}
}

// Bad script input is an error naming the script line, never a panic.
func TestBadCommandsAreErrors(t *testing.T) {
	for _, script := range []string{
		"state",
		"cluster brokers=0",
		"cluster brokers=3 legacy=kafka-0",
		"cluster brokers=3 flush=sometimes",
		"cluster brokers=3\ncluster brokers=3",
		"cluster brokers=3\nfrobnicate",
		"cluster brokers=3\nproduce broker=1",
		"cluster brokers=3\ntopic replicas=1,2,4",
		"cluster brokers=3\ntopic replicas=1,2,x",
		"cluster brokers=3\ntopic replicas=1,2\nproduce broker=1 acks=2",
		"cluster brokers=3\ntopic replicas=1,2\nproduce broker=1 count=many",
		"cluster brokers=3\ntopic replicas=1,2\ndeliver from=1 to=2",
		"cluster brokers=3\ntopic replicas=1,2\nhold from=1 to=1",
		"cluster brokers=3\ntopic replicas=1,2\nrun until=sunrise",
		"cluster brokers=3\ntopic replicas=1,2\nrun",
		"cluster brokers=3\ntopic replicas=1,2\nrun until=leader=3 limit=10",
		"cluster brokers=3\ntopic replicas=1,2\nrestart broker=1",
		"cluster brokers=3\ntopic replicas=1,2\nresume broker=1",
		"cluster brokers=3\ntopic replicas=1,2\ncrash broker=9",
		"cluster brokers=3\ntopic replicas=1,2\ntick n=0",
	} {
		lines := strings.Split(script, "\n")
		var s *sim.Script
		var err error
		for i, line := range lines {
			if s, _, err = Run(s, parseCommand(fmt.Sprintf("bad:%d", i+1), line)); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%q: no error", script)
			continue
		}
		if !strings.HasPrefix(err.Error(), "bad:") {
			t.Errorf("%q: the error does not name the line: %v", script, err)
		}
	}
}
