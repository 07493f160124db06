package raftlog

import (
	"bytes"
	"errors"
	"path"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// threeSegments writes entries 1..60 (several segments with testConfig)
// committed up to commit, and returns the MemFS and the segment names.
func threeSegments(t *testing.T, commit uint64) (*disk.MemFS, []string) {
	mem := disk.NewMem()
	s := mustOpen(t, testConfig(mem))
	var entries []*pb.Entry
	for i := uint64(1); i <= 60; i++ {
		entries = append(entries, newEntry(i, 1+i/20, string(make([]byte, 150))))
	}
	if err := s.Save(newHardState(4, 1, commit), entries, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var segments []string
	names, _ := mem.List(testDir)
	for _, name := range names {
		if _, ok := parseSegmentFileName(name); ok {
			segments = append(segments, path.Join(testDir, name))
		}
	}
	if len(segments) < 3 {
		t.Fatalf("want at least 3 segments, got %v", segments)
	}
	return mem, segments
}

func appendBytes(t *testing.T, mem *disk.MemFS, name string, data []byte) {
	file, err := mem.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
}

func wantCorruption(t *testing.T, cfg Config, file string) {
	t.Helper()
	_, err := Open(cfg)
	var corruption *CorruptionError
	if !errors.As(err, &corruption) {
		t.Fatalf("open: %v, want a CorruptionError", err)
	}
	if file != "" && corruption.File != file {
		t.Fatalf("corruption reported in %s, want %s: %v", corruption.File, file, err)
	}
}

func TestTornTailIsCut(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	last := segments[len(segments)-1]
	frame, _ := encodeEntry(nil, newEntry(61, 4, "torn"), 1024)
	appendBytes(t, mem, last, frame[:len(frame)-2])
	s := mustOpen(t, testConfig(mem))
	defer s.Close()
	report := s.Recovery()
	if report.TailError == nil || report.TruncatedBytes != int64(len(frame)-2) {
		t.Fatalf("report %+v, want a cut of %d bytes", report, len(frame)-2)
	}
	if last, _ := s.LastIndex(); last != 60 {
		t.Fatalf("last index %d, want 60", last)
	}
}

func TestDamageInEarlierSegmentIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	if err := mem.CorruptAt(segments[1], 100, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), segments[1])
}

func TestDamageAtOrBelowCommitIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 60)
	last := segments[len(segments)-1]
	size, _ := mem.Stat(last)
	if err := mem.CorruptAt(last, size-3, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), last)
}

func TestDamageBeforeAValidEntryIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	last := segments[len(segments)-1]
	if err := mem.CorruptAt(last, segmentHeaderBytes+20, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), last)
}

func TestDamagedHeaderBeforeValidEntriesIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	last := segments[len(segments)-1]
	if err := mem.CorruptAt(last, 5, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), last)
}

func TestDamagedHardStateAndSnapshotAreCorruption(t *testing.T) {
	for _, name := range []string{hardStateName, snapshotName} {
		mem, _ := threeSegments(t, 10)
		s := mustOpen(t, testConfig(mem))
		if _, err := s.CreateSnapshot(5, &pb.ConfState{Voters: []uint64{1}}, []byte("image")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := mem.CorruptAt(path.Join(testDir, name), 10, []byte{0xff}); err != nil {
			t.Fatal(err)
		}
		wantCorruption(t, testConfig(mem), path.Join(testDir, name))
	}
}

func TestMissingFirstSegmentIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	if err := mem.Remove(segments[0]); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), segments[1])
}

func TestMissingMiddleSegmentIsCorruption(t *testing.T) {
	mem, segments := threeSegments(t, 10)
	if err := mem.Remove(segments[1]); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, testConfig(mem), segments[2])
}

func TestLeftoverTemporaryFileIsRemoved(t *testing.T) {
	mem, _ := threeSegments(t, 10)
	file, _ := mem.Create(path.Join(testDir, hardStateName+temporarySuffix))
	file.Write([]byte("half a hard state"))
	file.Close()
	s := mustOpen(t, testConfig(mem))
	defer s.Close()
	if s.Recovery().RemovedTemporaryFiles != 1 {
		t.Fatalf("report %+v", s.Recovery())
	}
	if hs, _, _ := s.InitialState(); hs.GetCommit() != 10 {
		t.Fatalf("hard state %v", hs)
	}
}

