package raftlog

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ApplySnapshot durably replaces the storage's content with a snapshot
// received from the leader: the snapshot file is replaced, then every entry
// is dropped and the log restarts after the snapshot's index. It returns
// raft.ErrSnapOutOfDate for a snapshot not newer than the current one.
func (s *Storage) ApplySnapshot(snapshot *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	return s.applySnapshotLocked(snapshot)
}

func (s *Storage) applySnapshotLocked(snapshot *pb.Snapshot) error {
	snapshot = pb.EnsureSnapshot(proto.Clone(pb.EnsureSnapshot(snapshot)).(*pb.Snapshot))
	index, term := snapshot.GetMetadata().GetIndex(), snapshot.GetMetadata().GetTerm()
	if current := s.snapshot.GetMetadata().GetIndex(); current != 0 && current >= index {
		return raft.ErrSnapOutOfDate
	}
	// An index-0 snapshot carries only a configuration, to bootstrap a
	// new node. On a storage that holds anything it would wipe the log
	// (MemoryStorage allows it), so a node that bootstraps again on a
	// restart is refused instead of losing its votes and entries.
	if index == 0 && (s.lastIndex() > 0 || s.hardState != nil) {
		return fmt.Errorf("%w: bootstrap snapshot on a storage that holds entries or a hard state", ErrInvalidWrite)
	}
	if commit := s.hardState.GetCommit(); index < commit {
		return fmt.Errorf("%w: snapshot at %d is below the commit index %d", ErrInvalidWrite, index, commit)
	}
	if err := s.writeSnapshot(snapshot); err != nil {
		return err
	}
	if err := s.resetLog(index, term); err != nil {
		return s.fail(err)
	}
	s.maybeAssertInvariants("apply snapshot")
	return nil
}

// writeSnapshot durably replaces the snapshot file and then s.snapshot.
func (s *Storage) writeSnapshot(snapshot *pb.Snapshot) error {
	if size := proto.Size(snapshot); int64(size) > s.cfg.MaxSnapshotBytes {
		return fmt.Errorf("%w: snapshot of %d bytes, the limit is %d", ErrInvalidWrite, size, s.cfg.MaxSnapshotBytes)
	}
	if err := writeMessageFile(s.cfg.FS, s.cfg.Dir, snapshotName, kindSnapshot, snapshot); err != nil {
		return s.fail(err)
	}
	s.snapshot = snapshot
	return nil
}

// resetLog removes every segment and starts an empty log after (index,
// term). The snapshot file is durable before this starts, and the removals
// are durable (SyncDir) before the new segment is created, so a crash
// leaves either a prefix of the old segments, which recovery reconciles
// with the snapshot (see reconcileWithSnapshot), or no segment, or the new
// one alone.
func (s *Storage) resetLog(index, term uint64) error {
	// Newest first, so that a crash part way leaves a prefix of the log
	// that still reaches back to the snapshot: removing oldest first
	// could leave a log starting after the snapshot, which recovery must
	// treat as lost files.
	removed := len(s.segments) > 0
	for len(s.segments) > 0 {
		if err := s.removeSegment(s.segments[len(s.segments)-1]); err != nil {
			return err
		}
		s.segments = s.segments[:len(s.segments)-1]
	}
	if removed {
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			return err
		}
	}
	fresh, err := createSegment(s.cfg.FS, s.cfg.Dir, segmentHeader{base: index + 1, termBefore: term})
	if err != nil {
		return err
	}
	s.segments = []*segment{fresh}
	if err := fresh.file.Sync(); err != nil {
		return err
	}
	if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
		return err
	}
	s.entries = []*pb.Entry{{Index: new(index), Term: new(term)}}
	return nil
}

// CreateSnapshot durably records a snapshot of the application's state at
// index i (which must be in the log and committed), with configuration cs (the previous
// snapshot's if nil) and the application's opaque data. It does not drop
// entries: call Compact for that. It returns raft.ErrSnapOutOfDate for an
// index not above the current snapshot's.
func (s *Storage) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if i <= s.snapshot.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	if i > s.lastIndex() || i < s.offset() {
		return nil, fmt.Errorf("%w: snapshot at %d outside the log [%d, %d]", ErrInvalidWrite, i, s.offset(), s.lastIndex())
	}
	// The application applies only committed entries, and a snapshot of
	// uncommitted ones could later contradict the log raft overwrites.
	if commit := s.hardState.GetCommit(); i > commit {
		return nil, fmt.Errorf("%w: snapshot at %d above the commit index %d", ErrInvalidWrite, i, commit)
	}
	if cs == nil {
		cs = s.snapshot.GetMetadata().GetConfState()
	}
	snapshot := &pb.Snapshot{
		Data: data,
		Metadata: &pb.SnapshotMetadata{
			Index:     new(i),
			Term:      new(s.entries[i-s.offset()].GetTerm()),
			ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState),
		},
	}
	if err := s.writeSnapshot(snapshot); err != nil {
		return nil, err
	}
	return proto.Clone(snapshot).(*pb.Snapshot), nil
}

// Compact drops the entries up to and including i, keeping i's term, so
// that FirstIndex becomes i+1 (raft.MemoryStorage's meaning), and removes
// the segment files that hold only dropped entries. It returns
// raft.ErrCompacted if i is already compacted and ErrCompactBeyondSnapshot
// if i is above the snapshot: compaction must never drop entries that no
// snapshot covers. The removals are durable when it returns; entries of
// the first remaining segment below i+1 become available again after a
// reopen, which is harmless.
func (s *Storage) Compact(i uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	offset := s.offset()
	switch {
	case i <= offset:
		return raft.ErrCompacted
	case i > s.snapshot.GetMetadata().GetIndex():
		return fmt.Errorf("%w: %d, snapshot at %d", ErrCompactBeyondSnapshot, i, s.snapshot.GetMetadata().GetIndex())
	case i > s.lastIndex():
		return fmt.Errorf("%w: compaction at %d beyond the last index %d", ErrInvalidWrite, i, s.lastIndex())
	}
	kept := make([]*pb.Entry, 1, uint64(len(s.entries))-(i-offset))
	kept[0] = &pb.Entry{Index: new(i), Term: new(s.entries[i-offset].GetTerm())}
	s.entries = append(kept, s.entries[i-offset+1:]...)
	removed := 0
	// Oldest first, so that a crash part way keeps a contiguous suffix.
	for removed < len(s.segments)-1 && s.segments[removed+1].header.base <= i+1 {
		if err := s.removeSegment(s.segments[removed]); err != nil {
			s.segments = s.segments[removed+1:]
			return s.fail(err)
		}
		removed++
	}
	if removed == 0 {
		return nil
	}
	s.segments = s.segments[removed:]
	if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
		return s.fail(err)
	}
	s.maybeAssertInvariants("compact")
	return nil
}
