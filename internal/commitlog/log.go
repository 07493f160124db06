// Package commitlog is one partition replica's log on disk, as Kafka keeps
// it: segments of record batches named by base offset, holding the batches'
// bytes exactly as received (until the log cleaner of a compacted topic,
// cleaner*.go, rewrites them); a sparse offset index per segment; the
// leader-epoch cache with its checkpoint; and a checkpoint of the high
// watermark, recovery point and log start offset.
//
// The log knows nothing of replication rules: it appends, reads, truncates,
// syncs and recovers, and reports its log end offset separately from its
// durable (synced) end offset so that the replication core can count only
// durable data toward the high watermark. docs/storage.md describes the
// format, recovery and the durability contract.
package commitlog

import (
	"fmt"
	"sync"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

// Log is one partition replica's log. Its methods are safe for concurrent
// use: appends, truncations, syncs and retention are serialised, and reads
// run alongside each other; a sync job (sync.go) runs alongside all of them
// but rolls, truncations, deletions and Close, which drain the appended
// bytes into the files themselves. An append copies its batches into
// memory and a sync job writes them (pending.go). The log syncs only when
// asked (BeginSync, Sync), when a segment rolls, and at Close; when to
// sync is the caller's decision (the broker's group commit), since only it
// knows who waits for durability.
type Log struct {
	cfg Config
	// limits are the checks every appended batch gets, and every batch
	// recovery reads back: framing, CRC and header fields, not dense (a
	// compacted leader's batches need not be).
	limits record.Limits

	mu     sync.RWMutex
	closed bool
	// syncMu is held by a SyncJob while it writes and syncs, and taken
	// (after mu) by the steps that drain the pending bytes (drainLocked)
	// or truncate, delete or close files, which start a new syncGeneration
	// (invalidateSyncsLocked): no job writes or syncs a file those steps
	// closed, and none completes with offsets they changed. It guards each
	// segment's written length.
	// syncGeneration is written holding both mu and syncMu, so either
	// lock reads it.
	syncMu         sync.Mutex
	syncGeneration uint64
	// failure is set once a write or sync failed; every later operation
	// returns it (see ErrLogFailed).
	failure error

	// segments are sorted by base offset and contiguous; the last is the
	// active segment that takes appends. There is always at least one.
	segments []*segment
	// rolled are the segments a roll closed that no sync has settled yet
	// (rolled.go), oldest first: only they and the active segment may
	// hold pending bytes or index entries, or unsynced files.
	rolled []*segment
	// checkpointSequence counts the offsets checkpoints written on the
	// owner's goroutine; it is written holding both mu and syncMu. A sync
	// job writes its checkpoint only when none came since it began, so a
	// job never overwrites a newer checkpoint with older values.
	checkpointSequence uint64
	epochs             leaderepoch.Cache
	// cursors are where recent reads ended, so that the next read from
	// there skips the index lookup (readcursor.go).
	cursors readCursors

	logStartOffset record.Offset
	// durableEndOffset is the offset below which every byte is synced.
	// Invariant: logStartOffset <= durableEndOffset <= log end offset.
	durableEndOffset record.Offset
	// recoveryPoint is the recovery point the offsets checkpoint holds:
	// every segment below it is durable with its indexes and its name.
	recoveryPoint record.Offset
	// highWatermark is what the replication layer last set. The log keeps
	// it at or below the log end offset.
	highWatermark record.Offset
	recovery      RecoveryReport
	// cleaner is the log cleaner's state (cleaner*.go).
	cleaner cleanerState
	// clockMs is the time its owner last gave the log (SetClock), or -1.
	clockMs int64
}

// AppendResult says where an append landed: offsets [BaseOffset, NextOffset).
type AppendResult struct {
	BaseOffset record.Offset
	NextOffset record.Offset
	// Batches is the number of record batches appended.
	Batches int
}

// LogStartOffset is the first offset the log holds.
func (l *Log) LogStartOffset() record.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() record.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logEndOffsetLocked()
}

func (l *Log) logEndOffsetLocked() record.Offset {
	return l.segments[len(l.segments)-1].nextOffset
}

