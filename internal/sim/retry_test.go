package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// The story an idempotent producer exists for, told as a script: the batch
// commits, its response is lost on the client's link, the leader fails, and
// the client retries the same batch (same producer id and sequence) to the
// new leader. The new leader answers with the original offset, and the
// checker finds exactly one copy of the batch, at its first offset.
func TestIdempotentRetryAfterALostResponse(t *testing.T) {
	s, err := NewScript(ScriptConfig{Brokers: 3, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Output()...)
	}
	must(s.CreateTopic("t", []metadata.BrokerID{1, 2, 3}, 2))
	must(s.ProduceIdempotent(1, 10, replica.AcksAll))
	must(s.Hold(1, ProducerEndpoint(1)))
	if _, ok := s.RunUntil(func() bool { hw, _, _, _ := s.Offsets(1); return hw == 10 }, 200); !ok {
		t.Fatalf("the batch did not commit:\n%s", s.State())
	}
	must(s.Tick(2))
	must(s.Drop(1, ProducerEndpoint(1), Pick{Count: 5}))
	must(s.Release(1, ProducerEndpoint(1)))
	if s.Answered() {
		t.Fatalf("the producer saw its answer, which the script dropped:\n%s", strings.Join(out, "\n"))
	}
	must(s.Crash(1, false))
	if _, ok := s.RunUntil(func() bool { return s.Leads(2) || s.Leads(3) }, 300); !ok {
		t.Fatalf("no new leader:\n%s", s.State())
	}
	leader := metadata.BrokerID(2)
	if s.Leads(3) {
		leader = 3
	}
	must(s.Retry(1, leader))
	if _, ok := s.RunUntil(s.Answered, 100); !ok {
		t.Fatalf("the retry was not answered:\n%s\n%s", strings.Join(out, "\n"), s.State())
	}
	must(nil)
	text := strings.Join(out, "\n")
	if !strings.Contains(text, "produce 1 answered by") || !strings.Contains(text, "acked offsets [0, 10)") {
		t.Fatalf("the retry was not answered with the original offset:\n%s", text)
	}
	if _, end, _, _ := s.Offsets(leader); end != 10 {
		t.Fatalf("the new leader's log ends at %d after the retry: the batch was written twice", end)
	}
	must(s.Restart(1))
	if violation := s.Recover(); violation != nil {
		t.Fatalf("%s\n%s", violation, s.State())
	}
}
