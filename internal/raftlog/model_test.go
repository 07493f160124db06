package raftlog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestAgainstMemoryStorage runs random valid operation sequences on a
// Storage and on raft's own raft.MemoryStorage, the simpler thing it must
// behave like, and compares every read after every step. Reopens (without
// a crash) are mixed in: after one, FirstIndex may be lower than
// MemoryStorage's (compaction removes only whole segments), and the extra
// entries must be the ones compacted.
func TestAgainstMemoryStorage(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runModelComparison(t, uint64(seed))
		})
	}
}

// modelRun drives a Storage and a MemoryStorage with the same operations.
type modelRun struct {
	t      *testing.T
	random *rand.Rand
	mem    *disk.MemFS
	cfg    Config
	s      *Storage
	model  *raft.MemoryStorage
	hs     *pb.HardState
	// written maps each index to the last entry appended there, to check
	// the entries a reopen brings back below MemoryStorage's first index.
	written map[uint64]*pb.Entry
	trace   []string
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\ntrace:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "))
}

func (r *modelRun) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.fatalf("%s: %v", what, err)
	}
}

func runModelComparison(t *testing.T, seed uint64) {
	r := &modelRun{t: t, random: rand.New(rand.NewPCG(seed, 0x6d6f64656c)), mem: disk.NewMem(),
		model: raft.NewMemoryStorage(), hs: &pb.HardState{}, written: map[uint64]*pb.Entry{}}
	r.cfg = testConfig(r.mem)
	r.s = mustOpen(t, r.cfg)
	defer func() { r.s.Close() }()
	for step := 0; step < 80; step++ {
		r.step()
		r.compare()
	}
}

func (r *modelRun) last() uint64 {
	last, _ := r.model.LastIndex()
	return last
}

func (r *modelRun) snapshotIndex() uint64 {
	snapshot, _ := r.model.Snapshot()
	return snapshot.GetMetadata().GetIndex()
}

func (r *modelRun) step() {
	switch choice := r.random.IntN(100); {
	case choice < 45:
		r.appendEntries()
	case choice < 65:
		r.setHardState()
	case choice < 75:
		r.createSnapshot()
	case choice < 85:
		r.compact()
	case choice < 90:
		r.applySnapshot()
	default:
		r.must(r.s.Close(), "close")
		r.s = mustOpen(r.t, r.cfg)
		r.trace = append(r.trace, "reopen")
	}
}

// appendEntries appends what a raft leader could send: starting anywhere
// above the commit index and the snapshot, terms not below the previous
// entry's.
func (r *modelRun) appendEntries() {
	lowest := max(r.hs.GetCommit(), r.snapshotIndex()) + 1
	if lowest > r.last()+1 {
		return
	}
	at := lowest + r.random.Uint64N(r.last()+2-lowest)
	term, err := r.model.Term(at - 1)
	r.must(err, "model term")
	var entries []*pb.Entry
	for i := range 1 + r.random.IntN(8) {
		if r.random.IntN(4) == 0 {
			term++
		}
		index := at + uint64(i)
		entries = append(entries, newEntry(index, term, strings.Repeat("x", r.random.IntN(200))))
		r.written[index] = entries[len(entries)-1]
	}
	r.must(r.s.Append(entries), "append")
	r.must(r.model.Append(entries), "model append")
	r.trace = append(r.trace, fmt.Sprintf("append %s", describeEntries(entries)))
}

func (r *modelRun) setHardState() {
	term, vote := r.hs.GetTerm(), r.hs.GetVote()
	if r.random.IntN(3) == 0 {
		term, vote = term+1, 0
	}
	if vote == 0 {
		vote = r.random.Uint64N(4)
	}
	commit := r.hs.GetCommit() + r.random.Uint64N(r.last()-r.hs.GetCommit()+1)
	hs := newHardState(term, vote, commit)
	r.must(r.s.SetHardState(hs), "set hard state")
	r.must(r.model.SetHardState(hs), "model set hard state")
	r.hs = hs
	r.trace = append(r.trace, fmt.Sprintf("hard state %d/%d/%d", term, vote, commit))
}

func (r *modelRun) createSnapshot() {
	snapshotIndex, commit := r.snapshotIndex(), r.hs.GetCommit()
	if commit <= snapshotIndex {
		return
	}
	i := snapshotIndex + 1 + r.random.Uint64N(commit-snapshotIndex)
	cs := &pb.ConfState{Voters: []uint64{1, 2, uint64(r.random.IntN(5) + 3)}}
	data := fmt.Appendf(nil, "image at %d", i)
	_, err := r.s.CreateSnapshot(i, cs, data)
	r.must(err, "create snapshot")
	_, err = r.model.CreateSnapshot(i, cs, data)
	r.must(err, "model create snapshot")
	r.trace = append(r.trace, fmt.Sprintf("create snapshot %d", i))
}

