package commitlog

import (
	"fmt"
	"slices"
)

// A roll only decides (docs/storage.md, "The sync pipeline"): it adds the
// closing segment's final time index entry in memory, creates the next
// segment's files (a metadata operation, on the loop) and appends the
// closed segment to rolled. What the roll used to do inline, the next sync
// job carries: the closed segment's pending bytes and index entries, its
// fsync (segment and both index files), the directory sync that makes the
// new segment's name durable, and then the offsets checkpoint with the
// recovery point at the new segment's base offset. The recovery point
// moves only at that job's completion: recovery trusts the segments below
// it without reading them, so a recovery point past bytes a crash can
// lose would serve a hole as data. A crash before the job leaves the
// recovery point below the closed segment, and recovery scans it and cuts
// its unsynced tail and the segments after it (scanFrom, cutTail).
//
// The rare steps that sync inline (syncActiveLocked: a truncation, a log
// start move past the durable end, Close) and those that write the
// checkpoint or rewrite segments (a log start move, Checkpoint, the
// cleaner) settle the rolled segments inline first (settleRolledLocked).

// isRolledLocked reports whether s is a rolled segment not yet settled.
func (l *Log) isRolledLocked(s *segment) bool {
	return slices.Contains(l.rolled, s)
}

// pruneRolledLocked forgets rolled segments that are no longer inactive
// segments of the log: removed (a truncation, a log start move), or made
// the active one again by a truncation.
func (l *Log) pruneRolledLocked() {
	active := l.segments[len(l.segments)-1]
	l.rolled = slices.DeleteFunc(l.rolled, func(s *segment) bool {
		return s == active || !slices.Contains(l.segments, s)
	})
	if len(l.rolled) == 0 {
		l.rolled = nil
	}
}

// settleRolledLocked does inline what the next job would do for the
// rolled segments: it drains every pending byte and entry, syncs each
// rolled segment and its indexes, syncs the directory and spills their
// indexes. It leaves the checkpoint to its caller. For the rare steps
// only; a failure fails the log.
func (l *Log) settleRolledLocked() error {
	l.pruneRolledLocked()
	if len(l.rolled) == 0 {
		return nil
	}
	if err := l.drainLocked(); err != nil {
		return err
	}
	for _, s := range l.rolled {
		if err := s.sync(); err != nil {
			return l.failLocked(fmt.Errorf("sync rolled segment %s: %w", segmentFileName(s.baseOffset), err))
		}
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		return l.failLocked(fmt.Errorf("sync dir: %w", err))
	}
	last := l.rolled[len(l.rolled)-1]
	l.durableEndOffset = max(l.durableEndOffset, last.nextOffset)
	for _, s := range l.rolled {
		s.spillIndexes()
	}
	l.rolled = nil
	return nil
}

// completeRolledLocked takes a completed job's rolled segments off the
// list and spills their indexes, whose entries the job wrote.
func (l *Log) completeRolledLocked(job SyncJob) {
	for _, s := range job.rolled {
		if !l.isRolledLocked(s) {
			continue // settled inline since the job began
		}
		if s.pendingBytes() > 0 || s.pendingIndexEntries() > 0 {
			panic(fmt.Sprintf("commitlog: rolled segment %d completed with %d bytes and %d index entries pending", s.baseOffset, s.pendingBytes(), s.pendingIndexEntries()))
		}
		s.spillIndexes()
	}
	l.rolled = slices.DeleteFunc(l.rolled, func(s *segment) bool { return slices.Contains(job.rolled, s) })
	if len(l.rolled) == 0 {
		l.rolled = nil
	}
}
