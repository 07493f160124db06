package sim

import (
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/raftlog"
	"github.com/tidelog/tide/internal/rules"
)

// controllerNode is one node of the metadata quorum: the real
// internal/quorum over a raft log (internal/raftlog) on its machine's
// crashable disk, its messages on the simulated network.
type controllerNode struct {
	id      metadata.BrokerID
	machine *brokerProcess
	q       *quorum.Quorum
	storage *raftlog.Storage
	// activeTerm is the term this node was last seen active in.
	activeTerm uint64
	// pushedUpTo is the last metadata offset whose partition changes this
	// controller pushed to brokers directly (rule kafka-4414 off only).
	pushedUpTo int64
}

// Quorum timing, in ticks.
const (
	raftElectionTicks  = 20
	raftHeartbeatTicks = 2
	// controllerRequestTicks is how long a broker waits for an answer
	// before it asks the next controller.
	controllerRequestTicks = 20
	// metadataFetchMaxWaitTicks is how long a controller holds a broker's
	// metadata fetch with nothing new: the production default of 500 ms.
	metadataFetchMaxWaitTicks = 50
)

// adminID is the sender of the simulator's own admin requests (topic
// creation, preferred elections).
const adminID metadata.BrokerID = -100

func (c *controllerNode) stop() { c.q, c.storage = nil, nil }

func (c *controllerNode) running() bool { return c.q != nil }

// startController opens the controller's raft log on its machine's disk
// and starts its quorum node.
func (w *world) startController(b *brokerProcess) {
	c := b.controller
	storage, err := raftlog.Open(raftlog.Config{FS: b.disk, Dir: "metadata", SegmentBytes: 64 << 10})
	if err != nil {
		panic(fmt.Sprintf("c%d: opening the raft log: %v", c.id, err))
	}
	w.withRaft(func() {
		c.q, err = quorum.New(quorum.Config{ID: c.id, Voters: w.voters, Storage: storage,
			ElectionTicks: raftElectionTicks, HeartbeatTicks: raftHeartbeatTicks, SessionTimeoutTicks: sessionTimeoutTicks,
			SnapshotEntries: 200, MaxHistoryEntries: 400, MaxWaitingAnswers: 1000, MaxEntryBytes: 1 << 20, Random: w.topicIDRandom,
			MaxMetadataWaitTicks: metadataFetchMaxWaitTicks,
			LeaderRebalanceTicks: leaderRebalanceTicks, LeaderImbalancePercentage: leaderImbalancePercentage, Rules: w.rules})
	})
	if err != nil {
		panic(fmt.Sprintf("c%d: %v", c.id, err))
	}
	c.storage, c.pushedUpTo = storage, -1
	w.carryOut(c) // a lone voter campaigns at once
}

// stepController ticks a controller and carries out what it has.
func (w *world) stepController(c *controllerNode) {
	if !c.running() {
		return
	}
	w.withRaft(c.q.Tick)
	w.carryOut(c)
}

// deliverToController hands a controller a raft message or a request.
func (w *world) deliverToController(c *controllerNode, m *message) {
	if c == nil || !c.running() {
		return
	}
	var err error
	w.withRaft(func() {
		switch {
		case m.raft != nil:
			err = c.q.Step(m.raft)
		case m.request != nil:
			err = c.q.HandleRequest(*m.request)
		}
	})
	if err != nil {
		panic(fmt.Sprintf("c%d: %v", c.id, err))
	}
	w.carryOut(c)
}

// carryOut carries out a controller's Readys as its contract says:
// persist, send, answer, snapshot, advance.
func (w *world) carryOut(c *controllerNode) {
	from := controllerAddress(c.id)
	for c.running() && c.q.HasReady() {
		var rd quorum.Ready
		w.withRaft(func() { rd = c.q.Ready() })
		if err := rd.Persist(c.storage); err != nil {
			panic(fmt.Sprintf("c%d: %v", c.id, err))
		}
		for _, m := range rd.Messages {
			w.network.send(&message{from: from, to: controllerAddress(metadata.BrokerID(m.GetTo())), raft: m})
		}
		for _, answer := range rd.Answers {
			copied := answer
			if answer.To == adminID {
				w.adminAnswered(copied)
				continue
			}
			w.network.send(&message{from: from, to: brokerAddress(answer.To), answer: &copied})
		}
		if err := rd.StoreSnapshot(c.storage); err != nil {
			panic(fmt.Sprintf("c%d: %v", c.id, err))
		}
		var err error
		w.withRaft(func() { err = c.q.Advance() })
		if err != nil {
			w.checker.fail(InvariantReplicaViolation, "c%d: %v", c.id, err)
			return
		}
		w.traceCommitted(c)
		w.pushPartitionStates(c)
	}
}

// traceCommitted traces the metadata records as they commit, once, from
// whichever controller applies them first, and each controller's
// activation.
func (w *world) traceCommitted(c *controllerNode) {
	if c.q.Active() && c.activeTerm != c.q.Term() {
		c.activeTerm = c.q.Term()
		w.trace("c%d is the active controller (term %d)", c.id, c.activeTerm)
	}
	for _, entry := range c.q.Entries(w.tracedOffset+1, 1<<20) {
		w.tracedOffset = entry.Offset
		w.trace("controller: %s", entry.Record)
		w.holders.apply(w.now, entry.Record)
	}
}

// pushPartitionStates sends the partition changes the active controller
// has committed straight to their replicas, unordered, as ZooKeeper-era
// controllers sent LeaderAndIsr: only with rule kafka-4414 switched off.
func (w *world) pushPartitionStates(c *controllerNode) {
	if w.rules.On(rules.OrderedMetadata) || !c.q.Active() {
		return
	}
	if c.pushedUpTo < 0 {
		c.pushedUpTo = c.q.Image().Offset() // pushes start with what is new
	}
	for _, entry := range c.q.Entries(c.pushedUpTo+1, 1<<20) {
		c.pushedUpTo = entry.Offset
		change, ok := entry.Record.(metadata.PartitionChange)
		if !ok {
			continue
		}
		state, _ := c.q.Image().Partition(change.TopicPartition)
		for _, id := range state.Replicas {
			copied := state.Clone()
			w.network.sendUnordered(&message{from: controllerAddress(c.id), to: brokerAddress(id), partitionState: &copied})
		}
	}
}

// activeController returns the active controller, or nil.
func (w *world) activeController() *controllerNode {
	for _, c := range w.controllers {
		if c.running() && !c.machine.paused && c.q.Active() {
			return c
		}
	}
	return nil
}

// metadataImage is the newest committed metadata among the running
// controllers: the simulator's oracle for routing its clients and for its
// checks. No broker sees it; brokers learn metadata through the protocol.
func (w *world) metadataImage() *metadata.Image {
	var newest *metadata.Image
	for _, c := range w.controllers {
		if c.running() && (newest == nil || c.q.Image().Offset() > newest.Offset()) {
			newest = c.q.Image()
		}
	}
	// Committed images at one offset are the same image: clone only a
	// newer one (a controller's own image changes in place as it applies).
	if newest != nil && (w.lastImage == nil || newest.Offset() > w.lastImage.Offset()) {
		w.lastImage = newest.Clone()
		w.workloadList = nil
	}
	if w.lastImage == nil {
		w.lastImage = metadata.NewImage()
	}
	return w.lastImage
}
