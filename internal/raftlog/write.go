package raftlog

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Save persists what one raft Ready asks to persist, in the order that
// keeps every crash recoverable: the snapshot (if not empty), then the
// entries, then the hard state (if not empty). Entries are synced before
// the hard state that may commit them, so a durable commit index never
// points past the durable log. When Save returns nil everything is durable
// and the caller may send Ready's messages; on an error nothing may be
// sent, and if the error wraps ErrFailed the storage must be reopened.
func (s *Storage) Save(hardState *pb.HardState, entries []*pb.Entry, snapshot *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if !raft.IsEmptySnap(snapshot) {
		if err := s.applySnapshotLocked(snapshot); err != nil {
			return err
		}
	}
	if err := s.appendLocked(entries); err != nil {
		return err
	}
	return s.setHardStateLocked(hardState)
}

// Append durably appends entries, first removing (durably) any entries of
// the log at or after entries[0]'s index: raft's log truncation, when a new
// leader overwrites a follower's uncommitted suffix. Entries below
// FirstIndex() are skipped, as raft.MemoryStorage does.
func (s *Storage) Append(entries []*pb.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	return s.appendLocked(entries)
}

func (s *Storage) appendLocked(entries []*pb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	first := s.offset() + 1
	if last := entries[len(entries)-1].GetIndex(); last < first {
		return nil
	}
	if entries[0].GetIndex() < first {
		entries = entries[first-entries[0].GetIndex():]
	}
	frames, err := s.checkAppend(entries)
	if err != nil {
		return err
	}
	if at := entries[0].GetIndex(); at <= s.lastIndex() {
		if err := s.truncateFrom(at); err != nil {
			return s.fail(err)
		}
	}
	if err := s.writeFrames(frames, entries); err != nil {
		return s.fail(err)
	}
	keep := entries[0].GetIndex() - s.offset()
	if keep < uint64(len(s.entries)) {
		// Overwriting: copy, because slices returned by Entries may
		// still refer to the entries being replaced.
		s.entries = append(s.entries[:keep:keep], entries...)
	} else {
		s.entries = append(s.entries, entries...)
	}
	s.maybeAssertInvariants("append")
	return nil
}

// checkAppend validates entries against the log before anything is
// written (raft never asks for what it refuses) and returns their frames.
func (s *Storage) checkAppend(entries []*pb.Entry) ([][]byte, error) {
	at := entries[0].GetIndex()
	if at > s.lastIndex()+1 {
		return nil, fmt.Errorf("%w: append at %d leaves a gap after the last index %d", ErrInvalidWrite, at, s.lastIndex())
	}
	if at <= s.hardState.GetCommit() && at <= s.lastIndex() {
		return nil, fmt.Errorf("%w: append at %d would truncate entries committed up to %d", ErrInvalidWrite, at, s.hardState.GetCommit())
	}
	if snapshot := s.snapshot.GetMetadata().GetIndex(); at <= snapshot && at <= s.lastIndex() {
		return nil, fmt.Errorf("%w: append at %d would truncate entries covered by the snapshot at %d", ErrInvalidWrite, at, snapshot)
	}
	term := s.entries[at-1-s.offset()].GetTerm()
	frames := make([][]byte, len(entries))
	for i, entry := range entries {
		if entry.GetIndex() != at+uint64(i) {
			return nil, fmt.Errorf("%w: entry %d where %d was expected", ErrInvalidWrite, entry.GetIndex(), at+uint64(i))
		}
		if entry.GetTerm() < term {
			return nil, fmt.Errorf("%w: entry %d has term %d after term %d", ErrInvalidWrite, entry.GetIndex(), entry.GetTerm(), term)
		}
		term = entry.GetTerm()
		frame, err := encodeEntry(nil, entry, s.cfg.MaxEntryBytes)
		if err != nil {
			return nil, err
		}
		frames[i] = frame
	}
	return frames, nil
}

// truncateFrom removes entries at and after index from the segments. The
// removal of whole later segments is made durable (SyncDir) before the
// segment holding index is cut: otherwise a crash could keep an old later
// segment after a rewritten shorter tail, and the log would splice old
// entries onto new ones. The cut itself is synced with the appends that
// follow it.
func (s *Storage) truncateFrom(index uint64) error {
	keep := len(s.segments)
	for keep > 1 && s.segments[keep-1].header.base > index {
		keep--
	}
	if keep < len(s.segments) {
		for i := len(s.segments) - 1; i >= keep; i-- {
			if err := s.removeSegment(s.segments[i]); err != nil {
				return err
			}
		}
		s.segments = s.segments[:keep]
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			return err
		}
	}
	last := s.segments[len(s.segments)-1]
	position := last.positionOf(index)
	if err := last.file.Truncate(position); err != nil {
		return err
	}
	last.size = position
	last.ends = last.ends[:index-last.header.base]
	last.lastTerm = last.header.termBefore
	if len(last.ends) > 0 {
		last.lastTerm = s.entries[index-1-s.offset()].GetTerm()
	}
	return nil
}