// DurableEndOffset is the offset below which everything is synced: what
// survives a power loss, and so what may count toward the high watermark
// with flush=always.
func (l *Log) DurableEndOffset() record.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durableEndOffset
}

// HighWatermark is the high watermark last set with SetHighWatermark (or
// recovered from the checkpoint), clamped to the log end offset.
func (l *Log) HighWatermark() record.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.highWatermark
}

// RecoveryPoint is the offset below which the last checkpoint vouches for
// synced data; recovery scans from the segment holding it.
func (l *Log) RecoveryPoint() record.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// Recovery describes what Open found and repaired.
func (l *Log) Recovery() RecoveryReport {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recovery
}

// Epochs returns the leader-epoch cache's entries, oldest first.
func (l *Log) Epochs() []leaderepoch.Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// LatestEpoch is the newest leader epoch in the epoch cache, or
// record.NoLeaderEpoch when there is none.
func (l *Log) LatestEpoch() record.LeaderEpoch {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.LatestEpoch()
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch from the epoch cache; see
// leaderepoch.Cache.EndOffsetFor.
func (l *Log) EndOffsetForEpoch(epoch record.LeaderEpoch) (record.LeaderEpoch, record.Offset) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(epoch, l.logEndOffsetLocked())
}

// Segments returns the number of segments.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

// SizeBytes is the total size of the log's segments.
func (l *Log) SizeBytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	return total
}

// SetHighWatermark records the high watermark the replication layer has
// decided on. It must lie within [log start offset, log end offset]. The log
// does not enforce monotonicity (a follower's high watermark may go back
// after a failover); the replication core does for the leader. The value is
// persisted by the next Checkpoint, capped at the durable end offset.
func (l *Log) SetHighWatermark(offset record.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < l.logStartOffset || offset > l.logEndOffsetLocked() {
		return fmt.Errorf("%w: high watermark %d outside [%d, %d]", ErrOffsetOutOfRange, offset, l.logStartOffset, l.logEndOffsetLocked())
	}
	l.highWatermark = offset
	return nil
}

// usableLocked returns the error every operation returns on a closed or
// failed log.
func (l *Log) usableLocked() error {
	if l.failure != nil {
		return l.failure
	}
	if l.closed {
		return ErrClosed
	}
	return nil
}

// failLocked marks the log failed by cause and returns the error to report.
func (l *Log) failLocked(cause error) error {
	if l.failure == nil {
		l.failure = &failedError{cause: cause}
	}
	return l.failure
}

// AssignEpochStartOffset records that leader epoch begins at the log end
// offset. A new leader calls it before its first write in a new epoch
// (KAFKA-7415), so that it can answer where every earlier epoch ended even
// before it has appended anything.
func (l *Log) AssignEpochStartOffset(epoch record.LeaderEpoch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if epoch < l.epochs.LatestEpoch() {
		return fmt.Errorf("%w: epoch %d below latest %d", ErrEpochRegression, epoch, l.epochs.LatestEpoch())
	}
	return l.assignEpochLocked(epoch, l.logEndOffsetLocked())
}

// assignEpochLocked updates the epoch cache and, when it changed, writes its
// checkpoint before returning, so that no batch of a new epoch is on disk
// without the cache knowing where the epoch began.
func (l *Log) assignEpochLocked(epoch record.LeaderEpoch, start record.Offset) error {
	if !l.epochs.Assign(epoch, start) {
		return nil
	}
	return l.writeEpochCheckpointLocked()
}

func (l *Log) writeEpochCheckpointLocked() error {
	if err := disk.WriteFileAtomically(l.cfg.FS, l.cfg.Dir, epochCheckpointName, l.epochs.MarshalCheckpoint()); err != nil {
		return l.failLocked(fmt.Errorf("write epoch checkpoint: %w", err))
	}
	return nil
}

