package commitlog

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

var crashSeeds = flag.Int("crash-seeds", 2000, "number of seeded runs in TestCrashRecovery")

// TestCrashRecovery runs thousands of seeded histories of random appends
// (as leader and follower), truncations, rolls, syncs, checkpoints,
// retention, cleaning (cleaner_crash_test.go: half the runs append keyed
// records and clean, some passes failing part-way and crashing) and crashes
// on the crashable in-memory filesystem. After each
// crash and reopen it checks the durability contract:
//
//   - the log is a prefix of what was appended (and not truncated since),
//     byte for byte;
//   - everything that was synced before the crash is present;
//   - the epoch cache agrees with the batches in the log;
//   - the high watermark and log start offset lie within the log.
//
// A failure prints the seed; rerun one with -run 'TestCrashRecovery/seed=N'.
func TestCrashRecovery(t *testing.T) {
	seeds := *crashSeeds
	if testing.Short() {
		seeds = 200
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runCrashHistory(t, uint64(seed))
		})
	}
}

// modelBatch is one batch the model expects in the log.
type modelBatch struct {
	base, next record.Offset
	epoch      record.LeaderEpoch
	bytes      []byte
}

type crashRun struct {
	t       *testing.T
	random  *rand.Rand
	mem     *disk.MemFS
	cfg     Config
	log     *Log
	now     time.Time
	model   []modelBatch
	crashes int
	// syncAppends syncs after every append, as the broker does with
	// flush=always.
	syncAppends bool
	// keyed runs append keyed records and clean (cleaner_crash_test.go);
	// faulty wraps mem to fail a cleaning pass's file operation.
	keyed  bool
	faulty *disk.FaultyFS
	// trace lists the steps so far, printed when a check fails.
	trace []string
	// job is a sync begun and not yet completed (syncStep), ran whether it
	// has run, with runErr.
	job    *SyncJob
	ran    bool
	runErr error
}

// syncStep takes the sync pipeline one step: begin a job, run it, or
// complete it, with any other step (appends, truncations, rolls, crashes)
// in between.
func (r *crashRun) syncStep() {
	switch {
	case r.job == nil:
		job, ok := r.log.BeginSync()
		if ok {
			r.job, r.ran = &job, false
		}
		r.note("begin sync: %t, to %d", ok, job.EndOffset())
	case !r.ran:
		r.runErr, r.ran = r.job.Run(), true
		r.note("run sync to %d: %v", r.job.EndOffset(), r.runErr)
	default:
		before := r.log.DurableEndOffset()
		durable, err := r.log.CompleteSync(*r.job, r.runErr)
		r.must(err, "complete sync")
		if durable != before && durable != r.job.EndOffset() {
			r.fatalf("a sync to %d moved the durable end from %d to %d", r.job.EndOffset(), before, durable)
		}
		r.note("complete sync to %d: durable end %d", r.job.EndOffset(), durable)
		r.job = nil
	}
}

func (r *crashRun) note(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...)+" -> "+r.log.String())
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\ntrace:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "))
}

func runCrashHistory(t *testing.T, seed uint64) {
	r := &crashRun{t: t, random: rand.New(rand.NewPCG(seed, 0x636f6d6d69746c6f)), mem: disk.NewMem(),
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.cfg = Config{
		Dir:                "p",
		SegmentBytes:       int64(2048 + r.random.IntN(3000)),
		IndexIntervalBytes: int64(64 + r.random.IntN(400)),
		RetentionBytes:     int64(4000 + r.random.IntN(8000)),
	}
	// flush=always as the broker does it: a sync after every append.
	r.syncAppends = r.random.IntN(2) == 0
	r.keyed = r.random.IntN(2) == 0
	r.reopen(r.mem)
	defer func() { r.log.Close() }()
	steps := 40 + r.random.IntN(120)
	for step := 0; step < steps; step++ {
		r.now = r.now.Add(time.Duration(r.random.IntN(800)) * time.Millisecond)
		r.log.SetClock(r.now.UnixMilli())
		r.step()
		r.checkContents("after step")
	}
	if t.Failed() {
		t.Logf("seed %d failed after %d crashes", seed, r.crashes)
	}
}

func (r *crashRun) reopen(fs *disk.MemFS) {
	r.mem = fs
	r.faulty = disk.NewFaulty(fs, disk.FaultConfig{})
	r.faulty.SetEnabled(false)
	r.cfg.FS = r.faulty
	l, err := Open(r.cfg)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	l.SetClock(r.now.UnixMilli())
	r.log = l
	r.job = nil // a job of the log before the crash or close
}

func (r *crashRun) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.fatalf("%s: %v", what, err)
	}
}

