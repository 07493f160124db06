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

// Retention is what retention by time and size keeps of a partition's log:
// Kafka's retention.ms and retention.bytes (per partition). A negative
// value means no limit of that kind.
type Retention struct {
	Ms    int64
	Bytes int64
}

// EnforceRetention deletes the oldest segments that the log's configured
// retention (Config.RetentionBytes, RetentionAge) no longer wants at nowMs
// (milliseconds since the Unix epoch, the caller's clock), and returns how
// many it deleted. See RetentionOffset for which segments those are.
func (l *Log) EnforceRetention(nowMs int64) (int, error) {
	policy := Retention{Ms: l.cfg.RetentionAge.Milliseconds(), Bytes: l.cfg.RetentionBytes}
	offset, err := l.RetentionOffset(nowMs, policy)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil || offset <= l.logStartOffset || offset > l.highWatermark {
		return 0, err // nothing to do, or the high watermark moved back since
	}
	deleted := 0
	for _, s := range l.segments {
		if s.baseOffset < offset {
			deleted++
		}
	}
	return deleted, l.moveLogStartLocked(offset)
}

// RetentionOffset is the log start offset retention by time and size wants
// at nowMs: the base offset of the first segment to keep, or the log end
// offset when every record may go. It decides and changes nothing; the
// caller moves the log start (AdvanceLogStartOffset, through its replica,
// so that the replica's view of its log moves too). Kafka's rules
// (UnifiedLog.deletableSegments):
//
//   - Segments are considered oldest first, and the first one retention
//     keeps stops the scan: one segment with a far-future timestamp holds
//     back every later one, as in Kafka.
//   - By time: a segment expires when nowMs minus its largest record
//     timestamp exceeds policy.Ms. A segment with no timestamps never
//     expires (Kafka falls back to the file's mtime, which tide's disk
//     does not have).
//   - By size: the oldest segments go while the log without them is still
//     at least policy.Bytes.
//   - Rule retention-below-high-watermark: a segment is deletable only if
//     the high watermark has reached its end (the next segment's base, or
//     the log end for the active segment), so retention never deletes an
//     uncommitted record, which a new leader might still need (simulator
//     invariant 8).
func (l *Log) RetentionOffset(nowMs int64, policy Retention) (record.Offset, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	offset := l.logStartOffset
	for i, s := range l.segments {
		end := l.logEndOffsetLocked()
		if i+1 < len(l.segments) {
			end = l.segments[i+1].baseOffset
		}
		if s.size == 0 || end > l.highWatermark {
			break
		}
		overSize := policy.Bytes >= 0 && total-s.size >= policy.Bytes
		expired := policy.Ms >= 0 && s.maxTimestampMs >= 0 && nowMs-s.maxTimestampMs > policy.Ms
		if !overSize && !expired {
			break
		}
		total -= s.size
		offset = max(offset, end)
	}
	return offset, nil
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
	if active := l.segments[len(l.segments)-1]; offset == l.logEndOffsetLocked() && active.size > 0 {
		// Every record goes: start an empty segment at the log end first,
		// so that the log always has one and the old active one can be
		// deleted (Kafka rolls before deleting the active segment).
		if err := l.rollLocked(); err != nil {
			return err
		}
	}
	// The checkpoint below may move the recovery point past rolled
	// segments: they are settled first (rolled.go).
	if err := l.settleRolledLocked(); err != nil {
		return err
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
	if len(l.segments) > 1 && l.segments[1].baseOffset <= offset {
		if err := l.invalidateSyncsLocked(); err != nil { // a sync job may name a segment about to go
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
	l.pruneRolledLocked()
	l.assertInvariantsLocked("move log start")
	if removed > 0 {
		if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
			return l.failLocked(fmt.Errorf("sync dir: %w", err))
		}
	}
	return nil
}
