package raftlog

import (
	"fmt"
	"path"

	"github.com/tidelog/tide/internal/invariants"
	pb "go.etcd.io/raft/v3/raftpb"
)

// reconcileWithSnapshot makes the recovered log agree with the snapshot and
// sets s.entries. The log must reach back to the snapshot (nothing else
// holds the entries between them). If it does not hold the snapshot's
// index with the snapshot's term, a crash interrupted ApplySnapshot after
// the snapshot file was replaced, and the log is restarted empty after the
// snapshot, as ApplySnapshot would have left it. Otherwise the log is kept
// whole: by raft's log matching property the entries after the snapshot's
// index continue the state the snapshot holds.
func (s *Storage) reconcileWithSnapshot(entries []*pb.Entry) error {
	index, term := s.snapshot.GetMetadata().GetIndex(), s.snapshot.GetMetadata().GetTerm()
	if len(s.segments) == 0 {
		return s.resetLog(index, term)
	}
	first := s.segments[0]
	if first.header.base-1 > index {
		return &CorruptionError{File: first.name, Index: first.header.base, Cause: fmt.Errorf(
			"%w: the log starts at index %d but the snapshot only covers up to %d", ErrDamaged, first.header.base, index)}
	}
	last := s.segments[len(s.segments)-1].lastIndex()
	matches := false
	switch {
	case index == first.header.base-1:
		matches = first.header.termBefore == term
	case index <= last:
		matches = entries[index-first.header.base].GetTerm() == term
	}
	if !matches {
		s.recovery.LogResetToSnapshot = true
		s.recovery.RemovedSegments += len(s.segments)
		return s.resetLog(index, term)
	}
	s.entries = make([]*pb.Entry, 0, 1+len(entries))
	s.entries = append(s.entries, &pb.Entry{Index: new(first.header.base - 1), Term: new(first.header.termBefore)})
	s.entries = append(s.entries, entries...)
	return nil
}

// checkRecovered checks what the files say together: the hard state's
// commit index lies within the log (entries are synced before the hard
// state that commits them, so a commit beyond the log means lost durable
// entries). With the invariants build tag it also checks the whole
// in-memory structure.
func (s *Storage) checkRecovered() error {
	if commit := s.hardState.GetCommit(); commit > s.lastIndex() {
		return &CorruptionError{File: path.Join(s.cfg.Dir, hardStateName), Index: commit, Cause: fmt.Errorf(
			"%w: commit index %d beyond the last index %d", ErrDamaged, commit, s.lastIndex())}
	}
	s.maybeAssertInvariants("recovery")
	return nil
}

// maybeAssertInvariants walks the whole structure (assertInvariants) in
// builds with the invariants tag, after every write and at recovery.
func (s *Storage) maybeAssertInvariants(when string) {
	if invariants.Enabled {
		s.assertInvariants(when)
	}
}

// assertInvariants panics when the in-memory state contradicts itself
// (see Storage): that is a bug in this package, and carrying on could hand
// raft a log that is not on disk.
func (s *Storage) assertInvariants(when string) {
	for i := 1; i < len(s.entries); i++ {
		previous, entry := s.entries[i-1], s.entries[i]
		if entry.GetIndex() != previous.GetIndex()+1 || entry.GetTerm() < previous.GetTerm() {
			panic(fmt.Sprintf("raftlog: %s: entry (%d, %d) after (%d, %d)", when, entry.GetIndex(), entry.GetTerm(), previous.GetIndex(), previous.GetTerm()))
		}
	}
	for i, segment := range s.segments {
		if i > 0 && segment.header.base != s.segments[i-1].lastIndex()+1 {
			panic(fmt.Sprintf("raftlog: %s: segment %d starts at %d after %d", when, i, segment.header.base, s.segments[i-1].lastIndex()))
		}
	}
	if s.segments[0].header.base > s.offset()+1 || s.segments[len(s.segments)-1].lastIndex() != s.lastIndex() {
		panic(fmt.Sprintf("raftlog: %s: segments hold [%d, %d], the log is [%d, %d]", when, s.segments[0].header.base, s.segments[len(s.segments)-1].lastIndex(), s.offset()+1, s.lastIndex()))
	}
	if index := s.snapshot.GetMetadata().GetIndex(); index < s.offset() || index > s.lastIndex() {
		panic(fmt.Sprintf("raftlog: %s: snapshot at %d outside [%d, %d]", when, index, s.offset(), s.lastIndex()))
	}
}
