package commitlog

import (
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

// TruncateTo removes the log's suffix from offset on: every batch whose last
// offset is at or above offset. A batch that straddles offset goes whole, so
// the new log end offset, which TruncateTo returns, may be below offset.
// Truncating past the log end offset changes nothing; truncating at it drops
// only an epoch-cache entry that starts there.
//
// The truncation is durable when TruncateTo returns: a crash never brings
// back a removed suffix, which a later append would otherwise interleave
// with. Whether a truncation is allowed (never below a high watermark a
// leader has served) is the replication layer's rule, not the log's.
func (l *Log) TruncateTo(offset record.Offset) (record.Offset, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	if offset == l.logEndOffsetLocked() && l.epochs.TruncateFromEnd(offset) {
		// An epoch recorded at the log end with no batch yet (a leader's
		// KAFKA-7415 entry) goes, as with any suffix.
		return offset, l.writeEpochCheckpointLocked()
	}
	if offset >= l.logEndOffsetLocked() {
		return l.logEndOffsetLocked(), nil
	}
	if offset < l.logStartOffset {
		return 0, fmt.Errorf("%w: truncate to %d below log start %d", ErrOffsetOutOfRange, offset, l.logStartOffset)
	}
	newEnd, err := l.truncationPointLocked(offset)
	if err != nil {
		return 0, err
	}
	if newEnd < l.logStartOffset {
		// The only batch holding [log start, offset) straddles offset and
		// must go whole: nothing at or above the log start survives.
		return offset, l.truncateFullyAndStartAtLocked(offset)
	}
	// A sync begun before this names offsets that are about to hold other
	// records, and maybe files about to be removed; the drain makes the
	// files whole before they are cut.
	if err := l.invalidateSyncsLocked(); err != nil {
		return 0, err
	}
	// Lower the checkpointed offsets and drop the epochs of the suffix
	// first: a crash part-way then leaves checkpoints that are merely
	// conservative, never ones that point past the log.
	if err := l.lowerOffsetsLocked(newEnd); err != nil {
		return 0, err
	}
	if l.epochs.TruncateFromEnd(newEnd) {
		if err := l.writeEpochCheckpointLocked(); err != nil {
			return 0, err
		}
	}
	if err := l.removeSegmentsFromLocked(newEnd); err != nil {
		return 0, err
	}
	active := l.segments[len(l.segments)-1]
	l.syncMu.Lock() // the segment's written length changes with the file
	_, err = active.truncateTo(newEnd)
	l.syncMu.Unlock()
	if err != nil {
		return 0, l.failLocked(fmt.Errorf("truncate %s: %w", segmentFileName(active.baseOffset), err))
	}
	if err := l.syncActiveLocked(); err != nil {
		return 0, err
	}
	if l.logEndOffsetLocked() != newEnd {
		panic(fmt.Sprintf("commitlog: truncated to %d, expected %d", l.logEndOffsetLocked(), newEnd))
	}
	l.assertInvariantsLocked("truncate")
	return newEnd, nil
}

// truncationPointLocked returns where truncating at offset will end the log:
// the base offset of the batch holding offset, or offset itself when a batch
// starts there.
func (l *Log) truncationPointLocked(offset record.Offset) (record.Offset, error) {
	s := l.segments[l.segmentIndexLocked(offset)]
	found, ok, err := s.find(offset)
	if err != nil {
		return 0, l.failLocked(fmt.Errorf("truncate: %w", err))
	}
	if !ok {
		return s.nextOffset, nil
	}
	return found.header.BaseOffset, nil
}

// lowerOffsetsLocked caps the high watermark, recovery point and durable end
// at offset, and checkpoints when a checkpointed value moved.
func (l *Log) lowerOffsetsLocked(offset record.Offset) error {
	l.durableEndOffset = min(l.durableEndOffset, offset)
	if l.highWatermark <= offset && l.recoveryPoint <= offset {
		return nil
	}
	l.highWatermark = min(l.highWatermark, offset)
	l.recoveryPoint = min(l.recoveryPoint, offset)
	return l.writeOffsetsCheckpointLocked()
}

// removeSegmentsFromLocked deletes, newest first, every segment whose base
// offset is at or above offset, keeping at least one, and makes the removal
// durable. Removing newest first means a crash part-way leaves a prefix of
// the log.
func (l *Log) removeSegmentsFromLocked(offset record.Offset) error {
	removed := false
	for len(l.segments) > 1 && l.segments[len(l.segments)-1].baseOffset >= offset {
		last := l.segments[len(l.segments)-1]
		l.segments = l.segments[:len(l.segments)-1]
		if err := last.remove(l.cfg.FS, l.cfg.Dir); err != nil {
			return l.failLocked(fmt.Errorf("remove segment: %w", err))
		}
		removed = true
	}
	l.pruneRolledLocked()
	if !removed {
		return nil
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		return l.failLocked(fmt.Errorf("sync dir: %w", err))
	}
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, with an
// empty epoch cache: what a follower does when the leader no longer has the
// offsets it would fetch next (its log start offset is above the follower's
// log end offset).
func (l *Log) TruncateFullyAndStartAt(offset record.Offset) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.truncateFullyAndStartAtLocked(offset)
}

func (l *Log) truncateFullyAndStartAtLocked(offset record.Offset) error {
	if err := l.invalidateSyncsLocked(); err != nil {
		return err
	}
	l.epochs = leaderepoch.Cache{}
	if err := l.writeEpochCheckpointLocked(); err != nil {
		return err
	}
	fresh, err := createSegment(l.cfg.FS, l.cfg.Dir, offset, l.clockMs)
	if err != nil {
		return l.failLocked(fmt.Errorf("start at %d: %w", offset, err))
	}
	var removeErr error
	for _, s := range l.segments {
		if s.baseOffset != offset {
			removeErr = errors.Join(removeErr, s.remove(l.cfg.FS, l.cfg.Dir))
		} else {
			removeErr = errors.Join(removeErr, s.close())
		}
	}
	l.segments, l.rolled = []*segment{fresh}, nil
	if removeErr != nil {
		return l.failLocked(fmt.Errorf("start at %d: %w", offset, removeErr))
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		return l.failLocked(fmt.Errorf("start at %d: sync dir: %w", offset, err))
	}
	l.logStartOffset, l.highWatermark = offset, offset
	l.durableEndOffset, l.recoveryPoint = offset, offset
	l.assertInvariantsLocked("truncate fully")
	return l.writeOffsetsCheckpointLocked()
}
