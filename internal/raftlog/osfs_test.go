package raftlog

import (
	"testing"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestOnRealFiles runs a short life on the operating system's filesystem:
// appends that roll segments, an overwrite, a snapshot and compaction, a
// received snapshot, and reopens, so that the rename, removal and
// directory sync paths are exercised for real and not only on MemFS.
func TestOnRealFiles(t *testing.T) {
	cfg := Config{FS: disk.OS(), Dir: t.TempDir() + "/raft", SegmentBytes: SegmentBytesMin, MaxEntryBytes: 1024}
	s := mustOpen(t, cfg)
	if err := s.Save(newHardState(1, 1, 30), entryRange(1, 41, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(newHardState(2, 2, 30), entryRange(35, 61, 2), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(30, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("image")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(30); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, cfg)
	if last, _ := s.LastIndex(); last != 60 {
		t.Fatalf("last index %d, want 60", last)
	}
	if term, _ := s.Term(40); term != 2 {
		t.Fatalf("Term(40) = %d after the overwrite, want 2", term)
	}
	snapshot := &pb.Snapshot{Data: []byte("leader image"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(3))}}
	if err := s.Save(newHardState(3, 0, 100), nil, snapshot); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, cfg)
	defer s.Close()
	checkRange(t, s, 101, 100)
	if hs, _, _ := s.InitialState(); hardStateValues(hs) != [3]uint64{3, 0, 100} {
		t.Fatalf("hard state %v", hs)
	}
}
