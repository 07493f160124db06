package quorum

import (
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

var quorumSeeds = flag.Int("quorum-seeds", 300, "how many seeds TestRandomFaults runs")

// TestRandomFaults drives 3- and 5-node quorums through random crashes,
// restarts, partitions and requests, and checks: no two nodes are active
// in one term; every node applies the same entry at each raft index; a
// topic whose creation was answered with success is never lost; and after
// healing, every node converges on the same image.
func TestRandomFaults(t *testing.T) {
	count := *quorumSeeds
	if testing.Short() {
		count = 50
	}
	created := 0
	for seed := 1; seed <= count; seed++ {
		created += runRandomFaults(t, uint64(seed))
		if t.Failed() {
			return
		}
	}
	if created < count {
		t.Fatalf("only %d topics created over %d seeds: the loss check shows little", created, count)
	}
	t.Logf("%d seeds, %d topics created and kept", count, created)
}

type faultRun struct {
	*testCluster
	random *mrand.Rand
	// activeIn is the node active in each term; created the topics whose
	// creation succeeded.
	activeIn map[uint64]metadata.BrokerID
	created  []string
	// appliedAt is the (term, proposal) every node must agree on per index.
	appliedAt map[uint64]string
	// pending are the creations not yet answered, by request id.
	pending map[uint64]string
}

func runRandomFaults(t *testing.T, seed uint64) int {
	random := mrand.New(mrand.NewPCG(seed, 7))
	size := 3 + 2*random.IntN(2)
	c := newTestCluster(t, size, func(config *Config) { config.SnapshotEntries, config.MaxHistoryEntries = 20, 30 })
	seedRaft(t, seed)
	run := &faultRun{testCluster: c, random: random, activeIn: map[uint64]metadata.BrokerID{}, appliedAt: map[uint64]string{}, pending: map[uint64]string{}}
	for step := 0; step < 400; step++ {
		run.fault()
		c.tick(1)
		run.check(seed, step)
		if t.Failed() {
			return 0
		}
	}
	for _, id := range c.voters {
		if !c.nodes[id].up {
			c.start(c.nodes[id], func(config *Config) { config.SnapshotEntries, config.MaxHistoryEntries = 20, 30 })
		}
	}
	c.cut = map[[2]metadata.BrokerID]bool{}
	c.tick(100)
	run.check(seed, -1)
	c.requireSameImages()
	image := c.active().q.Image()
	for _, name := range run.created {
		if _, ok := image.Topic(name); !ok {
			t.Fatalf("seed %d: topic %s was created, then lost", seed, name)
		}
	}
	return len(run.created)
}

func (r *faultRun) fault() {
	c := r.testCluster
	node := c.nodes[c.voters[r.random.IntN(len(c.voters))]]
	switch roll := r.random.Float64(); {
	case roll < 0.03 && node.up:
		c.crash(node.id)
	case roll < 0.08 && !node.up:
		c.start(node, func(config *Config) { config.SnapshotEntries, config.MaxHistoryEntries = 20, 30 })
	case roll < 0.10:
		other := c.voters[r.random.IntN(len(c.voters))]
		c.cut[[2]metadata.BrokerID{node.id, other}] = true
	case roll < 0.13:
		c.cut = map[[2]metadata.BrokerID]bool{}
	case roll < 0.40 && node.up:
		r.create(node)
	}
}

// create asks a node to create a topic, without waiting for the answer;
// answers are collected as they come.
func (r *faultRun) create(node *testNode) {
	name := fmt.Sprintf("t%d", r.random.IntN(1000))
	request := Request{ID: uint64(1 + r.random.IntN(1<<30)), From: 1, CreateTopic: &controller.CreateTopicRequest{
		Name: name, Partitions: 1, ReplicationFactor: 1}}
	// A topic needs an unfenced broker: broker 1 registers and heartbeats
	// through whichever node is asked (only the active one decides).
	if node.q.Active() {
		if state, ok := node.q.speculative.Broker(1); !ok {
			node.q.HandleRequest(Request{ID: 1, From: 1, Register: &RegisterRequest{Incarnation: "only", PreviousEpoch: metadata.NoBrokerEpoch}})
		} else {
			node.q.HandleRequest(Request{ID: 2, From: 1, Heartbeat: &HeartbeatRequest{Epoch: state.Epoch, AppliedOffset: node.q.Image().Offset()}})
		}
	}
	if err := node.q.HandleRequest(request); err != nil {
		r.t.Fatal(err)
	}
	r.pending[request.ID] = name
}

func (r *faultRun) check(seed uint64, step int) {
	c := r.testCluster
	for _, id := range c.voters {
		node := c.nodes[id]
		if !node.up || !node.q.Active() {
			continue
		}
		if other, ok := r.activeIn[node.q.activeTerm]; ok && other != id {
			r.t.Fatalf("seed %d step %d: nodes %d and %d both active in term %d", seed, step, other, id, node.q.activeTerm)
		}
		r.activeIn[node.q.activeTerm] = id
	}
	for _, answer := range c.answers {
		if name, ok := r.pending[answer.ID]; ok && answer.ErrorCode == 0 {
			r.created = append(r.created, name)
		}
		delete(r.pending, answer.ID)
	}
	c.answers = nil
	for _, id := range c.voters {
		node := c.nodes[id]
		if !node.up {
			continue
		}
		entries, err := node.storage.Entries(max(1, node.q.snapshotIndex+1), node.q.applied+1, 1<<30)
		if err != nil {
			continue // compacted meanwhile
		}
		for _, entry := range entries {
			key := fmt.Sprintf("%d/%x", entry.GetTerm(), entry.GetData())
			if previous, ok := r.appliedAt[entry.GetIndex()]; ok && previous != key {
				r.t.Fatalf("seed %d step %d: node %d applied another entry at index %d", seed, step, id, entry.GetIndex())
			}
			r.appliedAt[entry.GetIndex()] = key
		}
	}
}
