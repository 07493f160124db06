package scenario

import (
	"bytes"
	"strings"
	"testing"
)

// Every scenario is safe with every rule on and shows its seed's failure
// with its rule switched off.
func TestReplayBothWays(t *testing.T) {
	list := List()
	if len(list) != 6 {
		t.Fatalf("want the five seeds and the power-loss case, got %v", list)
	}
	for _, scenario := range list {
		var out bytes.Buffer
		verdict, safe, err := Replay(scenario.Name, false, &out)
		if err != nil || !safe {
			t.Errorf("%s: %q, %v", scenario.Name, verdict, err)
		}
		if !strings.Contains(out.String(), "[hw=") {
			t.Errorf("%s prints no replica table", scenario.Name)
		}
		verdict, safe, err = Replay(scenario.Name, true, &out)
		if err != nil || safe {
			t.Errorf("%s --legacy: %q, %v", scenario.Name, verdict, err)
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