// Checkpoint persists the high watermark, recovery point and log start
// offset. The high watermark written is capped at the durable end offset, so
// a checkpoint never claims as committed what this disk might not hold.
func (l *Log) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	// The recovery point vouches for the segments below it, indexes and
	// names included: the rolled ones are settled first. At the log end
	// it vouches for the active segment too, once a later segment exists.
	if l.durableEndOffset == l.logEndOffsetLocked() {
		if err := l.finishActiveTimeIndexLocked(); err != nil {
			return err
		}
	} else if err := l.settleRolledLocked(); err != nil {
		return err
	}
	l.recoveryPoint = l.durableEndOffset
	return l.writeOffsetsCheckpointLocked()
}

// offsetsCheckpointLocked is the checkpoint of the log's offsets with the
// recovery point recoveryPoint.
func (l *Log) offsetsCheckpointLocked(recoveryPoint record.Offset) offsetsCheckpoint {
	return offsetsCheckpoint{
		HighWatermark:  min(l.highWatermark, recoveryPoint),
		RecoveryPoint:  recoveryPoint,
		LogStartOffset: l.logStartOffset,
	}
}

// writeOffsetsCheckpointLocked writes the checkpoint on the owner's
// goroutine. It takes syncMu, as a job writing its checkpoint does, and
// counts the write, so that a job begun before writes none over it.
func (l *Log) writeOffsetsCheckpointLocked() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.checkpointSequence++
	checkpoint := l.offsetsCheckpointLocked(l.recoveryPoint)
	if err := disk.WriteFileAtomically(l.cfg.FS, l.cfg.Dir, offsetsCheckpointName, checkpoint.marshal()); err != nil {
		return l.failLocked(fmt.Errorf("write offsets checkpoint: %w", err))
	}
	return nil
}

// Close syncs the log, writes its checkpoints and closes its files. The log
// is unusable afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	// The drain leaves every appended byte in the files, synced or not,
	// as a write(2) per append did: Close without Sync loses nothing to
	// a process exit. A failed log writes nothing more.
	failed := l.failure != nil
	err := l.invalidateSyncsLocked()
	if failed {
		err = nil
	}
	if err == nil && l.failure == nil {
		if err = l.finishActiveTimeIndexLocked(); err == nil {
			l.recoveryPoint = l.durableEndOffset
			err = l.writeOffsetsCheckpointLocked()
		}
	}
	for _, s := range l.segments {
		if closeErr := s.close(); err == nil {
			err = closeErr
		}
	}
	if closeErr := l.closeRetiredLocked(); err == nil {
		err = closeErr
	}
	l.closed = true
	return err
}

// syncActiveLocked drains the pending bytes into the files, settles the
// rolled segments and syncs the active segment and its index while
// holding the lock, on the owner's goroutine: for truncation, retention
// and close, which are rare.
func (l *Log) syncActiveLocked() error {
	if err := l.drainLocked(); err != nil {
		return err
	}
	if err := l.settleRolledLocked(); err != nil {
		return err
	}
	if err := l.segments[len(l.segments)-1].sync(); err != nil {
		return l.failLocked(fmt.Errorf("sync: %w", err))
	}
	l.durableEndOffset = l.logEndOffsetLocked()
	return nil
}

// finishActiveTimeIndexLocked adds the active segment's final time index
// entry (its largest timestamp), then syncs the log (syncActiveLocked):
// before a recovery point at the log end is checkpointed. Once a later
// segment exists, recovery trusts the active one below such a recovery
// point and takes its largest timestamp from its time index's last entry;
// a roll adds that entry, but the new segment's name may reach the disk
// before the job that syncs the entry does.
func (l *Log) finishActiveTimeIndexLocked() error {
	if err := l.segments[len(l.segments)-1].indexFinalTimestamp(); err != nil {
		return l.failLocked(fmt.Errorf("time index: %w", err))
	}
	return l.syncActiveLocked()
}

// String describes the log's offsets, for tests and debugging.
func (l *Log) String() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return fmt.Sprintf("log-start=%d durable-end=%d log-end=%d high-watermark=%d recovery-point=%d segments=%d",
		l.logStartOffset, l.durableEndOffset, l.logEndOffsetLocked(), l.highWatermark, l.recoveryPoint, len(l.segments))
}
