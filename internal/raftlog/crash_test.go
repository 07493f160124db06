package raftlog

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

var crashSeeds = flag.Int("raftlog-crash-seeds", 2000, "number of seeded histories in TestCrashRecovery")

// TestCrashRecovery runs seeded histories of the writes a raft node makes
// (Ready saves of entries and hard state, overwriting appends, snapshots
// created and received, compactions, clean reopens) on a crashable MemFS.
// Before a write it may arm a fault at a random later disk operation (a
// write, possibly after appending part of its bytes, a sync, directory
// sync, rename, removal, creation or truncation): the write then fails
// part way, as power loss would stop it, and the
// filesystem is crashed with CrashCloneWith, keeping what was synced and a
// seeded share of the rest, possibly tearing the last write. Crashes also
// happen between writes. After each crash the storage is reopened and
// checked against D, the state of the last write that returned, and N, the
// state the interrupted write would have reached:
//
//   - no durably saved entry is lost: every entry of D that N keeps is
//     there (or compacted into a snapshot that is there);
//   - the hard state is D's or N's, so term and commit never decrease and
//     the vote never changes within a term; the snapshot is D's or N's;
//   - the log is a consistent prefix of D's or N's log (entries a reopen
//     brings back below the compaction point are the ones written there).
//
// A third of the interrupted writes are process crashes instead: the
// storage is reopened on the same MemFS, whose unsynced writes survive as
// a page cache's would, and then power is lost keeping nothing unsynced;
// the second recovery must find exactly what the first one showed.
//
// A crash after a write that returned must give back exactly that write's
// state. A failure prints the seed and the trace; rerun one with
// -run 'TestCrashRecovery/seed=N'.
func TestCrashRecovery(t *testing.T) {
	seeds := *crashSeeds
	if testing.Short() {
		seeds = 200
	}
	var total crashStatistics
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			total.add(runCrashHistory(t, uint64(seed)))
		})
	}
	t.Logf("%d seeds: %+v", seeds, total)
}

// crashStatistics count what the histories exercised, so that a change
// that stops the test from reaching torn tails or resets shows up.
type crashStatistics struct {
	Steps, InterruptedWrites, Crashes, ProcessCrashes, TornTailsCut, SegmentsRemoved, LogResets int
}

func (c *crashStatistics) add(o crashStatistics) {
	c.Steps += o.Steps
	c.InterruptedWrites += o.InterruptedWrites
	c.Crashes += o.Crashes
	c.ProcessCrashes += o.ProcessCrashes
	c.TornTailsCut += o.TornTailsCut
	c.SegmentsRemoved += o.SegmentsRemoved
	c.LogResets += o.LogResets
}

type crashRun struct {
	t      *testing.T
	random *rand.Rand
	mem    *disk.MemFS
	faulty *disk.FaultyFS
	cfg    Config
	s      *Storage
	// model is D, the state of the last write that returned.
	model crashModel
	// history maps each index to the last entry written there.
	history map[uint64]*pb.Entry
	// writes counts the entries written, to make each one unique.
	writes     int
	statistics crashStatistics
	trace      []string
}

// crashOperation is one write: its effect on the model and its call.
type crashOperation struct {
	describe string
	apply    func(*crashModel)
	run      func(*Storage) error
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\ntrace:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "))
}

func runCrashHistory(t *testing.T, seed uint64) crashStatistics {
	r := &crashRun{t: t, random: rand.New(rand.NewPCG(seed, 0x7261667463726173)), mem: disk.NewMem(), history: map[uint64]*pb.Entry{}}
	r.cfg = Config{Dir: testDir, SegmentBytes: SegmentBytesMin + int64(r.random.IntN(4096)), MaxEntryBytes: 600}
	r.reopen(r.mem)
	defer func() { r.s.Close() }()
	steps := 40 + r.random.IntN(80)
	for range steps {
		r.statistics.Steps++
		if r.random.IntN(10) == 0 {
			r.crash(r.model, r.model, "crash between writes")
			continue
		}
		r.write(r.nextOperation())
	}
	return r.statistics
}

