package quorum

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
)

// answerTo finds and removes the answer with an id, or returns nil.
func (c *testCluster) answerTo(id uint64) *Answer {
	for i, answer := range c.answers {
		if answer.ID == id {
			c.answers = append(c.answers[:i], c.answers[i+1:]...)
			return &answer
		}
	}
	return nil
}

// poll hands the active controller a metadata fetch from broker 1 at the
// committed offset.
func (c *testCluster) poll(active *testNode, id uint64, epoch metadata.BrokerEpoch) {
	c.t.Helper()
	if err := active.q.HandleRequest(Request{ID: id, From: 1, FetchMetadata: &FetchMetadataRequest{Epoch: epoch,
		AppliedOffset: active.q.Image().Offset(), MaxEntries: 100, MaxWaitTicks: 1000}}); err != nil {
		c.t.Fatal(err)
	}
	c.process(active)
}

// Rules poll-waits-for-newer, one-poll-per-broker and held-polls-fail-over
// on a three-node quorum: a fetch at the committed offset is held, answered
// with the record the moment it commits, answered empty when its wait (cut
// to MaxMetadataWaitTicks) is up, answered at once when the same broker
// sends a newer one, and answered NOT_CONTROLLER when its controller loses
// its leadership.
func TestMetadataPollIsHeldUntilNewerOrWaitUp(t *testing.T) {
	c := newTestCluster(t, 3, func(config *Config) { config.MaxMetadataWaitTicks = 30 })
	epoch := c.register(1, "first")
	active := c.active()

	c.poll(active, 1, epoch)
	if c.answerTo(1) != nil || active.q.HeldPolls() != 1 {
		t.Fatal("a fetch with nothing newer was answered at once")
	}
	createTopic(c, "orders", 1, 1)
	answer := c.answerTo(1)
	if answer == nil || answer.ErrorCode != 0 || len(answer.Heartbeat.Entries) == 0 {
		t.Fatalf("the held fetch after a commit: %+v", answer)
	}
	if _, ok := answer.Heartbeat.Entries[len(answer.Heartbeat.Entries)-1].Record.(metadata.CreateTopic); !ok {
		t.Fatalf("the fetch's last entry is %v, want the CreateTopic", answer.Heartbeat.Entries[len(answer.Heartbeat.Entries)-1])
	}

	c.poll(active, 2, epoch)
	c.tick(29)
	if c.answerTo(2) != nil {
		t.Fatal("answered before its wait was up")
	}
	c.tick(1)
	if answer := c.answerTo(2); answer == nil || answer.ErrorCode != 0 || len(answer.Heartbeat.Entries) != 0 {
		t.Fatalf("after the wait: %+v, want an empty answer", answer)
	}

	c.poll(active, 3, epoch)
	c.poll(active, 4, epoch)
	if answer := c.answerTo(3); answer == nil || answer.ErrorCode != 0 || active.q.HeldPolls() != 1 {
		t.Fatalf("a newer fetch of the same broker: the older answered %+v, %d held", answer, active.q.HeldPolls())
	}

	for _, id := range c.voters {
		if id != active.id {
			c.cut[[2]metadata.BrokerID{active.id, id}], c.cut[[2]metadata.BrokerID{id, active.id}] = true, true
		}
	}
	c.tick(25) // CheckQuorum: the leader cut off steps down within an election timeout
	if answer := c.answerTo(4); answer == nil || answer.ErrorCode != kerr.NotController.Code || active.q.HeldPolls() != 0 {
		t.Fatalf("the isolated controller's held fetch: %+v, want NOT_CONTROLLER", answer)
	}
}
