package raftlog

import (
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestClusterCrashAndCatchUp runs three raft.RawNodes in one goroutine,
// each on its own MemFS-backed Storage, delivering messages by hand and
// following raft's Ready contract: Save, then send, then apply, then
// Advance. Nodes snapshot and compact as they apply. Node 3 crashes
// (CrashCloneWith), the others commit on without it and compact past its
// log, and node 3 restarts from what its storage recovered and catches up
// through a snapshot and entries. Every node must end with the same
// applied sequence, the proposals in order, and the same entries at every
// index their logs share.
func TestClusterCrashAndCatchUp(t *testing.T) {
	c := &testCluster{t: t}
	for id := uint64(1); id <= 3; id++ {
		c.start(id, bootstrapStorage(t))
	}
	if err := c.nodes[1].raw.Campaign(); err != nil {
		t.Fatal(err)
	}
	c.settleUntil("node 1 leads", func() bool { return c.nodes[1].raw.BasicStatus().RaftState == raft.StateLeader })
	c.proposeAndWait(1, 30, []uint64{1, 2, 3})

	durableCommit := c.nodes[3].storage.hardState.GetCommit()
	crashed := c.nodes[3].mem.CrashCloneWith(disk.DefaultCrashOptions(3))
	c.nodes[3].storage.Close()
	c.nodes[3] = nil
	c.proposeAndWait(31, 70, []uint64{1, 2})

	c.start(3, crashed)
	first3, _ := c.nodes[3].storage.FirstIndex()
	last3, _ := c.nodes[3].storage.LastIndex()
	leaderFirst, _ := c.nodes[c.leader()].storage.FirstIndex()
	t.Logf("node 3 restarts with log [%d, %d] and commit %d; the leader's log starts at %d", first3, last3, c.nodes[3].storage.hardState.GetCommit(), leaderFirst)
	if commit := c.nodes[3].storage.hardState.GetCommit(); commit < durableCommit {
		t.Fatalf("node 3 recovered commit %d, below the durable %d", commit, durableCommit)
	}
	snapshotsBefore := c.snapshotsSent
	c.settleUntil("node 3 catches up", func() bool { return len(c.nodes[3].applied) == 70 })
	if c.snapshotsSent == snapshotsBefore {
		t.Errorf("node 3 caught up without a snapshot; the test meant to exercise one")
	}
	c.checkAgreement(70)
	t.Logf("caught up with %d snapshot messages", c.snapshotsSent)
}

// bootstrapStorage returns a MemFS holding a fresh storage whose
// configuration is the three voters, as an index-0 snapshot carries it.
func bootstrapStorage(t *testing.T) *disk.MemFS {
	mem := disk.NewMem()
	s := mustOpen(t, testConfig(mem))
	bootstrap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(0)), Term: new(uint64(0)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	if err := s.ApplySnapshot(bootstrap); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return mem
}

// testNode is one node: its disk, storage, raft and state machine (the
// proposals applied, in order).
type testNode struct {
	mem *disk.MemFS
	// faulty wraps mem, for the faults TestClusterCrashes arms.
	faulty       *disk.FaultyFS
	storage      *Storage
	raw          *raft.RawNode
	applied      []string
	appliedIndex uint64
}

type testCluster struct {
	t *testing.T
	// nodes is indexed by id; nil when the node is down.
	nodes         [4]*testNode
	queue         []*pb.Message
	snapshotsSent int
	// onFailure is called when a node's storage fails (an injected
	// fault); nil makes that a test failure.
	onFailure func(id uint64, err error)
	// committed maps every index any node applied to the entry applied
	// there: raft's state machine safety says it is the same everywhere.
	committed map[uint64]*pb.Entry
}

// start opens node id's storage, restores its state machine from the
// storage's snapshot and starts raft on it.
func (c *testCluster) start(id uint64, mem *disk.MemFS) {
	faulty := disk.NewFaulty(mem, disk.FaultConfig{Seed: int64(id), PartialWriteProbability: 0.5})
	s := mustOpen(c.t, testConfig(faulty))
	snapshot, err := s.Snapshot()
	if err != nil {
		c.t.Fatal(err)
	}
	n := &testNode{mem: mem, faulty: faulty, storage: s}
	n.restore(snapshot)
	n.raw, err = raft.NewRawNode(&raft.Config{
		ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: s, Applied: n.appliedIndex,
		MaxSizePerMsg: 4096, MaxInflightMsgs: 16, CheckQuorum: true, PreVote: true,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = n
}

func (n *testNode) restore(snapshot *pb.Snapshot) {
	n.applied = nil
	if data := string(snapshot.GetData()); data != "" {
		n.applied = strings.Split(data, "\n")
	}
	n.appliedIndex = snapshot.GetMetadata().GetIndex()
}

// handleReady follows the Ready contract; it reports whether there was one.
func (c *testCluster) handleReady(id uint64) bool {
	n := c.nodes[id]
	if n == nil || !n.raw.HasReady() {
		return false
	}
	rd := n.raw.Ready()
	// Durable BEFORE the messages that depend on it leave.
	if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		c.failed(id, fmt.Errorf("save: %w", err))
		return true
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		n.restore(rd.Snapshot)
	}
	c.queue = append(c.queue, rd.Messages...)
	for _, entry := range rd.CommittedEntries {
		c.checkCommitted(id, entry)
		if entry.GetType() == pb.EntryNormal && len(entry.GetData()) > 0 {
			n.applied = append(n.applied, string(entry.GetData()))
		}
		n.appliedIndex = entry.GetIndex()
	}
	n.raw.Advance(rd)
	c.maybeCompact(id)
	return true
}

// maybeCompact snapshots the state machine every 8 applied entries and
// compacts to 2 entries below it, so that a lagging follower needs a
// snapshot.
func (c *testCluster) maybeCompact(id uint64) {
	n := c.nodes[id]
	snapshot, _ := n.storage.Snapshot()
	if n.appliedIndex < snapshot.GetMetadata().GetIndex()+8 {
		return
	}
	if _, err := n.storage.CreateSnapshot(n.appliedIndex, nil, []byte(strings.Join(n.applied, "\n"))); err != nil {
		c.failed(id, fmt.Errorf("snapshot: %w", err))
		return
	}
	if first, _ := n.storage.FirstIndex(); n.appliedIndex-2 >= first {
		if err := n.storage.Compact(n.appliedIndex - 2); err != nil {
			c.failed(id, fmt.Errorf("compact: %w", err))
		}
	}
}

// failed handles a storage failure: the node must stop at once, sending
// nothing more.
func (c *testCluster) failed(id uint64, err error) {
	if c.onFailure == nil || !errors.Is(err, disk.ErrInjected) {
		c.t.Fatalf("node %d: %v", id, err)
	}
	c.onFailure(id, err)
}

// checkCommitted checks raft's state machine safety for one applied entry.
func (c *testCluster) checkCommitted(id uint64, entry *pb.Entry) {
	if c.committed == nil {
		c.committed = map[uint64]*pb.Entry{}
	}
	if previous, ok := c.committed[entry.GetIndex()]; ok && !proto.Equal(previous, entry) {
		c.t.Fatalf("node %d applied %v at index %d, another node applied %v", id, entry, entry.GetIndex(), previous)
	}
	c.committed[entry.GetIndex()] = entry
}

// deliver hands every queued message to its node, dropping those to nodes
// that are down, and reports snapshots back to their sender as raft asks.
func (c *testCluster) deliver() {
	queue := c.queue
	c.queue = nil
	for _, m := range queue {
		to, from := c.nodes[m.GetTo()], c.nodes[m.GetFrom()]
		if to == nil {
			if m.GetType() == pb.MsgSnap && from != nil {
				from.raw.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
			}
			continue
		}
		_ = to.raw.Step(m) // stale messages are refused, which is fine
		if m.GetType() == pb.MsgSnap && from != nil {
			c.snapshotsSent++
			from.raw.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// settleUntil runs rounds until done holds.
func (c *testCluster) settleUntil(what string, done func() bool) {
	for round := 0; round < 2000; round++ {
		if done() {
			return
		}
		c.round()
	}
	c.t.Fatalf("%s: not reached after 2000 rounds", what)
}

// round ticks every node that is up, then handles Readies and delivers
// messages until nothing is left to do.
func (c *testCluster) round() {
	for id := uint64(1); id <= 3; id++ {
		if c.nodes[id] != nil {
			c.nodes[id].raw.Tick()
		}
	}
	for busy := true; busy; {
		busy = false
		for id := uint64(1); id <= 3; id++ {
			busy = c.handleReady(id) || busy
		}
		busy = busy || len(c.queue) > 0
		c.deliver()
	}
}

// proposeAndWait proposes p-from..p-to on the leader and waits until the
// given nodes have applied them.
func (c *testCluster) proposeAndWait(from, to int, nodes []uint64) {
	for i := from; i <= to; i++ {
		leader := c.leader()
		if err := c.nodes[leader].raw.Propose(fmt.Appendf(nil, "p-%d", i)); err != nil {
			c.t.Fatalf("propose %d: %v", i, err)
		}
		c.settleUntil(fmt.Sprintf("p-%d applied", i), func() bool {
			for _, id := range nodes {
				if len(c.nodes[id].applied) < i {
					return false
				}
			}
			return true
		})
	}
}

func (c *testCluster) leader() uint64 {
	if id := c.maybeLeader(); id != 0 {
		return id
	}
	c.t.Fatal("no leader")
	return 0
}

// maybeLeader returns the node that is up and leads in the highest term,
// or 0 if none does.
func (c *testCluster) maybeLeader() uint64 {
	leader, term := uint64(0), uint64(0)
	for id := uint64(1); id <= 3; id++ {
		if n := c.nodes[id]; n != nil {
			if status := n.raw.BasicStatus(); status.RaftState == raft.StateLeader && status.GetTerm() >= term {
				leader, term = id, status.GetTerm()
			}
		}
	}
	return leader
}

// checkAgreement checks that every node applied p-1..p-count in order and
// holds the same entries wherever the logs overlap.
func (c *testCluster) checkAgreement(count int) {
	var want []string
	for i := 1; i <= count; i++ {
		want = append(want, fmt.Sprintf("p-%d", i))
	}
	for id := uint64(1); id <= 3; id++ {
		if got := c.nodes[id].applied; !slices.Equal(got, want) {
			c.t.Errorf("node %d applied %v, want %v", id, got, want)
		}
	}
	for a := uint64(1); a <= 3; a++ {
		for b := a + 1; b <= 3; b++ {
			c.checkLogsAgree(a, b)
		}
	}
}

func (c *testCluster) checkLogsAgree(a, b uint64) {
	firstA, _ := c.nodes[a].storage.FirstIndex()
	firstB, _ := c.nodes[b].storage.FirstIndex()
	lastA, _ := c.nodes[a].storage.LastIndex()
	lastB, _ := c.nodes[b].storage.LastIndex()
	lo, hi := max(firstA, firstB), min(lastA, lastB)
	if lo > hi {
		return
	}
	entriesA, errA := c.nodes[a].storage.Entries(lo, hi+1, 1<<40)
	entriesB, errB := c.nodes[b].storage.Entries(lo, hi+1, 1<<40)
	if errA != nil || errB != nil || !sameEntries(entriesA, entriesB) {
		c.t.Errorf("nodes %d and %d disagree on [%d, %d]: %s %v vs %s %v", a, b, lo, hi, describeEntries(entriesA), errA, describeEntries(entriesB), errB)
	}
}
