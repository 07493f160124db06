package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// AdvanceLogStartOffset moves the log start offset up to offset (Kafka's
// DeleteRecords) and deletes the segments wholly below it. offset must not
// pass the high watermark: only committed records may be deleted.
func (l *Log) AdvanceLogStartOffset(offset record.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset <= l.logStartOffset {
		return nil
	}
	if offset > l.highWatermark {
		return fmt.Errorf("%w: log start %d above high watermark %d", ErrOffsetOutOfRange, offset, l.highWatermark)
	}
	return l.moveLogStartLocked(offset)
}

// EnforceRetention deletes the oldest segments that retention by size or by
// age no longer wants, and returns how many it deleted. It never deletes the
// active segment, nor a segment holding any offset at or above the high
// watermark, so uncommitted records are never deleted by retention.
func (l *Log) EnforceRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	deletable := 0
	for deletable < len(l.segments)-1 {
		s, next := l.segments[deletable], l.segments[deletable+1]
		if next.baseOffset > l.highWatermark {
			break
		}
		overSize := l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		expired, err := l.expiredLocked(s)
		if err != nil {
			return 0, err
		}
		if !overSize && !expired {
			break
		}
		total -= s.size
		deletable++
	}
	if deletable == 0 {
		return 0, nil
	}
	return deletable, l.moveLogStartLocked(l.segments[deletable].baseOffset)
}

// expiredLocked reports whether every record in s is older than the
// retention age. The segment's newest timestamp is found by scanning its
// batch headers the first time it is needed.
func (l *Log) expiredLocked(s *segment) (bool, error) {
	if l.cfg.RetentionAge <= 0 {
		return false, nil
	}
	if !s.maxTimestampKnown {
		for position := int64(0); position < s.size; {
			header, err := s.readHeader(position)
			if err != nil {
				return false, fmt.Errorf("retention scan of %s: %w", segmentFileName(s.baseOffset), err)
			}
			s.maxTimestampMs = max(s.maxTimestampMs, header.MaxTimestampMs)
			position += batchSize(header)
		}
		s.maxTimestampKnown = true
	}
	if s.maxTimestampMs < 0 {
		return false, nil
	}
	cutoffMs := l.cfg.Now().Add(-l.cfg.RetentionAge).UnixMilli()
	return s.maxTimestampMs < cutoffMs, nil
}

// moveLogStartLocked checkpoints the new log start offset first, then deletes
// the segments wholly below it, oldest first; recovery finishes a deletion
// that a crash interrupted.
func (l *Log) moveLogStartLocked(offset record.Offset) error {
	if offset > l.durableEndOffset {
		// The checkpoint must never name a log start beyond what a crash
		// keeps, or the recovered log would start past its own end.
		if err := l.syncActiveLocked(); err != nil {
			return err
		}
	}
	l.logStartOffset = offset
	l.highWatermark = max(l.highWatermark, offset)
	l.recoveryPoint = max(l.recoveryPoint, min(offset, l.durableEndOffset))
	if err := l.writeOffsetsCheckpointLocked(); err != nil {
		return err
	}
	if l.epochs.TruncateFromStart(offset) {
		if err := l.writeEpochCheckpointLocked(); err != nil {
			return err
		}
	}
	removed := 0
	for removed < len(l.segments)-1 && l.segments[removed+1].baseOffset <= offset {
		if err := l.segments[removed].remove(l.cfg.FS, l.cfg.Dir); err != nil {
			return l.failLocked(fmt.Errorf("delete segment: %w", err))
		}
		removed++
	}
	l.segments = l.segments[removed:]
	l.assertInvariantsLocked("move log start")
	if removed > 0 {
		if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
			return l.failLocked(fmt.Errorf("sync dir: %w", err))
		}
	}
	return nil
}