func (r *crashRun) reopen(mem *disk.MemFS) {
	r.mem = mem
	// A write the armed fault fails first appends a random prefix of its
	// bytes half the time, as a real write(2) can before the device errs.
	r.faulty = disk.NewFaulty(mem, disk.FaultConfig{Seed: int64(r.random.Uint64() >> 1), PartialWriteProbability: 0.5})
	r.cfg.FS = r.faulty
	s, err := Open(r.cfg)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.s = s
}

// write runs op, maybe with a fault armed; a failed write is a crash.
func (r *crashRun) write(op crashOperation) {
	next := r.model.clone()
	op.apply(&next)
	armed := r.random.IntN(3) == 0
	if armed {
		faultable := []disk.Op{disk.OpWrite, disk.OpSync, disk.OpSyncDir, disk.OpRename, disk.OpRemove, disk.OpCreate, disk.OpTruncate}
		r.faulty.FailAfter(faultable[r.random.IntN(len(faultable))], r.random.IntN(4), nil)
	}
	err := op.run(r.s)
	r.disarm()
	if err == nil {
		r.model = next
		r.trace = append(r.trace, op.describe)
		return
	}
	if !armed || !errors.Is(err, disk.ErrInjected) || !errors.Is(err, ErrFailed) {
		r.fatalf("%s: %v", op.describe, err)
	}
	r.statistics.InterruptedWrites++
	r.trace = append(r.trace, op.describe+" interrupted: "+err.Error())
	if r.random.IntN(3) == 0 {
		r.processCrash(r.model, next)
		return
	}
	r.crash(r.model, next, "crash during the write")
}

// processCrash is the process dying during a write while the machine stays
// up: the page cache keeps every unsynced write, and recovery reads them as
// if durable. Then power is lost with nothing unsynced surviving: what the
// first recovery showed must still be there, or the node could have voted
// or acknowledged on state that was never durable.
func (r *crashRun) processCrash(durable, next crashModel) {
	r.statistics.ProcessCrashes++
	r.s.Close()
	r.reopen(r.mem)
	seen := r.checkReopened(durable, next, "process crash during the write")
	r.s.Close()
	r.reopen(r.mem.CrashCloneWith(disk.CrashOptions{Survival: disk.SurviveNothing}))
	again := r.checkReopened(seen, seen, "power loss after recovery")
	if again.String() != seen.String() {
		r.fatalf("recovery's view was not durable:\n  before the power loss: %s\n  after:                %s", seen.String(), again.String())
	}
}

func (r *crashRun) disarm() {
	for op := disk.OpCreate; op <= disk.OpSync; op++ {
		r.faulty.FailAfter(op, 1<<30, nil)
	}
}

// crash loses power, reopens and checks the recovered state against
// durable (D) and next (N), then continues from what was recovered.
func (r *crashRun) crash(durable, next crashModel, why string) {
	r.statistics.Crashes++
	options := disk.DefaultCrashOptions(int64(r.random.Uint64() >> 1))
	options.Survival = disk.Survival(r.random.IntN(3))
	r.s.Close()
	r.reopen(r.mem.CrashCloneWith(options))
	r.checkReopened(durable, next, fmt.Sprintf("%s (survival %d)", why, options.Survival))
}

// checkReopened checks the storage just reopened against durable and next,
// continues the run from what it holds, and returns that.
func (r *crashRun) checkReopened(durable, next crashModel, why string) crashModel {
	report := r.s.Recovery()
	if report.TailError != nil {
		r.statistics.TornTailsCut++
	}
	r.statistics.SegmentsRemoved += report.RemovedSegments
	if report.LogResetToSnapshot {
		r.statistics.LogResets++
	}
	recovered, err := modelOf(r.s)
	if err != nil {
		r.fatalf("read recovered storage: %v", err)
	}
	r.trace = append(r.trace, fmt.Sprintf("%s: recovered %s; report %+v", why, recovered.String(), report))
	if err := r.checkRecovered(&recovered, &durable, &next); err != nil {
		r.fatalf("%v\n  durable: %s\n  next:    %s", err, durable.String(), next.String())
	}
	r.model = recovered
	// What was recovered is now what was last written at each index,
	// whatever the interrupted write had put in the history.
	for i := range r.history {
		if i > recovered.offset {
			delete(r.history, i)
		}
	}
	for _, entry := range recovered.entries {
		r.history[entry.GetIndex()] = entry
	}
	return recovered
}
