package sim

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// A blackholed leader (its packets dropped, its connections left open) is
// replaced: the controller fences it after the session timeout and elects
// another ISR member, and a producer with nothing in flight to the
// blackholed broker gets acks=all writes committed on the new leader
// within the session timeout plus one election. After the heal the old
// leader rejoins and nothing acknowledged is lost.
func TestBlackholedLeaderIsReplaced(t *testing.T) {
	s, err := NewScript(ScriptConfig{Brokers: 3, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateTopic("t", []metadata.BrokerID{1, 2, 3}, 2))
	must(s.Produce(1, 10, replica.AcksAll))
	if _, ok := s.RunUntil(s.Answered, 200); !ok {
		t.Fatalf("the first write was not acknowledged:\n%s", s.State())
	}
	must(s.Blackhole(1))
	// The bound: the session timeout, then an election's worth of
	// metadata propagation (a heartbeat) and a fetch round trip.
	const boundTicks = sessionTimeoutTicks + 4*heartbeatTicks + replicaFetchMaxWaitTicks + 20
	elected, ok := s.RunUntil(func() bool { return s.Leads(2) || s.Leads(3) }, boundTicks)
	if !ok {
		t.Fatalf("no new leader within %d ticks of the blackhole:\n%s", boundTicks, s.State())
	}
	leader := metadata.BrokerID(2)
	if s.Leads(3) {
		leader = 3
	}
	must(s.Produce(leader, 5, replica.AcksAll))
	acked, ok := s.RunUntil(s.Answered, boundTicks-elected)
	out := strings.Join(s.Output(), "\n")
	if !ok || !strings.Contains(out, "produce 2 answered by") || !strings.Contains(out, "acked offsets [10, 15)") {
		t.Fatalf("the write to the new leader b%d was not committed within %d ticks of the blackhole (elected after %d):\n%s\n%s",
			leader, boundTicks, elected, out, s.State())
	}
	t.Logf("b%d elected %d ticks after the blackhole; the write committed %d ticks later", leader, elected, acked)
	must(s.Unblackhole(1))
	if violation := s.Recover(); violation != nil {
		t.Fatalf("after the heal: %s\n%s", violation, s.State())
	}
}