func (r *crashRun) step() {
	l := r.log
	switch choice := r.random.IntN(100); {
	case choice < 40:
		r.appendLeader()
	case choice < 50:
		r.appendFollower()
	case choice < 55:
		r.must(l.Sync(), "sync")
		r.note("sync")
	case choice < 60:
		r.syncStep()
	case choice < 66:
		r.truncate()
	case choice < 74:
		hw := l.LogStartOffset() + record.Offset(r.random.Int64N(int64(l.LogEndOffset()-l.LogStartOffset())+1))
		r.must(l.SetHighWatermark(hw), "set high watermark")
		r.note("set high watermark %d", hw)
	case choice < 78:
		r.must(l.Checkpoint(), "checkpoint")
		r.note("checkpoint")
	case choice < 81:
		deleted, err := l.EnforceRetention(r.now.UnixMilli())
		r.must(err, "retention")
		r.note("retention deleted %d", deleted)
	case choice < 83:
		hw := l.HighWatermark()
		start := l.LogStartOffset()
		to := start + record.Offset(r.random.Int64N(int64(hw-start)+1))
		r.must(l.AdvanceLogStartOffset(to), "advance log start")
		r.note("advance log start to %d", to)
	case choice < 85:
		r.must(l.Close(), "close")
		r.reopen(r.mem)
		r.note("close and reopen")
		r.checkAfterReopen(l.LogEndOffset(), "after clean reopen")
	case choice < 92:
		r.clean()
	default:
		r.crash()
	}
}

func (r *crashRun) appendLeader() {
	l := r.log
	epoch := max(l.LatestEpoch(), 0)
	if r.random.IntN(5) == 0 {
		epoch++
		r.must(l.AssignEpochStartOffset(epoch), "assign epoch")
	}
	batches := r.leaderBatches()
	result, err := appendAsLeader(l, batches, epoch)
	r.must(err, "append as leader")
	r.maybeSyncAppend()
	r.addToModel(batches, result.BaseOffset)
	r.note("append as leader in epoch %d: [%d, %d)", epoch, result.BaseOffset, result.NextOffset)
}

func (r *crashRun) appendFollower() {
	l := r.log
	epoch := max(l.LatestEpoch(), 0) + record.LeaderEpoch(r.random.IntN(2))
	batches := r.followerBatches(l.LogEndOffset(), epoch)
	result, err := l.Append(batches)
	r.must(err, "append as follower")
	r.maybeSyncAppend()
	r.addToModel(batches, result.BaseOffset)
	r.note("append as follower in epoch %d: [%d, %d)", epoch, result.BaseOffset, result.NextOffset)
}

func (r *crashRun) maybeSyncAppend() {
	if r.syncAppends {
		r.must(r.log.Sync(), "sync after append")
	}
}

func (r *crashRun) addToModel(batches []byte, base record.Offset) {
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		h := it.Header()
		r.model = append(r.model, modelBatch{base: h.BaseOffset, next: h.NextOffset(), epoch: h.PartitionLeaderEpoch, bytes: bytes.Clone(it.Batch())})
	}
	if err := it.Err(); err != nil {
		r.fatalf("model: %v", err)
	}
	if len(r.model) > 0 && r.model[0].base > base {
		r.fatalf("model: appended at %d before its start", base)
	}
}

func (r *crashRun) truncate() {
	l := r.log
	start, end := l.LogStartOffset(), l.LogEndOffset()
	to := start + record.Offset(r.random.Int64N(int64(end-start)+1))
	newEnd, err := l.TruncateTo(to)
	r.must(err, "truncate")
	if l.LogStartOffset() == newEnd {
		// Nothing at or above the log start is left (the batch holding
		// [start, to) may have straddled to and restarted the log at to).
		r.model = nil
	}
	r.cutModel(newEnd)
	r.note("truncate to %d: log end %d", to, newEnd)
}

// cutModel drops the model's batches at or beyond end.
func (r *crashRun) cutModel(end record.Offset) {
	keep := len(r.model)
	for keep > 0 && r.model[keep-1].next > end {
		keep--
	}
	r.model = r.model[:keep]
}

// crash loses power: what was synced must come back, and the log must be a
// prefix of the model.
func (r *crashRun) crash() {
	r.crashes++
	durable := r.log.DurableEndOffset()
	options := disk.DefaultCrashOptions(int64(r.random.Uint64() >> 1))
	options.Survival = disk.Survival(r.random.IntN(3))
	r.reopen(r.mem.CrashCloneWith(options))
	r.note("crash %+v, durable end was %d; recovery %+v", options, durable, r.log.Recovery())
	r.checkAfterReopen(durable, "after crash")
}

