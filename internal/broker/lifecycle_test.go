package broker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// lifecycleWorld is one broker and a one-voter quorum, driven in lockstep:
// the smallest cluster, in combined mode.
type lifecycleWorld struct {
	t         *testing.T
	quorum    *quorum.Quorum
	storage   *raft.MemoryStorage
	lifecycle *Lifecycle
}

func newLifecycleWorld(t *testing.T) *lifecycleWorld {
	storage := raft.NewMemoryStorage()
	q, err := quorum.New(quorum.Config{ID: 1, Voters: []metadata.BrokerID{1}, Storage: storage, ElectionTicks: 10, HeartbeatTicks: 1,
		Random:              rand.NewChaCha8([32]byte{'t'}),
		SessionTimeoutTicks: 50, SnapshotEntries: 1000, MaxHistoryEntries: 1000, MaxWaitingAnswers: 100, MaxEntryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	lifecycle, err := NewLifecycle(LifecycleConfig{ID: 1, Incarnation: "b1-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 2, RequestTimeoutTicks: 20, MaxEntries: 100,
		NewNode: func(epoch metadata.BrokerEpoch) *Node {
			return New(Config{ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
				ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100}, epoch)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return &lifecycleWorld{t: t, quorum: q, storage: storage, lifecycle: lifecycle}
}

// step ticks both and carries every request and answer across.
func (w *lifecycleWorld) step() {
	w.quorum.Tick()
	w.lifecycle.Tick()
	for _, out := range w.lifecycle.TakeRequests() {
		if err := w.quorum.HandleRequest(out.Request); err != nil {
			w.t.Fatal(err)
		}
	}
	for w.quorum.HasReady() {
		rd := w.quorum.Ready()
		if err := rd.Persist(w.storage); err != nil {
			w.t.Fatal(err)
		}
		for _, answer := range rd.Answers {
			if err := w.lifecycle.HandleAnswer(answer); err != nil {
				w.t.Fatal(err)
			}
		}
		if err := w.quorum.Advance(); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *lifecycleWorld) stepUntil(what string, condition func() bool) {
	for range 300 {
		if condition() {
			return
		}
		w.step()
	}
	w.t.Fatalf("never: %s", what)
}

// A broker registers, is unfenced once it has applied its registration,
// learns its topic through its heartbeats and hosts it; a controlled
// shutdown then completes with the broker fenced.
func TestLifecycleRegistersLearnsAndShutsDown(t *testing.T) {
	w := newLifecycleWorld(t)
	w.stepUntil("unfenced", func() bool {
		state, ok := w.quorum.Image().Broker(1)
		return w.lifecycle.Node() != nil && ok && !state.Fenced
	})
	if err := w.quorum.HandleRequest(quorum.Request{ID: 99, From: 1, CreateTopic: &controller.CreateTopicRequest{Name: "orders", Partitions: 2, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	w.stepUntil("hosting orders", func() bool { return len(w.lifecycle.Node().Partitions()) == 2 })
	if w.lifecycle.Node().MetadataOffset() != w.quorum.Image().Offset() {
		t.Fatalf("broker at metadata offset %d, controller at %d", w.lifecycle.Node().MetadataOffset(), w.quorum.Image().Offset())
	}
	w.lifecycle.BeginShutdown()
	w.stepUntil("shut down", w.lifecycle.ShutDown)
	if state, _ := w.quorum.Image().Broker(1); !state.Fenced {
		t.Fatal("shut down but not fenced")
	}
}

// NOT_CONTROLLER moves the broker to the controller it names; an answer
// from an older controller epoch than one seen is ignored.
func TestLifecycleFollowsTheActiveController(t *testing.T) {
	l, err := NewLifecycle(LifecycleConfig{ID: 4, Incarnation: "b4-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch, Voters: []metadata.BrokerID{1, 2, 3},
		HeartbeatTicks: 2, RequestTimeoutTicks: 5, MaxEntries: 10, NewNode: func(metadata.BrokerEpoch) *Node { return newTestNode(t, 4) }})
	if err != nil {
		t.Fatal(err)
	}
	l.Tick()
	sent := l.TakeRequests()
	if len(sent) != 1 || sent[0].To != 1 || sent[0].Request.Register == nil {
		t.Fatalf("first request %+v", sent)
	}
	l.HandleAnswer(quorum.Answer{ID: sent[0].Request.ID, ControllerEpoch: 3, Leader: 2, ErrorCode: kerr.NotController.Code})
	l.Tick()
	sent = l.TakeRequests()
	if len(sent) != 1 || sent[0].To != 2 {
		t.Fatalf("after the hint, %+v", sent)
	}
	l.HandleAnswer(quorum.Answer{ID: sent[0].Request.ID, ControllerEpoch: 2, Register: &quorum.RegisterAnswer{Epoch: 9}})
	if l.Node() != nil {
		t.Fatal("a stale controller's answer was taken")
	}
	for range 5 {
		l.Tick()
	}
	if sent = l.TakeRequests(); len(sent) != 1 || sent[0].To != 3 {
		t.Fatalf("an unanswered request should move on to the next voter: %+v", sent)
	}
}

// FetchMetadataSoon makes the next tick heartbeat (and so fetch metadata)
// without waiting out the interval, but never with one already in flight.
func TestLifecycleFetchMetadataSoon(t *testing.T) {
	lifecycle, err := NewLifecycle(LifecycleConfig{ID: 1, Incarnation: "b1-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 100, RequestTimeoutTicks: 1000, MaxEntries: 100,
		NewNode: func(epoch metadata.BrokerEpoch) *Node {
			return New(Config{ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
				ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100}, epoch)
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The node asks for producer ids at its first tick: not what this
	// test counts.
	takeRequests := func() []Outgoing {
		return slices.DeleteFunc(lifecycle.TakeRequests(), func(r Outgoing) bool { return r.Request.AllocateProducerIDs != nil })
	}
	answerOne := func(kind string, answer quorum.Answer) {
		t.Helper()
		requests := takeRequests()
		if len(requests) != 1 {
			t.Fatalf("%s: %d requests, want 1", kind, len(requests))
		}
		answer.ID, answer.To = requests[0].Request.ID, 1
		if err := lifecycle.HandleAnswer(answer); err != nil {
			t.Fatal(err)
		}
	}
	lifecycle.Tick()
	answerOne("register", quorum.Answer{Register: &quorum.RegisterAnswer{Epoch: 3}})
	lifecycle.Tick()
	answerOne("first heartbeat", quorum.Answer{Heartbeat: &quorum.HeartbeatAnswer{}})
	lifecycle.Tick()
	if requests := takeRequests(); len(requests) != 0 {
		t.Fatalf("a heartbeat before the interval: %v", requests)
	}
	lifecycle.FetchMetadataSoon()
	lifecycle.Tick()
	if requests := takeRequests(); len(requests) != 1 || requests[0].Request.Heartbeat == nil {
		t.Fatalf("after FetchMetadataSoon: %v, want a heartbeat", requests)
	}
	lifecycle.FetchMetadataSoon() // with that heartbeat still in flight
	lifecycle.Tick()
	if requests := takeRequests(); len(requests) != 0 {
		t.Fatalf("a second heartbeat with one in flight: %v", requests)
	}
}

// An answer to the registration of the incarnation that crashed, reaching
// its successor (the controller answers a broker id), is not the
// successor's: it would hand it the old incarnation's epoch.
func TestLifecycleIgnoresAnswersToAnEarlierIncarnation(t *testing.T) {
	config := LifecycleConfig{ID: 4, Incarnation: "b4-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch, Voters: []metadata.BrokerID{1},
		HeartbeatTicks: 2, RequestTimeoutTicks: 50, MaxEntries: 10, NewNode: func(metadata.BrokerEpoch) *Node { return newTestNode(t, 4) },
		FirstRequestID: 1 << 40}
	first, err := NewLifecycle(config)
	if err != nil {
		t.Fatal(err)
	}
	first.Tick()
	old := first.TakeRequests()[0].Request
	config.Incarnation, config.FirstRequestID = "b4-2", 2<<40
	second, err := NewLifecycle(config)
	if err != nil {
		t.Fatal(err)
	}
	second.Tick()
	current := second.TakeRequests()[0].Request
	if current.ID == old.ID {
		t.Fatalf("two incarnations sent request id %d", old.ID)
	}
	second.HandleAnswer(quorum.Answer{ID: old.ID, To: 4, ControllerEpoch: 1, Leader: 1, Register: &quorum.RegisterAnswer{Epoch: 19}})
	if second.Node() != nil {
		t.Fatal("the successor took the crashed incarnation's epoch")
	}
	second.HandleAnswer(quorum.Answer{ID: current.ID, To: 4, ControllerEpoch: 1, Leader: 1, Register: &quorum.RegisterAnswer{Epoch: 20}})
	if second.Epoch() != 20 {
		t.Fatalf("epoch %d, want its own, 20", second.Epoch())
	}
}

// A broker catching up on a metadata log longer than one answer carries
// is marked caught up (and so may set aside directories of other topic
// ids, MarkCaughtUp) only once an answer carries less than it could: after
// it has applied every topic the log held.
func TestLifecycleMarksCaughtUpAtTheEndOfTheLog(t *testing.T) {
	w := newLifecycleWorld(t)
	w.stepUntil("unfenced", func() bool {
		state, ok := w.quorum.Image().Broker(1)
		return w.lifecycle.Node() != nil && ok && !state.Fenced
	})
	for i := range 6 {
		request := quorum.Request{ID: uint64(100 + i), From: 1, CreateTopic: &controller.CreateTopicRequest{
			Name: fmt.Sprintf("t%d", i), Partitions: 1, ReplicationFactor: 1}}
		if err := w.quorum.HandleRequest(request); err != nil {
			t.Fatal(err)
		}
	}
	w.stepUntil("the topics committed", func() bool { return len(w.quorum.Image().Topics()) == 6 })
	end := w.quorum.Image().Offset()

	var err error
	w.lifecycle, err = NewLifecycle(LifecycleConfig{ID: 1, Incarnation: "b1-2", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 2, RequestTimeoutTicks: 20, MaxEntries: 2, FirstRequestID: 1 << 20,
		NewNode: func(epoch metadata.BrokerEpoch) *Node {
			return New(Config{ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
				ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100}, epoch)
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.stepUntil("caught up", func() bool {
		node := w.lifecycle.Node()
		if node != nil && node.caughtUp && node.MetadataOffset() < end {
			t.Fatalf("caught up at metadata offset %d, the log ends at %d", node.MetadataOffset(), end)
		}
		return node != nil && node.caughtUp
	})
}
