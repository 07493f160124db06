package raftlog

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

func TestConfigValidate(t *testing.T) {
	mem := disk.NewMem()
	if err := testConfig(mem).Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	if err := (Config{FS: mem, Dir: "d"}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []Config{
		{Dir: "d"},
		{FS: mem},
		{FS: mem, Dir: "d", SegmentBytes: 100},
		{FS: mem, Dir: "d", SegmentBytes: SegmentBytesMax + 1},
		{FS: mem, Dir: "d", SegmentBytes: SegmentBytesMin, MaxEntryBytes: SegmentBytesMin},
		{FS: mem, Dir: "d", MaxEntryBytes: -1},
		{FS: mem, Dir: "d", MaxSnapshotBytes: -1},
	}
	for _, cfg := range bad {
		if cfg.Validate() == nil {
			t.Errorf("%+v validated", cfg)
		}
		if _, err := Open(cfg); err == nil {
			t.Errorf("%+v opened", cfg)
		}
	}
}

func TestEmptyStorage(t *testing.T) {
	s := mustOpen(t, testConfig(disk.NewMem()))
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 1 || last != 0 {
		t.Fatalf("first %d last %d, want 1 and 0", first, last)
	}
	if term, err := s.Term(0); term != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}
	if _, err := s.Entries(1, 1, 100); err != raft.ErrUnavailable {
		t.Fatalf("Entries on an empty log: %v", err)
	}
	hs, cs, err := s.InitialState()
	if hs != nil || cs == nil || err != nil {
		t.Fatalf("InitialState = %v, %v, %v", hs, cs, err)
	}
}

// TestStorageSemantics walks the raft.Storage edge cases one by one.
func TestStorageSemantics(t *testing.T) {
	mem := disk.NewMem()
	s := mustOpen(t, testConfig(mem))
	if err := s.Save(newHardState(2, 1, 0), append(entryRange(1, 4, 1), entryRange(4, 8, 2)...), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entries(1, 9, 1<<20); err != raft.ErrUnavailable {
		t.Errorf("Entries past the end: %v", err)
	}
	if term, _ := s.Term(5); term != 2 {
		t.Errorf("Term(5) = %d", term)
	}
	if _, err := s.Term(8); err != raft.ErrUnavailable {
		t.Errorf("Term(8): %v", err)
	}
	one := uint64(proto.Size(newEntry(1, 1, "entry 1 term 1")))
	for _, c := range []struct{ maxSize, want uint64 }{{0, 1}, {one, 1}, {2*one - 1, 1}, {2 * one, 2}, {1 << 20, 7}} {
		got, err := s.Entries(1, 8, c.maxSize)
		if err != nil || uint64(len(got)) != c.want {
			t.Errorf("Entries(1, 8, %d) = %d entries, %v; want %d", c.maxSize, len(got), err, c.want)
		}
	}
	// Overlapping append: raft truncates the conflicting suffix.
	if err := s.Save(newHardState(3, 2, 4), entryRange(5, 7, 3), nil); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 6 {
		t.Errorf("last index %d after truncating append, want 6", last)
	}
	if _, err := s.CreateSnapshot(4, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("image at 4")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(3, nil, nil); err != raft.ErrSnapOutOfDate {
		t.Errorf("older snapshot: %v", err)
	}
	if err := s.Compact(5); !errors.Is(err, ErrCompactBeyondSnapshot) {
		t.Errorf("Compact beyond the snapshot: %v", err)
	}
	if err := s.Compact(4); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(3); err != raft.ErrCompacted {
		t.Errorf("Compact(3) after Compact(4): %v", err)
	}
	if _, err := s.Entries(4, 6, 1<<20); err != raft.ErrCompacted {
		t.Errorf("Entries(4, ...) after Compact(4): %v", err)
	}
	if term, err := s.Term(4); term != 2 || err != nil {
		t.Errorf("Term of the compaction index = %d, %v", term, err)
	}
	if _, err := s.Term(3); err != raft.ErrCompacted {
		t.Errorf("Term(3): %v", err)
	}
	// A snapshot from the leader replaces the log.
	snapshot := &pb.Snapshot{Data: []byte("image at 20"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(5)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	if err := s.Save(newHardState(5, 0, 20), nil, snapshot); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplySnapshot(snapshot); err != raft.ErrSnapOutOfDate {
		t.Errorf("same snapshot again: %v", err)
	}
	checkSnapshotState(t, s, 20, 5)
	s.Close()
	reopened := mustOpen(t, testConfig(mem))
	defer reopened.Close()
	checkSnapshotState(t, reopened, 20, 5)
	got, _ := reopened.Snapshot()
	if !proto.Equal(got, snapshot) {
		t.Errorf("snapshot after reopen %v, want %v", got, snapshot)
	}
}

func checkSnapshotState(t *testing.T, s *Storage, index, term uint64) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != index+1 || last != index {
		t.Errorf("after snapshot at %d: first %d last %d", index, first, last)
	}
	if got, err := s.Term(index); got != term || err != nil {
		t.Errorf("Term of the snapshot index = %d, %v; want %d", got, err, term)
	}
	hs, cs, _ := s.InitialState()
	if hs.GetCommit() != index || len(cs.GetVoters()) != 3 {
		t.Errorf("InitialState %v %v", hs, cs)
	}
}

// TestInvalidWritesAreRefused checks that writes raft never makes are
// refused with ErrInvalidWrite, leave the storage usable and change
// nothing.
func TestInvalidWritesAreRefused(t *testing.T) {
	s := mustOpen(t, testConfig(disk.NewMem()))
	defer s.Close()
	if err := s.Save(newHardState(3, 1, 3), entryRange(1, 6, 2), nil); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func() error{
		"gap":                 func() error { return s.Append(entryRange(8, 9, 3)) },
		"term goes back":      func() error { return s.Append(entryRange(6, 7, 1)) },
		"not contiguous":      func() error { return s.Append([]*pb.Entry{newEntry(6, 3, ""), newEntry(8, 3, "")}) },
		"truncates committed": func() error { return s.Append(entryRange(3, 4, 3)) },
		"too large":           func() error { return s.Append([]*pb.Entry{newEntry(6, 3, string(make([]byte, 2000)))}) },
		"hs term back":        func() error { return s.SetHardState(newHardState(2, 1, 3)) },
		"vote changed":        func() error { return s.SetHardState(newHardState(3, 2, 3)) },
		"commit back":         func() error { return s.SetHardState(newHardState(3, 1, 2)) },
		"commit past the end": func() error { return s.SetHardState(newHardState(3, 1, 9)) },
		"snapshot uncommitted": func() error {
			_, err := s.CreateSnapshot(4, nil, nil)
			return err
		},
		"bootstrap again": func() error {
			return s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: &pb.ConfState{Voters: []uint64{1}}}})
		},
		"snapshot below commit": func() error {
			return s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(2)), Term: new(uint64(2))}})
		},
	}
	for name, write := range cases {
		if err := write(); !errors.Is(err, ErrInvalidWrite) {
			t.Errorf("%s: %v, want ErrInvalidWrite", name, err)
		}
	}
	if last, _ := s.LastIndex(); last != 5 {
		t.Errorf("last index %d after refused writes", last)
	}
	if err := s.Save(newHardState(4, 2, 6), entryRange(4, 7, 4), nil); err != nil {
		t.Errorf("storage unusable after refused writes: %v", err)
	}
}

