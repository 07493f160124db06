package raftlog

import (
	"errors"
	"fmt"
	"path"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// fuzzCommit is the commit index of the storage FuzzRecovery damages.
const fuzzCommit = 25

// FuzzRecovery damages the files of a synced storage with arbitrary bytes
// (overwritten in place, replacing a file, or cutting one and appending to
// it) and reopens it. Open must never panic: it either returns a
// CorruptionError, or opens a storage whose invariants hold, which keeps
// every entry that lies before damage in the last segment above the
// commit index, and which accepts a further write and reopens.
func FuzzRecovery(f *testing.F) {
	f.Add(uint8(0), uint32(100), []byte("XXXX"), uint8(0))
	f.Add(uint8(2), uint32(3000), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Add(uint8(3), uint32(0), []byte{}, uint8(1))
	f.Add(uint8(4), uint32(5), []byte{0xff}, uint8(0))
	f.Add(uint8(2), uint32(2500), []byte{9, 0, 0, 0, 1, 2, 3, 4, 2}, uint8(2))
	f.Add(uint8(1), uint32(21), []byte{0x7f, 0xff, 0xff, 0xff}, uint8(0))
	f.Fuzz(func(t *testing.T, fileChoice uint8, position uint32, damage []byte, mode uint8) {
		if len(damage) > 4096 {
			return
		}
		mem := disk.NewMem()
		cfg := testConfig(mem)
		original := buildFuzzStorage(t, cfg)
		names := fuzzFileNames(t, mem)
		name := path.Join(testDir, names[int(fileChoice)%len(names)])
		size, _ := mem.Stat(name)
		at := int64(position) % (size + 1)
		lastBase, _ := parseSegmentFileName(names[len(names)-3])
		damageFile(t, mem, name, at, damage, mode%3)
		if mode%3 == 1 {
			at = 0
		}
		s, err := openWithoutPanic(t, cfg)
		if err != nil {
			var corruption *CorruptionError
			if !errors.As(err, &corruption) {
				t.Fatalf("open failed with %v, want a CorruptionError", err)
			}
			return
		}
		checkFuzzRecovered(t, s, original, name, at, lastBase)
		checkStillWritable(t, s, cfg)
	})
}

// buildFuzzStorage writes 40 entries over several segments, a hard state
// committing 25 and a snapshot at 10, closes it and returns the entries.
func buildFuzzStorage(t *testing.T, cfg Config) []*pb.Entry {
	s := mustOpen(t, cfg)
	var entries []*pb.Entry
	for i := uint64(1); i <= 40; i++ {
		entries = append(entries, newEntry(i, 1+i/8, fmt.Sprintf("entry %d %0*d", i, int(i*37%400), 0)))
	}
	if err := s.Save(newHardState(6, 1, fuzzCommit), entries, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(10, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("image at 10")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return entries
}

func fuzzFileNames(t *testing.T, mem *disk.MemFS) []string {
	names, err := mem.List(testDir)
	if err != nil || len(names) < 4 {
		t.Fatalf("files %v, %v: want segments, hard state and snapshot", names, err)
	}
	return names
}

// damageFile overwrites (mode 0), replaces (mode 1) or cuts at and appends
// to (mode 2) the named file, durably.
func damageFile(t *testing.T, mem *disk.MemFS, name string, at int64, damage []byte, mode uint8) {
	if mode == 0 {
		size, _ := mem.Stat(name)
		damage = damage[:min(int64(len(damage)), size-at)]
		if err := mem.CorruptAt(name, at, damage); err != nil {
			t.Fatal(err)
		}
		return
	}
	content, err := mem.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if mode == 1 {
		content = nil
	}
	file, err := mem.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write(append(content[:min(int64(len(content)), at)], damage...)); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
}

func openWithoutPanic(t *testing.T, cfg Config) (s *Storage, err error) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("open panicked: %v", p)
		}
	}()
	return Open(cfg)
}

// checkFuzzRecovered checks the invariants of an opened storage, and that
// damage in the last segment (based at lastBase) cut only what follows it.
func checkFuzzRecovered(t *testing.T, s *Storage, original []*pb.Entry, name string, at int64, lastBase uint64) {
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("invariants broken after open: %v", p)
			}
		}()
		s.assertInvariants("fuzz")
	}()
	m, err := modelOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if m.commit() > m.last() {
		t.Fatalf("commit %d beyond the last index %d", m.commit(), m.last())
	}
	if base, ok := parseSegmentFileName(path.Base(name)); !ok || base != lastBase {
		return
	}
	// Entries of earlier segments, and of the last one up to the damage,
	// were untouched and must all be there, unchanged.
	intact := lastBase - 1
	for i := lastBase; i <= uint64(len(original)) && positionInFuzzLog(original, lastBase, i) <= at; i++ {
		intact = i
	}
	if m.last() < intact {
		t.Fatalf("damage at %s byte %d cut the log to %d, entries up to %d lay before it", name, at, m.last(), intact)
	}
	for i := m.offset + 1; i <= intact; i++ {
		if !proto.Equal(m.entry(i), original[i-1]) {
			t.Fatalf("entry %d changed by damage at %s byte %d", i, name, at)
		}
	}
}

// positionInFuzzLog returns where the frame of entry index ends in the
// segment based at base, for the entries buildFuzzStorage wrote.
func positionInFuzzLog(entries []*pb.Entry, base, index uint64) int64 {
	position := int64(segmentHeaderBytes)
	for _, e := range entries[base-1 : index] {
		position += int64(frameHeaderBytes + proto.Size(e))
	}
	return position
}

// checkStillWritable appends after the recovered log and reopens.
func checkStillWritable(t *testing.T, s *Storage, cfg Config) {
	last, _ := s.LastIndex()
	term, _ := s.Term(last)
	if err := s.Append([]*pb.Entry{newEntry(last+1, term, "after recovery")}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	s.Close()
	reopened, err := openWithoutPanic(t, cfg)
	if err != nil {
		t.Fatalf("reopen after recovery and append: %v", err)
	}
	if got, _ := reopened.LastIndex(); got != last+1 {
		t.Fatalf("last index %d after reopen, want %d", got, last+1)
	}
	reopened.Close()
}