func (s *Storage) removeSegment(segment *segment) error {
	if err := segment.file.Close(); err != nil {
		return err
	}
	return s.cfg.FS.Remove(segment.name)
}

// writeFrames appends the frames of entries to the last segment, rolling to
// new segments as they fill. One Write per segment, so that a crash tears at
// most the end of the log. A full segment is synced before the next is
// created, which is what lets recovery treat damage in any segment but the
// last as corruption. The directory is synced after a roll, so that the new
// segment's name is as durable as its bytes.
func (s *Storage) writeFrames(frames [][]byte, entries []*pb.Entry) error {
	rolled := false
	var pending []byte
	active := s.segments[len(s.segments)-1]
	for i, frame := range frames {
		if active.size+int64(len(pending)+len(frame)) > s.cfg.SegmentBytes && active.size+int64(len(pending)) > segmentHeaderBytes {
			next, err := s.roll(active, pending, entries[i])
			if err != nil {
				return err
			}
			active, pending, rolled = next, nil, true
		}
		pending = append(pending, frame...)
		active.ends = append(active.ends, active.size+int64(len(pending)))
		active.lastTerm = entries[i].GetTerm()
	}
	if err := writeAndSync(active, pending); err != nil {
		return err
	}
	if rolled {
		return s.cfg.FS.SyncDir(s.cfg.Dir)
	}
	return nil
}

// roll writes and syncs pending to the full segment active and creates the
// segment that starts with entry next.
func (s *Storage) roll(active *segment, pending []byte, next *pb.Entry) (*segment, error) {
	if err := writeAndSync(active, pending); err != nil {
		return nil, err
	}
	segment, err := createSegment(s.cfg.FS, s.cfg.Dir, segmentHeader{base: next.GetIndex(), termBefore: active.lastTerm})
	if err != nil {
		return nil, err
	}
	s.segments = append(s.segments, segment)
	return segment, nil
}

func writeAndSync(segment *segment, data []byte) error {
	if len(data) > 0 {
		if _, err := segment.file.Write(data); err != nil {
			return err
		}
		segment.size += int64(len(data))
	}
	return segment.file.Sync()
}

// SetHardState durably replaces the hard state. An empty or unchanged one
// writes nothing. It refuses (ErrInvalidWrite) a term that goes back, a vote
// changed within a term (two votes in one term are how a crash breaks
// election safety, Raft thesis section 3.6), a commit that goes back, and a
// commit beyond the last index.
func (s *Storage) SetHardState(hardState *pb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	return s.setHardStateLocked(hardState)
}

func (s *Storage) setHardStateLocked(hardState *pb.HardState) error {
	if raft.IsEmptyHardState(hardState) || (s.hardState != nil && hardStateValues(hardState) == hardStateValues(s.hardState)) {
		return nil
	}
	if err := checkHardState(s.hardState, hardState, s.lastIndex()); err != nil {
		return err
	}
	saved := proto.Clone(hardState).(*pb.HardState)
	if err := writeMessageFile(s.cfg.FS, s.cfg.Dir, hardStateName, kindHardState, saved); err != nil {
		return s.fail(err)
	}
	s.hardState = saved
	return nil
}

// checkHardState returns why next may not follow previous (nil if none).
func checkHardState(previous, next *pb.HardState, lastIndex uint64) error {
	switch {
	case next.GetTerm() < previous.GetTerm():
		return fmt.Errorf("%w: hard state term %d after term %d", ErrInvalidWrite, next.GetTerm(), previous.GetTerm())
	case next.GetTerm() == previous.GetTerm() && previous.GetVote() != 0 && next.GetVote() != previous.GetVote():
		return fmt.Errorf("%w: vote changed from %d to %d in term %d", ErrInvalidWrite, previous.GetVote(), next.GetVote(), next.GetTerm())
	case next.GetCommit() < previous.GetCommit():
		return fmt.Errorf("%w: commit %d after commit %d", ErrInvalidWrite, next.GetCommit(), previous.GetCommit())
	case next.GetCommit() > lastIndex:
		return fmt.Errorf("%w: commit %d beyond the last index %d", ErrInvalidWrite, next.GetCommit(), lastIndex)
	}
	return nil
}
