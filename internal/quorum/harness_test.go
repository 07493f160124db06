package quorum

import (
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidelog/tide/internal/metadata"
)

// testCluster runs controller nodes in one goroutine over raft's
// MemoryStorage, which plays the durable disk: a node writes it only as a
// Ready says, and a crash loses the node's memory but keeps its storage.
// Messages travel only when the test delivers them.
type testCluster struct {
	t        *testing.T
	voters   []metadata.BrokerID
	nodes    map[metadata.BrokerID]*testNode
	inFlight []*raftpb.Message
	// cut links lose their messages.
	cut     map[[2]metadata.BrokerID]bool
	answers []Answer
}

type testNode struct {
	id      metadata.BrokerID
	q       *Quorum
	storage *raft.MemoryStorage
	up      bool
}

// seedRaft points raft's election jitter at a seeded source for the test,
// so that runs repeat (DESIGN.md section 1).
func seedRaft(t *testing.T, seed uint64) {
	previous := rand.Reader
	rand.Reader = seededReader{mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})}
	t.Cleanup(func() { rand.Reader = previous })
}

type seededReader struct{ source *mrand.ChaCha8 }

func (s seededReader) Read(b []byte) (int, error) { return s.source.Read(b) }

var _ io.Reader = seededReader{}

func testConfig(id metadata.BrokerID, voters []metadata.BrokerID, storage raft.Storage) Config {
	return Config{ID: id, Voters: voters, Storage: storage, ElectionTicks: 10, HeartbeatTicks: 1, Random: mrand.NewChaCha8([32]byte{byte(id)}),
		SessionTimeoutTicks: 50, SnapshotEntries: 1000, MaxHistoryEntries: 1000, MaxWaitingAnswers: 100, MaxEntryBytes: 1 << 20}
}

func newTestCluster(t *testing.T, size int, configure func(*Config)) *testCluster {
	seedRaft(t, 1)
	c := &testCluster{t: t, nodes: map[metadata.BrokerID]*testNode{}, cut: map[[2]metadata.BrokerID]bool{}}
	for id := metadata.BrokerID(1); int(id) <= size; id++ {
		c.voters = append(c.voters, id)
	}
	for _, id := range c.voters {
		n := &testNode{id: id, storage: raft.NewMemoryStorage()}
		c.nodes[id] = n
		c.start(n, configure)
	}
	return c
}

func (c *testCluster) start(n *testNode, configure func(*Config)) {
	config := testConfig(n.id, c.voters, n.storage)
	if configure != nil {
		configure(&config)
	}
	q, err := New(config)
	if err != nil {
		c.t.Fatalf("node %d: %v", n.id, err)
	}
	n.q, n.up = q, true
	c.process(n)
}

// crash loses the node's memory and what is in flight to it.
func (c *testCluster) crash(id metadata.BrokerID) {
	c.nodes[id].up, c.nodes[id].q = false, nil
}

// process carries out a node's Readys as a driver must.
func (c *testCluster) process(n *testNode) {
	for n.up && n.q.HasReady() {
		rd := n.q.Ready()
		if err := rd.Persist(n.storage); err != nil {
			c.t.Fatalf("node %d: %v", n.id, err)
		}
		c.inFlight = append(c.inFlight, rd.Messages...)
		c.answers = append(c.answers, rd.Answers...)
		if err := rd.StoreSnapshot(n.storage); err != nil {
			c.t.Fatalf("node %d: %v", n.id, err)
		}
		if err := n.q.Advance(); err != nil {
			c.t.Fatalf("node %d: %v", n.id, err)
		}
	}
}

// deliver hands every message in flight to its node, until none is left.
func (c *testCluster) deliver() {
	for round := 0; len(c.inFlight) > 0; round++ {
		if round > 1000 {
			c.t.Fatal("messages never stop")
		}
		batch := c.inFlight
		c.inFlight = nil
		for _, m := range batch {
			to := c.nodes[metadata.BrokerID(m.GetTo())]
			if to == nil || !to.up || c.cut[[2]metadata.BrokerID{metadata.BrokerID(m.GetFrom()), to.id}] {
				continue
			}
			if err := to.q.Step(m); err != nil {
				c.t.Fatalf("node %d: %v", to.id, err)
			}
			c.process(to)
		}
	}
}

// tick advances every running node by n ticks, delivering after each.
func (c *testCluster) tick(n int) {
	for range n {
		for _, id := range c.voters {
			if node := c.nodes[id]; node.up {
				node.q.Tick()
				c.process(node)
			}
		}
		c.deliver()
	}
}

// active returns the active controller, ticking until there is one.
func (c *testCluster) active() *testNode {
	for range 200 {
		for _, id := range c.voters {
			if node := c.nodes[id]; node.up && node.q.Active() {
				return node
			}
		}
		c.tick(1)
	}
	c.t.Fatal("no active controller after 200 ticks")
	return nil
}

// request sends a request to a node and ticks until its answer comes.
func (c *testCluster) request(to metadata.BrokerID, request Request) Answer {
	c.t.Helper()
	request.ID = uint64(len(c.answers)) + 1000
	node := c.nodes[to]
	if err := node.q.HandleRequest(request); err != nil {
		c.t.Fatal(err)
	}
	for range 100 {
		c.process(node)
		c.deliver()
		for i, answer := range c.answers {
			if answer.ID == request.ID && answer.To == request.From {
				c.answers = append(c.answers[:i], c.answers[i+1:]...)
				return answer
			}
		}
		c.tick(1)
	}
	c.t.Fatalf("no answer to %s", request)
	return Answer{}
}

// register registers a broker with the active controller and heartbeats it
// until unfenced; it returns its epoch.
func (c *testCluster) register(id metadata.BrokerID, incarnation string) metadata.BrokerEpoch {
	c.t.Helper()
	active := c.active()
	answer := c.request(active.id, Request{From: id, Register: &RegisterRequest{Incarnation: incarnation, PreviousEpoch: metadata.NoBrokerEpoch}})
	if answer.ErrorCode != 0 {
		c.t.Fatalf("registering b%d: code %d", id, answer.ErrorCode)
	}
	epoch := answer.Register.Epoch
	for range 5 {
		beat := c.request(active.id, Request{From: id, Heartbeat: &HeartbeatRequest{Epoch: epoch, AppliedOffset: active.q.Image().Offset()}})
		if beat.ErrorCode == 0 && !beat.Heartbeat.Fenced {
			return epoch
		}
	}
	c.t.Fatalf("b%d never unfenced", id)
	return 0
}

// requireSameImages checks every running node applied the same image.
func (c *testCluster) requireSameImages() {
	c.t.Helper()
	var first *testNode
	for _, id := range c.voters {
		node := c.nodes[id]
		if !node.up {
			continue
		}
		if first == nil {
			first = node
			continue
		}
		if !node.q.Image().Equal(first.q.Image()) {
			c.t.Fatalf("node %d and node %d disagree:\n%s\n%s", first.id, node.id,
				first.q.Image().Describe(), node.q.Image().Describe())
		}
	}
}

func (n *testNode) String() string { return fmt.Sprintf("node %d", n.id) }