func (r *crashRun) checkAfterReopen(durable record.Offset, when string) {
	l := r.log
	if end := l.LogEndOffset(); end < durable {
		r.fatalf("%s: log ends at %d, but %d was synced", when, end, durable)
	}
	r.cutModel(l.LogEndOffset())
	r.checkContents(when)
}

// checkContents compares the log with the model and its epoch cache with
// its batches.
func (r *crashRun) checkContents(when string) {
	l := r.log
	start, end, hw := l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark()
	if hw < start || hw > end {
		r.fatalf("%s: high watermark %d outside [%d, %d]", when, hw, start, end)
	}
	if len(r.model) > 0 && r.model[len(r.model)-1].next != end {
		r.fatalf("%s: log ends at %d, model at %d", when, end, r.model[len(r.model)-1].next)
	}
	result, err := l.Read(start, 1<<40, end)
	r.must(err, when+": read")
	data, err := result.AppendTo(nil)
	r.must(err, when+": read bytes")
	var expected []byte
	var epochs leaderepoch.Cache
	for _, batch := range r.model {
		if batch.next > start {
			expected = append(expected, batch.bytes...)
			if epochs.LatestEpoch() != batch.epoch {
				epochs.Assign(batch.epoch, batch.base)
			}
		}
	}
	if !bytes.Equal(data, expected) {
		r.fatalf("%s: log content differs from the model (%d vs %d bytes)\nlog:\n%s\nmodel:\n%s", when, len(data), len(expected), describeBatches(data), describeBatches(expected))
	}
	r.checkEpochs(when, epochs, start, end)
	r.checkTimeIndex(when, data, start, end)
}

// checkTimeIndex checks lookups by timestamp (the time index, loaded or
// rebuilt by recovery) against a walk of every batch the log holds.
func (r *crashRun) checkTimeIndex(when string, data []byte, start, end record.Offset) {
	it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 30})
	var batches [][]byte
	lowest, highest := int64(0), int64(0)
	for it.Next() {
		batches = append(batches, it.Batch())
		if len(batches) == 1 {
			lowest = it.Header().MaxTimestampMs
		}
		lowest, highest = min(lowest, it.Header().MaxTimestampMs), max(highest, it.Header().MaxTimestampMs)
	}
	for range 4 {
		target := lowest - 1 + r.random.Int64N(highest-lowest+3)
		var want record.Offset = -1
		for _, batch := range batches {
			if offset, _, ok, _ := record.FirstRecordAtOrAfter(batch, start, target, record.Limits{}); ok {
				want = offset
				break
			}
		}
		got, ok, err := r.log.OffsetForTimestamp(target, end)
		r.must(err, when+": offset for timestamp")
		if !ok {
			got.Offset = -1
		}
		if got.Offset != want {
			r.fatalf("%s: offset for timestamp %d is %d, the batches say %d", when, target, got.Offset, want)
		}
	}
}

// checkEpochs checks that the cache agrees with the epochs of the batches:
// each epoch present in the log starts at its first batch (or at the log
// start offset), and every entry lies within the log.
func (r *crashRun) checkEpochs(when string, fromBatches leaderepoch.Cache, start, end record.Offset) {
	cache := mustCache(r, r.log.Epochs())
	if err := cache.Validate(); err != nil {
		r.fatalf("%s: %v", when, err)
	}
	for _, entry := range fromBatches.Entries() {
		want := max(entry.StartOffset, start)
		if cache.EpochAt(want) != entry.Epoch {
			r.fatalf("%s: epoch cache %v says offset %d is in epoch %d, the log says %d", when, cache.Entries(), want, cache.EpochAt(want), entry.Epoch)
		}
		if want > start && cache.EpochAt(want-1) == entry.Epoch {
			r.fatalf("%s: epoch cache %v starts epoch %d before its first batch at %d", when, cache.Entries(), entry.Epoch, want)
		}
	}
	for _, entry := range cache.Entries() {
		if entry.StartOffset < start || entry.StartOffset > end {
			r.fatalf("%s: epoch cache entry %v outside [%d, %d]", when, entry, start, end)
		}
	}
}

func mustCache(r *crashRun, entries []leaderepoch.Entry) leaderepoch.Cache {
	cache, err := leaderepoch.FromEntries(entries)
	if err != nil {
		r.fatalf("epoch cache: %v", err)
	}
	return cache
}
