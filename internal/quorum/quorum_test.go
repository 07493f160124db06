package quorum

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

func createTopic(c *testCluster, name string, partitions, replicationFactor int) Answer {
	c.t.Helper()
	return c.request(c.active().id, Request{From: 1, CreateTopic: &controller.CreateTopicRequest{
		Name: name, Partitions: partitions, ReplicationFactor: replicationFactor}})
}

// Three nodes elect one active controller; brokers register through it and
// every node applies the same metadata in the same order.
func TestQuorumFormsAndReplicatesMetadata(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	active := c.active()
	for _, id := range c.voters {
		if node := c.nodes[id]; node != active && node.q.Active() {
			t.Fatalf("two active controllers: %d and %d", active.id, id)
		}
	}
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		c.register(id, "first")
	}
	if answer := createTopic(c, "events", 3, 3); answer.ErrorCode != 0 {
		t.Fatalf("create topic: %s", controller.CodeName(answer.ErrorCode))
	}
	c.tick(5)
	c.requireSameImages()
	if _, ok := c.nodes[2].q.Image().Topic("events"); !ok {
		t.Fatal("the topic did not reach node 2")
	}
}

// A node that is not the active controller refuses with NOT_CONTROLLER and
// names the leader.
func TestFollowerAnswersNotController(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	active := c.active()
	var follower metadata.BrokerID
	for _, id := range c.voters {
		if id != active.id {
			follower = id
		}
	}
	answer := c.request(follower, Request{From: 1, Register: &RegisterRequest{Incarnation: "x", PreviousEpoch: metadata.NoBrokerEpoch}})
	if answer.ErrorCode != kerr.NotController.Code || answer.Leader != active.id {
		t.Fatalf("follower answered %+v", answer)
	}
}

// The active controller dies: another becomes active within a few
// election timeouts, metadata written before is there and new metadata is
// accepted, and the dead node restarts from its storage and catches up.
func TestFailoverKeepsMetadata(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		c.register(id, "first")
	}
	createTopic(c, "before", 1, 3)
	old := c.active()
	c.crash(old.id)
	ticks := 0
	for ; ticks < 100; ticks++ {
		if next := activeAmong(c); next != nil {
			break
		}
		c.tick(1)
	}
	next := activeAmong(c)
	if next == nil {
		t.Fatal("no new active controller within 100 ticks")
	}
	t.Logf("node %d active %d ticks after node %d crashed", next.id, ticks, old.id)
	if _, ok := next.q.Image().Topic("before"); !ok {
		t.Fatal("the new controller lost a topic")
	}
	// The brokers heartbeat to the new controller and keep their sessions.
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		state, _ := next.q.Image().Broker(id)
		c.request(next.id, Request{From: id, Heartbeat: &HeartbeatRequest{Epoch: state.Epoch, AppliedOffset: next.q.Image().Offset()}})
	}
	if answer := createTopic(c, "after", 1, 2); answer.ErrorCode != 0 {
		t.Fatalf("create after failover: %s", controller.CodeName(answer.ErrorCode))
	}
	c.start(old, nil)
	c.tick(20)
	c.requireSameImages()
	if _, ok := old.q.Image().Topic("after"); !ok {
		t.Fatal("the restarted node did not catch up")
	}
}

func activeAmong(c *testCluster) *testNode {
	for _, id := range c.voters {
		if node := c.nodes[id]; node.up && node.q.Active() {
			return node
		}
	}
	return nil
}

