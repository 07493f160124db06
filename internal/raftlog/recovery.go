package raftlog

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
)

// RecoveryReport says what Open found and what it repaired.
type RecoveryReport struct {
	// SegmentsRead counts the segment files read, and EntriesRead the
	// entries decoded from them.
	SegmentsRead int
	EntriesRead  int
	// TruncatedBytes counts the bytes of a torn tail cut off the last
	// segment, and TailError says why it was cut (nil if nothing was).
	TruncatedBytes int64
	TailError      error
	// RemovedSegments counts segment files removed: a last segment whose
	// header was torn, or every segment when the log was reset.
	RemovedSegments int
	// LogResetToSnapshot is true when the log did not hold the snapshot's
	// index with the snapshot's term, which happens when a crash
	// interrupted ApplySnapshot after the snapshot file was replaced: the
	// log was restarted empty after the snapshot, as ApplySnapshot does.
	LogResetToSnapshot bool
	// RemovedTemporaryFiles counts leftovers of interrupted atomic file
	// replacements.
	RemovedTemporaryFiles int
}

// recover rebuilds the in-memory state from the files. It reads with the
// hard limits (EntryBytesMaxLimit, SnapshotBytesMaxLimit), not the
// configured ones: lowering MaxEntryBytes between runs must not make
// entries already written look damaged, and be cut from the tail. Reading
// stays bounded, by those limits and by the files' real sizes.
//
// It reads the snapshot and
// hard state (either missing or whole; any damage is a CorruptionError),
// then every segment in order. Damage in the last segment above the durable
// commit index, with nothing valid after it, is a torn tail from a crash
// during an append: it is cut and reported. Any other damage is a
// CorruptionError. Then the log is reconciled with the snapshot, the
// invariants of Storage are checked, and what recovery changed is synced.
func (s *Storage) recover() error {
	fs, dir := s.cfg.FS, s.cfg.Dir
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	bases, err := s.listAndCleanDirectory()
	if err != nil {
		return err
	}
	snapshot := &pb.Snapshot{}
	if found, err := readMessageFile(fs, path.Join(dir, snapshotName), kindSnapshot, SnapshotBytesMaxLimit, snapshot); err != nil {
		return err
	} else if found {
		s.snapshot = pb.EnsureSnapshot(snapshot)
	}
	hardState := &pb.HardState{}
	if found, err := readMessageFile(fs, path.Join(dir, hardStateName), kindHardState, hardStateBytesMax, hardState); err != nil {
		return err
	} else if found {
		s.hardState = hardState
	}
	entries, err := s.loadSegments(bases)
	if err != nil {
		return err
	}
	if err := s.reconcileWithSnapshot(entries); err != nil {
		return err
	}
	if err := s.checkRecovered(); err != nil {
		return err
	}
	// After a process crash (not a power loss) the page cache still holds
	// the dead process's unsynced writes, and recovery has just read them
	// as if durable: a last segment's tail, a renamed hard-state file
	// whose directory entry was not synced. Syncing them now, before raft
	// reads anything, stops the node from acknowledging or voting on
	// state that a later power loss would take back.
	if err := s.segments[len(s.segments)-1].file.Sync(); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// listAndCleanDirectory removes temporary files and returns the segments'
// base indexes in order. Other files are left alone.
func (s *Storage) listAndCleanDirectory() ([]uint64, error) {
	names, err := s.cfg.FS.List(s.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, name := range names {
		if base, ok := parseSegmentFileName(name); ok {
			bases = append(bases, base)
		}
		if strings.HasSuffix(name, temporarySuffix) {
			if err := s.cfg.FS.Remove(path.Join(s.cfg.Dir, name)); err != nil {
				return nil, err
			}
			s.recovery.RemovedTemporaryFiles++
		}
	}
	return bases, nil
}

// loadSegments opens and scans every segment, cutting a torn tail off the
// last, and returns their live entries in order.
func (s *Storage) loadSegments(bases []uint64) ([]*pb.Entry, error) {
	var entries []*pb.Entry
	for i, base := range bases {
		last := i == len(bases)-1
		segment, data, err := s.openSegment(base)
		if err != nil {
			return nil, err
		}
		s.recovery.SegmentsRead++
		header, err := decodeSegmentHeader(data)
		if err == nil && header.base != base {
			err = fmt.Errorf("%w: segment named for index %d says %d", ErrDamaged, base, header.base)
		}
		if err != nil {
			if err := s.maybeCutTail(segment, data, 0, base, last, err); err != nil {
				segment.file.Close()
				return nil, err
			}
			s.recovery.RemovedSegments++
			s.recovery.TruncatedBytes += int64(len(data))
			if err := s.removeSegment(segment); err != nil {
				return nil, err
			}
			break
		}
		segment.header = header
		s.segments = append(s.segments, segment)
		if err := s.checkFollows(segment, i); err != nil {
			return nil, err
		}
		result := scanSegment(data, header, EntryBytesMaxLimit)
		entries = append(entries, result.entries...)
		s.recovery.EntriesRead += len(result.entries)
		segment.ends, segment.lastTerm = result.ends, header.termBefore
		if len(result.entries) > 0 {
			segment.lastTerm = result.entries[len(result.entries)-1].GetTerm()
		}
		if result.damage == nil {
			continue
		}
		if err := s.maybeCutTail(segment, data, result.damagedAt, header.base+uint64(len(result.entries)), last, result.damage); err != nil {
			return nil, err
		}
		if err := segment.file.Truncate(result.damagedAt); err != nil {
			return nil, err
		}
		s.recovery.TruncatedBytes += segment.size - result.damagedAt
		segment.size = result.damagedAt
	}
	return entries, nil
}

// openSegment opens a segment file and reads it whole.
func (s *Storage) openSegment(base uint64) (*segment, []byte, error) {
	name := path.Join(s.cfg.Dir, segmentFileName(base))
	file, err := s.cfg.FS.Open(name)
	if err != nil {
		return nil, nil, err
	}
	size, err := file.Size()
	if err == nil && size > SegmentBytesMax {
		err = &CorruptionError{File: name, Cause: fmt.Errorf("%w: segment of %d bytes, at most %d expected", ErrDamaged, size, SegmentBytesMax)}
	}
	var data []byte
	if err == nil {
		data = make([]byte, size)
		if _, err = file.ReadAt(data, 0); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	return &segment{name: name, file: file, size: size}, data, nil
}

// maybeCutTail decides whether damage at position of a segment, where
// entry index was expected, is a torn tail that may be cut (nil) or
// corruption (a CorruptionError): see CorruptionError for the rules.
func (s *Storage) maybeCutTail(segment *segment, data []byte, position int64, index uint64, last bool, damage error) error {
	corrupt := func(why string) error {
		return &CorruptionError{File: segment.name, Position: position, Index: index, Cause: fmt.Errorf("%w (%s)", damage, why)}
	}
	switch {
	case !last:
		return corrupt("not the last segment, so it was synced")
	case index <= s.hardState.GetCommit():
		return corrupt(fmt.Sprintf("at or below the durable commit index %d", s.hardState.GetCommit()))
	case hasEntryAfter(data, position, EntryBytesMaxLimit):
		return corrupt("a valid entry follows it")
	}
	s.recovery.TailError = damage
	return nil
}

// checkFollows checks that segments[i] continues segments[i-1]: its base is
// the next index and its header knows the previous entry's term.
func (s *Storage) checkFollows(segment *segment, i int) error {
	if i == 0 {
		return nil
	}
	previous := s.segments[i-1]
	if segment.header.base != previous.lastIndex()+1 || segment.header.termBefore != previous.lastTerm {
		return &CorruptionError{File: segment.name, Index: segment.header.base, Cause: fmt.Errorf(
			"%w: segment starts at index %d after term %d, the previous one ends at index %d in term %d",
			ErrDamaged, segment.header.base, segment.header.termBefore, previous.lastIndex(), previous.lastTerm)}
	}
	return nil
}