// TestInterruptedApplySnapshotIsFinished stops ApplySnapshot after the
// snapshot file is replaced but before the old log is removed: recovery
// must see that the log does not hold the snapshot and finish the reset.
func TestInterruptedApplySnapshotIsFinished(t *testing.T) {
	mem, _ := threeSegments(t, 10)
	faulty := disk.NewFaulty(mem, disk.FaultConfig{})
	s := mustOpen(t, testConfig(faulty))
	faulty.InjectOnce(disk.OpRemove, nil)
	snapshot := &pb.Snapshot{Data: []byte("leader image"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(9))}}
	if err := s.ApplySnapshot(snapshot); !errors.Is(err, ErrFailed) {
		t.Fatalf("apply snapshot with a failing remove: %v", err)
	}
	reopened := mustOpen(t, testConfig(mem))
	defer reopened.Close()
	if !reopened.Recovery().LogResetToSnapshot {
		t.Fatalf("report %+v, want the log reset", reopened.Recovery())
	}
	checkRange(t, reopened, 101, 100)
	if term, _ := reopened.Term(100); term != 9 {
		t.Fatalf("Term(100) = %d", term)
	}
}

func checkRange(t *testing.T, s *Storage, first, last uint64) {
	t.Helper()
	gotFirst, _ := s.FirstIndex()
	gotLast, _ := s.LastIndex()
	if gotFirst != first || gotLast != last {
		t.Fatalf("log [%d, %d], want [%d, %d]", gotFirst, gotLast, first, last)
	}
}

// TestCompactRemovesWholeSegments checks that compaction deletes the
// segments it no longer needs, and that a reopen starts at the first
// remaining segment with the right term before it.
func TestCompactRemovesWholeSegments(t *testing.T) {
	mem, segments := threeSegments(t, 60)
	s := mustOpen(t, testConfig(mem))
	if _, err := s.CreateSnapshot(50, nil, []byte("image")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(50); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, name := range segments[:len(segments)-1] {
		if _, err := mem.Stat(name); !errors.Is(err, disk.ErrNotExist) && s.segments[0].name != name {
			t.Errorf("%s kept after compaction to 50", name)
		}
	}
	reopened := mustOpen(t, testConfig(mem))
	defer reopened.Close()
	first, _ := reopened.FirstIndex()
	if first > 51 || first == 1 {
		t.Fatalf("first index %d after reopen: past the compaction point, or nothing removed", first)
	}
	want := uint64(1 + (first-1)/20)
	if term, err := reopened.Term(first - 1); err != nil || term != want {
		t.Fatalf("Term(%d) = %d, %v; want %d", first-1, term, err, want)
	}
}

// TestTailScanIsBounded checks hasEntryAfter on bytes where every
// position looks like the start of a long entry frame (bad checksums): it
// must stop at its budget, answering corruption, instead of checksumming
// tens of megabytes at each of millions of positions.
func TestTailScanIsBounded(t *testing.T) {
	data := bytes.Repeat([]byte{byte(kindEntry)}, 40<<20)
	// Each candidate's length is 0x02020202 bytes (about 32 MiB), within
	// the largest entry limit and within the data for the first 6 MiB of
	// positions.
	if !hasEntryAfter(data, 0, EntryBytesMaxLimit) {
		t.Fatal("a scan past its budget must answer that the damage is not a torn tail")
	}
	if hasEntryAfter(bytes.Repeat([]byte{byte(kindEntry)}, 64<<10), 0, 1<<20) {
		t.Fatal("found an entry where every candidate's length is over the limit")
	}
}

// TestLoweredLimitsKeepWrittenEntries reopens with a smaller MaxEntryBytes
// than the entries were written with: they must all still be there, not
// cut as damage.
func TestLoweredLimitsKeepWrittenEntries(t *testing.T) {
	mem := disk.NewMem()
	s := mustOpen(t, testConfig(mem))
	if err := s.Save(newHardState(1, 1, 1), entryRange(1, 3, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Append([]*pb.Entry{newEntry(3, 1, string(make([]byte, 900)))}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg := testConfig(mem)
	cfg.MaxEntryBytes = 100
	reopened := mustOpen(t, cfg)
	defer reopened.Close()
	if last, _ := reopened.LastIndex(); last != 3 || reopened.Recovery().TailError != nil {
		t.Fatalf("last index %d, report %+v: the large entry was cut", last, reopened.Recovery())
	}
}