func (r *modelRun) compact() {
	first, _ := r.model.FirstIndex()
	snapshotIndex := r.snapshotIndex()
	if snapshotIndex < first {
		return
	}
	i := first + r.random.Uint64N(snapshotIndex-first+1)
	r.must(r.s.Compact(i), "compact")
	r.must(r.model.Compact(i), "model compact")
	r.trace = append(r.trace, fmt.Sprintf("compact %d", i))
}

// applySnapshot installs a snapshot from a leader ahead of the log, and the
// hard state raft saves with it (commit at the snapshot).
func (r *modelRun) applySnapshot() {
	index := max(r.snapshotIndex(), r.hs.GetCommit()) + 1 + r.random.Uint64N(10)
	lastTerm, _ := r.model.Term(r.last())
	term := max(lastTerm, r.hs.GetTerm()) + r.random.Uint64N(2)
	snapshot := &pb.Snapshot{Data: fmt.Appendf(nil, "leader image at %d", index),
		Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	hs := newHardState(max(term, r.hs.GetTerm()), r.hs.GetVote(), index)
	if hs.GetTerm() != r.hs.GetTerm() {
		hs.Vote = new(uint64(0))
	}
	r.must(r.s.Save(hs, nil, snapshot), "save snapshot")
	r.must(r.model.ApplySnapshot(snapshot), "model apply snapshot")
	r.must(r.model.SetHardState(hs), "model hard state")
	r.hs = hs
	for i := range r.written {
		if i >= index {
			delete(r.written, i)
		}
	}
	r.written[index] = newEntry(index, term, "")
	r.trace = append(r.trace, fmt.Sprintf("apply snapshot %d/%d", index, term))
}

// compare checks every read of the Storage against MemoryStorage.
func (r *modelRun) compare() {
	r.t.Helper()
	first, _ := r.s.FirstIndex()
	modelFirst, _ := r.model.FirstIndex()
	last, _ := r.s.LastIndex()
	if last != r.last() || first > modelFirst {
		r.fatalf("storage holds [%d, %d], MemoryStorage [%d, %d]", first, last, modelFirst, r.last())
	}
	for i := first - 1; i < modelFirst-1; i++ {
		term, err := r.s.Term(i)
		if written, ok := r.written[i]; err != nil || (ok && written.GetTerm() != term) {
			r.fatalf("Term(%d) = %d, %v below MemoryStorage's first index; %d was written", i, term, err, written.GetTerm())
		}
	}
	for i := modelFirst - 1; i <= last+1; i++ {
		term, err := r.s.Term(i)
		modelTerm, modelErr := r.model.Term(i)
		if term != modelTerm || err != modelErr {
			r.fatalf("Term(%d) = %d, %v; MemoryStorage %d, %v", i, term, err, modelTerm, modelErr)
		}
	}
	for range 4 {
		r.compareEntries(modelFirst, last)
	}
	r.compareState()
}

func (r *modelRun) compareEntries(modelFirst, last uint64) {
	r.t.Helper()
	lo := modelFirst + r.random.Uint64N(last+2-modelFirst)
	hi := lo + r.random.Uint64N(last+2-lo)
	maxSize := []uint64{0, 100, 300, 1000, 1 << 40}[r.random.IntN(5)]
	got, err := r.s.Entries(lo, hi, maxSize)
	want, modelErr := r.model.Entries(lo, hi, maxSize)
	if lo == hi && err == nil && len(got) == 0 && modelErr == raft.ErrUnavailable && r.firstIndex() < modelFirst {
		// MemoryStorage holds only its dummy entry, the Storage also
		// holds entries a reopen brought back: both say "nothing".
		return
	}
	if err != modelErr || !sameEntries(got, want) {
		r.fatalf("Entries(%d, %d, %d) = %s, %v; MemoryStorage %s, %v", lo, hi, maxSize, describeEntries(got), err, describeEntries(want), modelErr)
	}
	if modelFirst > 1 {
		if _, err := r.s.Entries(modelFirst-1, last+1, maxSize); err != raft.ErrCompacted && modelFirst-1 < r.firstIndex() {
			r.fatalf("Entries below the first index: %v", err)
		}
	}
}

func (r *modelRun) firstIndex() uint64 {
	first, _ := r.s.FirstIndex()
	return first
}

func (r *modelRun) compareState() {
	r.t.Helper()
	snapshot, err := r.s.Snapshot()
	r.must(err, "snapshot")
	modelSnapshot, _ := r.model.Snapshot()
	if !proto.Equal(snapshot, modelSnapshot) {
		r.fatalf("Snapshot() = %v; MemoryStorage %v", snapshot, modelSnapshot)
	}
	hs, cs, err := r.s.InitialState()
	r.must(err, "initial state")
	modelHS, modelCS, _ := r.model.InitialState()
	if hardStateValues(hs) != hardStateValues(modelHS) || !proto.Equal(cs, modelCS) {
		r.fatalf("InitialState() = %v, %v; MemoryStorage %v, %v", hs, cs, modelHS, modelCS)
	}
}