// A controller cut off from the others cannot commit, so it never answers
// a request with a decision; once it notices (CheckQuorum) it stops
// deciding and fails what waited with NOT_CONTROLLER. The majority elects
// a new controller in a higher term, and the old one's proposal is gone.
func TestIsolatedControllerNeverAnswersWithADecision(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		c.register(id, "first")
	}
	old := c.active()
	for _, id := range c.voters {
		if id != old.id {
			c.cut[[2]metadata.BrokerID{old.id, id}], c.cut[[2]metadata.BrokerID{id, old.id}] = true, true
		}
	}
	if err := old.q.HandleRequest(Request{ID: 7, From: 1, CreateTopic: &controller.CreateTopicRequest{Name: "lost", Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	c.tick(60)
	var answered *Answer
	for _, answer := range c.answers {
		if answer.ID == 7 {
			answered = &answer
		}
	}
	if answered == nil || answered.ErrorCode != kerr.NotController.Code {
		t.Fatalf("the isolated controller answered %+v, want NOT_CONTROLLER", answered)
	}
	if old.q.Active() {
		t.Fatal("the isolated controller is still active")
	}
	next := activeAmong(c)
	if next == nil || next.q.Term() <= answered.ControllerEpoch-1 {
		t.Fatalf("no new controller in a higher term: %v", next)
	}
	c.cut = map[[2]metadata.BrokerID]bool{}
	c.tick(30)
	c.requireSameImages()
	if _, ok := old.q.Image().Topic("lost"); ok {
		t.Fatal("the isolated controller's proposal was committed")
	}
}

// A broker that stops heartbeating is fenced once its session expires, and
// its leaderships move.
func TestMissedHeartbeatsFenceABroker(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	epochs := map[metadata.BrokerID]metadata.BrokerEpoch{}
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		epochs[id] = c.register(id, "first")
	}
	createTopic(c, "events", 3, 3)
	active := c.active()
	for range 60 {
		for _, id := range []metadata.BrokerID{1, 2} {
			c.request(active.id, Request{From: id, Heartbeat: &HeartbeatRequest{Epoch: epochs[id], AppliedOffset: active.q.Image().Offset()}})
		}
		c.tick(1)
	}
	for _, id := range []metadata.BrokerID{1, 2} {
		if state, _ := active.q.Image().Broker(id); state.Fenced {
			t.Fatalf("broker %d heartbeated but was fenced", id)
		}
	}
	state, _ := active.q.Image().Broker(3)
	if !state.Fenced {
		t.Fatal("broker 3 missed its session but is not fenced")
	}
	for _, p := range active.q.Image().Partitions() {
		if p.Leader == 3 || p.InISR(3) {
			t.Fatalf("fenced broker 3 still in %s", p)
		}
	}
}

// With frequent snapshots the log is compacted, and a node that was down
// while it was catches up from a snapshot sent by the leader; a broker
// behind the compacted history gets a snapshot of the image too.
func TestSnapshotsCompactAndCatchUp(t *testing.T) {
	c := newTestCluster(t, 3, func(config *Config) { config.SnapshotEntries, config.MaxHistoryEntries = 5, 4 })
	active := c.active()
	var down metadata.BrokerID
	for _, id := range c.voters {
		if id != active.id {
			down = id
		}
	}
	c.crash(down)
	for _, id := range []metadata.BrokerID{1, 2, 3} {
		c.register(id, "first")
	}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		if answer := createTopic(c, name, 1, 2); answer.ErrorCode != 0 {
			t.Fatalf("create %s: %s", name, controller.CodeName(answer.ErrorCode))
		}
	}
	if first, _ := active.storage.FirstIndex(); first < 5 {
		t.Fatalf("the log was not compacted: first index %d", first)
	}
	c.start(c.nodes[down], func(config *Config) { config.SnapshotEntries, config.MaxHistoryEntries = 5, 4 })
	c.tick(30)
	c.requireSameImages()
	if snapshot, _ := c.nodes[down].storage.Snapshot(); snapshot.GetMetadata().GetIndex() < 5 {
		t.Fatalf("node %d caught up without installing a snapshot", down)
	}
	state, _ := active.q.Image().Broker(1)
	answer := c.request(active.id, Request{From: 1, Heartbeat: &HeartbeatRequest{Epoch: state.Epoch, AppliedOffset: -1}})
	if answer.Heartbeat.Snapshot == nil {
		t.Fatal("a broker behind the history got no snapshot")
	}
	img, err := metadata.DecodeImage(answer.Heartbeat.Snapshot)
	if err != nil || !img.Equal(active.q.Image()) {
		t.Fatalf("the snapshot is not the image: %v", err)
	}
}

// The same seed gives the same elections: raft's jitter comes from the
// seeded source.
func TestSameSeedSameElection(t *testing.T) {
	run := func() (metadata.BrokerID, uint64, uint64) {
		c := newTestCluster(t, 3, nil)
		active := c.active()
		return active.id, active.q.Term(), active.q.AppliedIndex()
	}
	id1, term1, index1 := run()
	id2, term2, index2 := run()
	if id1 != id2 || term1 != term2 || index1 != index2 {
		t.Fatalf("two runs elected differently: %d/%d/%d and %d/%d/%d", id1, term1, index1, id2, term2, index2)
	}
}

func TestConfigValidate(t *testing.T) {
	good := testConfig(1, []metadata.BrokerID{1, 2, 3}, nil)
	for name, change := range map[string]func(*Config){
		"not a voter":   func(c *Config) { c.ID = 4 },
		"id 0":          func(c *Config) { c.Voters = []metadata.BrokerID{0, 1} },
		"twice":         func(c *Config) { c.Voters = []metadata.BrokerID{1, 1} },
		"no storage":    func(c *Config) {},
		"election":      func(c *Config) { c.ElectionTicks = c.HeartbeatTicks },
		"zero sessions": func(c *Config) { c.SessionTimeoutTicks = 0 },
		"rebalance":     func(c *Config) { c.LeaderRebalanceTicks = -1 },
		"imbalance":     func(c *Config) { c.LeaderImbalancePercentage = 101 },
	} {
		config := good
		change(&config)
		if err := config.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