// TestFailedWriteStopsTheStorage checks the fsyncgate rule: after a failed
// sync every call fails, and reopening recovers what was durable.
func TestFailedWriteStopsTheStorage(t *testing.T) {
	mem := disk.NewMem()
	faulty := disk.NewFaulty(mem, disk.FaultConfig{})
	cfg := testConfig(faulty)
	s := mustOpen(t, cfg)
	if err := s.Save(newHardState(1, 1, 0), entryRange(1, 4, 1), nil); err != nil {
		t.Fatal(err)
	}
	faulty.FailSyncAfter(0)
	if err := s.Save(nil, entryRange(4, 6, 1), nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("save with a failing sync: %v", err)
	}
	if _, err := s.LastIndex(); !errors.Is(err, ErrFailed) {
		t.Fatalf("read after failure: %v", err)
	}
	if err := s.Save(nil, entryRange(4, 6, 1), nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("retry after failure: %v", err)
	}
	reopened := mustOpen(t, testConfig(mem.CrashCloneWith(disk.CrashOptions{Survival: disk.SurviveNothing})))
	defer reopened.Close()
	if last, _ := reopened.LastIndex(); last != 3 {
		t.Fatalf("last index %d after reopen, want the 3 durable entries", last)
	}
}

// TestReturnedEntriesAreProtected checks raft's ownership rule: the caller
// may append to the slice Entries returns without changing the storage,
// and an overwrite does not change entries already returned.
func TestReturnedEntriesAreProtected(t *testing.T) {
	s := mustOpen(t, testConfig(disk.NewMem()))
	defer s.Close()
	if err := s.Append(entryRange(1, 6, 1)); err != nil {
		t.Fatal(err)
	}
	returned, err := s.Entries(1, 4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(returned, newEntry(4, 9, "caller's"))
	if term, _ := s.Term(4); term != 1 {
		t.Fatalf("a caller's append changed entry 4 to term %d", term)
	}
	if err := s.Append(entryRange(2, 4, 2)); err != nil {
		t.Fatal(err)
	}
	if returned[1].GetTerm() != 1 || returned[2].GetTerm() != 1 {
		t.Fatalf("an overwrite changed entries returned before it: %s", describeEntries(returned))
	}
}

// TestSaveSnapshotAndEntries saves a Ready holding a snapshot from the
// leader and the entries after it, as a lagging follower receives them.
func TestSaveSnapshotAndEntries(t *testing.T) {
	mem := disk.NewMem()
	s := mustOpen(t, testConfig(mem))
	if err := s.Save(newHardState(1, 1, 3), entryRange(1, 4, 1), nil); err != nil {
		t.Fatal(err)
	}
	snapshot := &pb.Snapshot{Data: []byte("image at 50"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(50)), Term: new(uint64(4))}}
	if err := s.Save(newHardState(4, 0, 52), entryRange(51, 55, 4), snapshot); err != nil {
		t.Fatal(err)
	}
	s.Close()
	reopened := mustOpen(t, testConfig(mem))
	defer reopened.Close()
	checkRange(t, reopened, 51, 54)
	if hs, _, _ := reopened.InitialState(); hardStateValues(hs) != [3]uint64{4, 0, 52} {
		t.Fatalf("hard state %v", hs)
	}
}
