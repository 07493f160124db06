package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// scriptFailover runs a small script: a write, a held response, a leader
// crash the controller fences, and a new leader. It returns the output.
func scriptFailover(t *testing.T, legacy ...rules.Rule) (*Script, string) {
	t.Helper()
	s, err := NewScript(ScriptConfig{Brokers: 2, Seed: 7, Legacy: legacy})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Output()...)
	}
	step(s.CreateTopic("t", []metadata.BrokerID{1, 2}, 2))
	step(s.Hold(1, 2))
	step(s.Produce(1, 100, replica.AcksAll))
	// The produce arrives; b2's idle fetch is answered, held, delivered;
	// b2's next fetch brings the records; then it syncs and fetches at 100,
	// which commits them, and the answer carrying hw=100 stays held.
	step(s.Tick(1))
	step(s.Deliver(1, 2, Pick{}, 0))
	step(s.Tick(1))
	step(s.Deliver(1, 2, Pick{}, 0))
	step(s.Tick(3))
	if !s.Answered() {
		t.Fatalf("not acknowledged:\n%s\n%s", strings.Join(out, "\n"), s.State())
	}
	step(s.ListOffsets(1))
	step(s.Crash(1, false))
	if _, ok := s.RunUntil(func() bool { return s.Leads(2) }, 200); !ok {
		t.Fatalf("b2 was not elected:\n%s", s.State())
	}
	step(s.ListOffsets(2))
	out = append(out, s.State())
	return s, strings.Join(out, "\n")
}

// A scripted run is a pure function of its script: the same output twice.
func TestScriptIsDeterministic(t *testing.T) {
	_, first := scriptFailover(t)
	_, second := scriptFailover(t)
	if first != second {
		t.Fatalf("two runs differ:\n%s\n----\n%s", first, second)
	}
	for _, want := range []string{"produce 1 answered by 1: acked offsets [0, 100)", "list-offsets answered by 1: latest offset 100", "delivered 1->2 fetch-response"} {
		if !strings.Contains(first, want) {
			t.Errorf("output lacks %q:\n%s", want, first)
		}
	}
}

// The controller elects the new leader after fencing the crashed one; with
// rule kafka-2334 the new leader withholds its lagging high watermark, and
// without it the checker sees a client's high watermark go back.
func TestScriptFailoverBothWays(t *testing.T) {
	s, out := scriptFailover(t)
	if v := s.Check(); v != nil {
		t.Fatalf("every rule on: %s\n%s", v, out)
	}
	if !strings.Contains(out, "list-offsets answered by 2: OFFSET_NOT_AVAILABLE") {
		t.Errorf("the new leader served a high watermark:\n%s", out)
	}
	if v := s.Recover(); v != nil {
		t.Fatalf("did not recover: %s\n%s", v, strings.Join(s.Output(), "\n"))
	}
	s, out = scriptFailover(t, rules.MonotonicHighWatermark)
	v := s.Check()
	if v == nil || v.Invariant != InvariantHighWatermarkBack || v.First != 100 || v.Last != 0 {
		t.Fatalf("rule off: got %v\n%s", v, out)
	}
}

func TestScriptRefusesBadInput(t *testing.T) {
	if _, err := NewScript(ScriptConfig{Brokers: 0}); err == nil {
		t.Error("a script with no brokers started")
	}
	s, err := NewScript(ScriptConfig{Brokers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"produce before the topic": s.Produce(1, 1, replica.AcksAll),
		"unknown broker":           s.CreateTopic("t", []metadata.BrokerID{1, 3}, 1),
		"deliver on a free link":   s.Deliver(1, 2, Pick{}, 0),
		"a link to itself":         s.Hold(1, 1),
		"restart a running broker": s.Restart(1),
		"too many ticks":           s.Tick(maxScriptTicks + 1),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The other verbs do what a seed needs of them: a consumer fetch, a pause
// long enough to be fenced, a controlled shutdown that moves leadership,
// a preferred election that moves it back, and held messages taken by
// kind, newest first.
func TestScriptVerbs(t *testing.T) {
	s, err := NewScript(ScriptConfig{Brokers: 3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, condition func() bool) {
		t.Helper()
		if _, ok := s.RunUntil(condition, 1000); !ok {
			t.Fatalf("%s did not happen:\n%s\n%s", what, strings.Join(s.Output(), "\n"), s.State())
		}
	}
	leader := func() metadata.BrokerID { state, _ := s.Partition(); return state.Leader }
	fenced := func(id metadata.BrokerID) bool { return s.BrokerViews(id)[0].Fenced }
	must(s.CreateTopic("t", []metadata.BrokerID{1, 2, 3}, 1))
	must(s.Produce(1, 5, replica.AcksAll))
	wait("the ack", s.Answered)
	wait("the high watermark on 2", func() bool { hw, _, _, _ := s.Offsets(2); return hw == 5 })
	s.Output()
	must(s.Fetch(1, 0))
	if out := strings.Join(s.Output(), "\n"); !strings.Contains(out, "fetch answered by 1: records=[0, 5) hw=5") {
		t.Errorf("consumer fetch: %s", out)
	}

	must(s.Pause(2))
	wait("broker 2 fenced while paused", func() bool { return fenced(2) })
	must(s.Resume(2))
	wait("broker 2 unfenced after resuming", func() bool { return !fenced(2) })

	must(s.Shutdown(1))
	wait("the controlled shutdown", func() bool { return !s.Running(1) && leader() != 1 && leader() != metadata.NoBroker })
	must(s.Restart(1))
	wait("broker 1 back in the ISR", func() bool { state, _ := s.Partition(); return len(state.ISR) == 3 })
	must(s.ElectPreferred())
	wait("the preferred leader", func() bool { return s.Leads(1) })

	must(s.Hold(ControllerEndpoint, 3))
	// A held answer is retried after controllerRequestTicks: two of them
	// wait by then.
	must(s.Tick(2*controllerRequestTicks + 5))
	must(s.Deliver(ControllerEndpoint, 3, Pick{Kind: "fetch"}, 0))
	if out := strings.Join(s.Output(), "\n"); !strings.Contains(out, "nothing held on controller->3") {
		t.Errorf("a kind with nothing held: %s", out)
	}
	must(s.Deliver(ControllerEndpoint, 3, Pick{Kind: "metadata", Newest: true, Count: 2}, 0))
	if out := strings.Join(s.Output(), "\n"); strings.Count(out, "delivered controller->3 metadata") != 2 {
		t.Errorf("two metadata answers: %s", out)
	}
	must(s.Release(ControllerEndpoint, 3))
	if v := s.Recover(); v != nil {
		t.Fatalf("did not recover: %s", v)
	}
}
