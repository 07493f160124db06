package raftlog

import (
	crand "crypto/rand"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/disk"
)

var clusterSeeds = flag.Int("raftlog-cluster-seeds", 100, "number of seeded runs in TestClusterCrashes")

// TestClusterCrashes runs a three-node raft cluster on this storage through
// seeded schedules of proposals and crashes: a fault armed at a random disk
// operation of a random node (the leader too) makes a Save, snapshot or
// compaction fail part way, and that node loses power at once
// (CrashCloneWith, possibly tearing its last write) and restarts later
// from what its storage recovered; nodes also crash between Readies. If the
// storage ever lost a durably saved vote or entry, raft could elect two
// leaders or commit two different entries at one index; the test checks,
// on every entry any node applies, that no other node applied a different
// one at that index (state machine safety), and after healing that a new
// proposal commits and every node applies the same sequence.
//
// raft draws its election jitter from crypto/rand.Reader; the test points
// it at the seed's source so that a seed replays, as the simulator does.
func TestClusterCrashes(t *testing.T) {
	seeds := *clusterSeeds
	if testing.Short() {
		seeds = 10
	}
	crashes, applied := 0, 0
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c := runClusterSchedule(t, uint64(seed))
			crashes += c.crashes
			applied += len(c.nodes[1].applied)
		})
	}
	t.Logf("%d seeds, %d node crashes, %d proposals applied", seeds, crashes, applied)
}

// seededReader makes crypto/rand.Reader deterministic for a test.
type seededReader struct{ random *rand.Rand }

func (r seededReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.random.Uint32())
	}
	return len(p), nil
}

// clusterSchedule is one seeded run: which node is down, with what disk,
// until which round.
type clusterSchedule struct {
	*testCluster
	random    *rand.Rand
	down      map[uint64]*disk.MemFS
	restartAt map[uint64]int
	round     int
	crashes   int
	proposed  int
}

func runClusterSchedule(t *testing.T, seed uint64) *clusterSchedule {
	saved := crand.Reader
	crand.Reader = seededReader{rand.New(rand.NewPCG(seed, 0x656c656374))}
	defer func() { crand.Reader = saved }()
	c := &clusterSchedule{testCluster: &testCluster{t: t}, random: rand.New(rand.NewPCG(seed, 0x636c7573746572)),
		down: map[uint64]*disk.MemFS{}, restartAt: map[uint64]int{}}
	c.onFailure = func(id uint64, err error) { c.crash(id) }
	for id := uint64(1); id <= 3; id++ {
		c.start(id, bootstrapStorage(t))
	}
	for c.round = 0; c.round < 600; c.round++ {
		c.maybeFault()
		c.maybeRestart()
		if leader := c.maybeLeader(); leader != 0 && c.random.IntN(3) == 0 {
			c.proposed++
			_ = c.nodes[leader].raw.Propose(fmt.Appendf(nil, "p-%d", c.proposed))
		}
		c.testCluster.round()
	}
	c.heal()
	return c
}

// maybeFault arms a fault on a node's disk, or crashes it outright, while
// the others are up (one node down at a time keeps a quorum).
func (c *clusterSchedule) maybeFault() {
	if len(c.down) > 0 {
		return
	}
	id := 1 + c.random.Uint64N(3)
	switch c.random.IntN(40) {
	case 0:
		faultable := []disk.Op{disk.OpWrite, disk.OpSync, disk.OpSyncDir, disk.OpRename, disk.OpRemove, disk.OpCreate, disk.OpTruncate}
		c.nodes[id].faulty.FailAfter(faultable[c.random.IntN(len(faultable))], c.random.IntN(6), nil)
	case 1:
		c.crash(id)
	}
}

// crash cuts node id's power: its storage and raft are dropped, and its disk
// is what a crash leaves.
func (c *clusterSchedule) crash(id uint64) {
	options := disk.DefaultCrashOptions(int64(c.random.Uint64() >> 1))
	options.Survival = disk.Survival(c.random.IntN(3))
	c.down[id] = c.nodes[id].mem.CrashCloneWith(options)
	c.nodes[id].storage.Close()
	c.nodes[id] = nil
	c.restartAt[id] = c.round + 5 + c.random.IntN(60)
	c.crashes++
}

func (c *clusterSchedule) maybeRestart() {
	for id := uint64(1); id <= 3; id++ {
		if mem, ok := c.down[id]; ok && c.round >= c.restartAt[id] {
			delete(c.down, id)
			c.start(id, mem)
		}
	}
}

// heal restarts every node, clears armed faults, and checks that a new
// proposal commits and every node applies the same sequence.
func (c *clusterSchedule) heal() {
	c.round = 1 << 30
	c.maybeRestart()
	for id := uint64(1); id <= 3; id++ {
		for op := disk.OpCreate; op <= disk.OpSync; op++ {
			c.nodes[id].faulty.FailAfter(op, 1<<30, nil)
		}
	}
	c.settleUntil("a leader after healing", func() bool { return c.maybeLeader() != 0 })
	checks := 0
	c.settleUntil("every node applies the final proposal and agrees", func() bool {
		// A proposal is lost when leadership moves before it commits;
		// propose again until one commits.
		if checks++; checks%100 == 1 && c.maybeLeader() != 0 {
			_ = c.nodes[c.maybeLeader()].raw.Propose([]byte("final"))
		}
		for id := uint64(1); id <= 3; id++ {
			applied := c.nodes[id].applied
			if len(applied) == 0 || applied[len(applied)-1] != "final" || fmt.Sprint(applied) != fmt.Sprint(c.nodes[1].applied) {
				return false
			}
		}
		return true
	})
	for a := uint64(1); a <= 3; a++ {
		for b := a + 1; b <= 3; b++ {
			c.checkLogsAgree(a, b)
		}
	}
}
