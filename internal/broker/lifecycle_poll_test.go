package broker

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// newPollWorld is newLifecycleWorld with heartbeats far apart (200 ticks)
// and, when waitTicks > 0, metadata by long poll held up to waitTicks.
func newPollWorld(t *testing.T, waitTicks int64) *lifecycleWorld {
	storage := raft.NewMemoryStorage()
	q, err := quorum.New(quorum.Config{ID: 1, Voters: []metadata.BrokerID{1}, Storage: storage, ElectionTicks: 10, HeartbeatTicks: 1,
		Random: rand.NewChaCha8([32]byte{'p'}), SessionTimeoutTicks: 5000, SnapshotEntries: 1000, MaxHistoryEntries: 1000,
		MaxWaitingAnswers: 100, MaxEntryBytes: 1 << 20, MaxMetadataWaitTicks: 40})
	if err != nil {
		t.Fatal(err)
	}
	lifecycle, err := NewLifecycle(LifecycleConfig{ID: 1, Incarnation: "b1-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 200, RequestTimeoutTicks: 400, MaxEntries: 100, MetadataWaitTicks: waitTicks,
		NewNode: func(epoch metadata.BrokerEpoch) *Node {
			return New(Config{ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
				ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100}, epoch)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return &lifecycleWorld{t: t, quorum: q, storage: storage, lifecycle: lifecycle}
}

// ticksToLearnTopic creates a topic at the controller once the broker is
// unfenced and idle, and counts the steps until the broker hosts it.
func ticksToLearnTopic(t *testing.T, w *lifecycleWorld) int {
	for range 600 {
		if state, ok := w.quorum.Image().Broker(1); ok && !state.Fenced && w.lifecycle.Node() != nil &&
			w.lifecycle.Node().MetadataOffset() == w.quorum.Image().Offset() {
			break
		}
		w.step()
	}
	for range 10 {
		w.step() // the heartbeat that unfenced it is answered: the next is a whole interval away
	}
	if err := w.quorum.HandleRequest(quorum.Request{ID: 99, From: 1,
		CreateTopic: &controller.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	for ticks := range 600 {
		if len(w.lifecycle.Node().Partitions()) == 1 {
			return ticks
		}
		w.step()
	}
	t.Fatal("the broker never learnt of the topic")
	return 0
}

// Rules poll-waits-for-newer and poll-again-at-once: with long poll the
// broker learns a committed topic within a few steps (the commit and one
// round trip), where heartbeats alone leave it until the next heartbeat.
func TestLifecycleLongPollLearnsAtOnce(t *testing.T) {
	polled := ticksToLearnTopic(t, newPollWorld(t, 30))
	heartbeats := ticksToLearnTopic(t, newPollWorld(t, 0))
	if polled > 3 {
		t.Errorf("long poll: %d steps from the create to the broker hosting the topic, want <= 3", polled)
	}
	if heartbeats < 50 {
		t.Errorf("heartbeats alone: %d steps, want most of the 200-tick interval (the test would not show the difference)", heartbeats)
	}
}

// The controller holds one fetch per broker and answers it empty when its
// wait is up; the broker then polls again, so exactly one stays held.
func TestLifecycleLongPollHeldAndRenewed(t *testing.T) {
	w := newPollWorld(t, 30)
	w.stepUntil("registered and caught up", func() bool {
		node := w.lifecycle.Node()
		return node != nil && node.MetadataOffset() == w.quorum.Image().Offset() && w.quorum.HeldPolls() == 1
	})
	for step := range 200 {
		w.step()
		// An answered fetch's successor is already in the outbox: this
		// harness carries requests across at the next step.
		held := w.quorum.HeldPolls()
		if held > 1 || held == 0 && (w.lifecycle.poll == nil || len(w.lifecycle.outgoing) == 0) {
			t.Fatalf("step %d: %d fetches held, and the next not sent", step, held)
		}
	}
	if w.lifecycle.poll == nil {
		t.Fatal("the broker has no fetch out")
	}
}

// A fetch from an incarnation the controller does not know is not held.
func TestQuorumRefusesPollOfUnknownIncarnation(t *testing.T) {
	w := newPollWorld(t, 30)
	w.stepUntil("registered", func() bool { return w.lifecycle.Node() != nil })
	if err := w.quorum.HandleRequest(quorum.Request{ID: 7, From: 9,
		FetchMetadata: &quorum.FetchMetadataRequest{Epoch: 3, MaxWaitTicks: 30}}); err != nil {
		t.Fatal(err)
	}
	rd := w.quorum.Ready()
	found := false
	for _, answer := range rd.Answers {
		if answer.ID == 7 {
			found = true
			if answer.ErrorCode == 0 {
				t.Errorf("fetch of an unknown broker answered %+v", answer)
			}
		}
	}
	if err := rd.Persist(w.storage); err != nil {
		t.Fatal(err)
	}
	if err := w.quorum.Advance(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("the fetch of an unknown broker was held")
	}
}
