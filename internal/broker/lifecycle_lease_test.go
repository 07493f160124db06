package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// Rule coordinator-lease, the broker's half: the session lease runs from
// when the last heartbeat the controller acknowledged unfenced was SENT
// (the controller counts the session from receipt, which is later), for
// SessionLeaseMs on the monotonic clock. An answer that refuses the
// heartbeat, or says the broker is fenced, renews nothing.
func TestSessionLeaseRunsFromTheAcknowledgedHeartbeatsSending(t *testing.T) {
	const leaseMs = 500
	l, err := NewLifecycle(LifecycleConfig{ID: 1, Incarnation: "b1-1", SessionLeaseMs: leaseMs, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 1, RequestTimeoutTicks: 1000, MaxEntries: 100,
		NewNode: func(metadata.BrokerEpoch) *Node { return newTestNode(t, 1) }})
	if err != nil {
		t.Fatal(err)
	}
	nowMs := int64(0)
	// heartbeat ticks once at nowMs and returns the heartbeat sent.
	heartbeat := func() quorum.Request {
		t.Helper()
		l.SetMonotonicClock(nowMs)
		l.Tick()
		for _, out := range l.TakeRequests() {
			if out.Request.Heartbeat != nil {
				return out.Request
			}
		}
		t.Fatal("no heartbeat sent")
		return quorum.Request{}
	}
	l.SetMonotonicClock(nowMs)
	l.Tick()
	register := l.TakeRequests()[0].Request
	if err := l.HandleAnswer(quorum.Answer{ID: register.ID, ControllerEpoch: 1, Register: &quorum.RegisterAnswer{Epoch: 5}}); err != nil {
		t.Fatal(err)
	}
	answer := func(request quorum.Request, code int16, fenced bool) {
		t.Helper()
		l.SetMonotonicClock(nowMs)
		if err := l.HandleAnswer(quorum.Answer{ID: request.ID, ControllerEpoch: 1, ErrorCode: code,
			Heartbeat: &quorum.HeartbeatAnswer{Fenced: fenced}}); err != nil {
			t.Fatal(err)
		}
	}
	nowMs = 100
	first := heartbeat()
	nowMs = 150
	answer(first, 0, true) // still fenced: no lease
	if l.HoldsSessionLease() {
		t.Fatal("a lease from an answer that says fenced")
	}
	nowMs = 200
	second := heartbeat()
	nowMs = 400
	answer(second, 0, false)
	if !l.HoldsSessionLease() {
		t.Fatal("no lease after an acknowledged heartbeat")
	}
	nowMs = 500
	third := heartbeat()
	nowMs = 600
	answer(third, kerr.RequestTimedOut.Code, false) // refused: renews nothing
	l.SetMonotonicClock(200 + leaseMs - 1)
	if !l.HoldsSessionLease() {
		t.Fatal("the lease ended before SessionLeaseMs after the acknowledged heartbeat was sent")
	}
	l.SetMonotonicClock(200 + leaseMs)
	if l.HoldsSessionLease() {
		t.Fatal("the lease outlived SessionLeaseMs from the sending of the acknowledged heartbeat (a refused one renewed it, or it ran from the answer)")
	}
}

// SessionLease leaves a tenth of the session, and at least two ticks, for
// the clocks' drift.
func TestSessionLeaseKeepsAMargin(t *testing.T) {
	for _, c := range []struct{ sessionMs, tickMs, want int64 }{{9000, 10, 8100}, {600, 10, 540}, {100, 10, 80}} {
		if got := SessionLease(c.sessionMs, c.tickMs); got != c.want {
			t.Errorf("SessionLease(%d, %d) = %d, want %d", c.sessionMs, c.tickMs, got, c.want)
		}
	}
}
