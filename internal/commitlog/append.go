package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// AppendAsLeader appends batches (one or more concatenated RecordBatch v2, as
// a produce request carries them) as the partition leader in epoch: it
// validates every batch, then assigns offsets from the log end offset and
// stamps epoch into each batch's header, in place. The records themselves are
// never re-encoded; the log takes ownership of batches.
//
// With FlushAlways it returns once the batches are durable.
func (l *Log) AppendAsLeader(batches []byte, epoch record.LeaderEpoch) (AppendResult, error) {
	if epoch < 0 {
		return AppendResult{}, fmt.Errorf("%w: leader append in epoch %d", ErrEpochRegression, epoch)
	}
	headers, err := l.validateAndLock(batches, l.leaderLimits)
	if err != nil {
		return AppendResult{}, err
	}
	if latest := l.epochs.LatestEpoch(); epoch < latest {
		l.mu.Unlock()
		return AppendResult{}, fmt.Errorf("%w: leader append in epoch %d, log has %d", ErrEpochRegression, epoch, latest)
	}
	next := l.logEndOffsetLocked()
	var position int64
	for i := range headers {
		batch := batches[position : position+batchSize(headers[i])]
		record.SetBaseOffset(batch, next)
		record.SetPartitionLeaderEpoch(batch, epoch)
		headers[i].BaseOffset = next
		headers[i].PartitionLeaderEpoch = epoch
		next = headers[i].NextOffset()
		position += batchSize(headers[i])
	}
	return l.appendAndMaybeSyncLocked(batches, headers)
}

// AppendAsFollower appends batches replicated from the leader, with the
// offsets and leader epochs the leader gave them. The first batch must start
// at the log end offset and each next one where the previous ended.
//
// With FlushAlways it returns once the batches are durable, so that the
// follower's next fetch offset, which tells the leader how far it has the
// data, never runs ahead of its disk.
func (l *Log) AppendAsFollower(batches []byte) (AppendResult, error) {
	headers, err := l.validateAndLock(batches, l.followerLimits)
	if err != nil {
		return AppendResult{}, err
	}
	next, latestEpoch := l.logEndOffsetLocked(), l.epochs.LatestEpoch()
	for _, header := range headers {
		if header.BaseOffset != next {
			l.mu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d, expected %d", ErrNotContiguous, header.BaseOffset, next)
		}
		if header.PartitionLeaderEpoch < latestEpoch || header.PartitionLeaderEpoch < 0 {
			l.mu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d has epoch %d, log has %d", ErrEpochRegression, header.BaseOffset, header.PartitionLeaderEpoch, latestEpoch)
		}
		next, latestEpoch = header.NextOffset(), header.PartitionLeaderEpoch
	}
	return l.appendAndMaybeSyncLocked(batches, headers)
}

// validateAndLock validates batches where they enter the log (outside the
// lock: it is the expensive part) and then takes the lock, which the caller
// must release, unless it returns an error.
func (l *Log) validateAndLock(batches []byte, limits record.Limits) ([]record.Header, error) {
	headers, err := record.ValidateAll(batches, limits)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	return headers, nil
}

// appendAndMaybeSyncLocked writes validated, stamped batches, then applies
// the flush mode. It is called with mu held and releases it.
func (l *Log) appendAndMaybeSyncLocked(batches []byte, headers []record.Header) (AppendResult, error) {
	result, err := l.appendLocked(batches, headers)
	if err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	syncNow := l.cfg.Flush == FlushAlways ||
		(l.cfg.Flush == FlushInterval && l.cfg.Now().Sub(l.lastSync) >= l.cfg.FlushInterval)
	l.mu.Unlock()
	if syncNow {
		if err := l.syncTo(result.NextOffset); err != nil {
			return AppendResult{}, err
		}
	}
	return result, nil
}

func (l *Log) appendLocked(batches []byte, headers []record.Header) (AppendResult, error) {
	if len(headers) == 0 {
		next := l.logEndOffsetLocked()
		return AppendResult{BaseOffset: next, NextOffset: next}, nil
	}
	if int64(len(batches)) > l.cfg.SegmentBytes {
		return AppendResult{}, fmt.Errorf("%w: %d bytes, segments hold %d", ErrBatchTooLarge, len(batches), l.cfg.SegmentBytes)
	}
	first, last := headers[0], headers[len(headers)-1]
	end, err := appendEnd(headers)
	if err != nil {
		return AppendResult{}, err
	}
	if err := l.maybeRollLocked(int64(len(batches)), end); err != nil {
		return AppendResult{}, err
	}
	for _, header := range headers {
		if err := l.assignEpochLocked(header.PartitionLeaderEpoch, header.BaseOffset); err != nil {
			return AppendResult{}, err
		}
	}
	active := l.segments[len(l.segments)-1]
	if err := active.append(batches, headers, l.cfg.IndexIntervalBytes); err != nil {
		// A partial write leaves the segment in an unknown state.
		return AppendResult{}, l.failLocked(fmt.Errorf("append to %s: %w", segmentFileName(active.baseOffset), err))
	}
	l.assertInvariantsLocked("append")
	return AppendResult{BaseOffset: first.BaseOffset, NextOffset: last.NextOffset(), Batches: len(headers)}, nil
}

// appendEnd returns the largest next offset over every batch of an append,
// or ErrOffsetSpanTooLarge when the append covers more offsets than one
// segment can index. Every batch counts, not only the last: the headers come
// from a peer or a client, and a roll decided on the last batch alone once
// let an append of batches with huge offset spans land in one segment whose
// index could not hold them (issue 11).
func appendEnd(headers []record.Header) (record.Offset, error) {
	first := headers[0].BaseOffset
	end := first
	for _, header := range headers {
		end = max(end, header.NextOffset())
	}
	if end-first > SegmentOffsetSpanMax {
		return 0, fmt.Errorf("%w: offsets [%d, %d) in one append, a segment indexes %d", ErrOffsetSpanTooLarge, first, end, int64(SegmentOffsetSpanMax))
	}
	return end, nil
}

// maybeRollLocked starts a new active segment when appending size bytes
// ending at nextOffset would overfill the current one, when it is too old,
// or when the offsets would no longer fit the index's 32-bit relative field
// (SegmentOffsetSpanMax). An empty active segment starts at the log end
// offset, where the append starts, so the caller's span check covers it.
func (l *Log) maybeRollLocked(size int64, nextOffset record.Offset) error {
	active := l.segments[len(l.segments)-1]
	if active.size == 0 {
		return nil
	}
	full := active.size+size > l.cfg.SegmentBytes
	old := l.cfg.SegmentAge > 0 && l.cfg.Now().Sub(active.createdAt) >= l.cfg.SegmentAge
	if !full && !old && active.canIndex(nextOffset) {
		return nil
	}
	return l.rollLocked()
}

// rollLocked syncs the active segment, creates the next one and makes its
// directory entry durable, then checkpoints the new recovery point, so that
// recovery after a crash only scans the new active segment.
func (l *Log) rollLocked() error {
	if len(l.segments) >= SegmentsOpenMax {
		return fmt.Errorf("%w: %d segments open", ErrTooManySegments, len(l.segments))
	}
	// No waiting for a running sync here: the caller has stamped offsets
	// under the lock, and releasing it would let another append in. A sync
	// running on the old active segment only ever raises the durable end
	// offset to what it captured, which this roll's own sync covers.
	if err := l.syncActiveLocked(); err != nil {
		return err
	}
	next, err := createSegment(l.cfg.FS, l.cfg.Dir, l.logEndOffsetLocked(), l.cfg.Now())
	if err != nil {
		return l.failLocked(fmt.Errorf("roll: %w", err))
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		next.close()
		return l.failLocked(fmt.Errorf("roll: sync dir: %w", err))
	}
	l.segments = append(l.segments, next)
	l.recoveryPoint = l.durableEndOffset
	return l.writeOffsetsCheckpointLocked()
}

// Sync makes everything appended so far durable. Concurrent callers share
// syncs: a caller whose data was appended while a sync ran waits for that
// sync, then for the one after it, which one of them runs for all.
func (l *Log) Sync() error {
	l.mu.RLock()
	target := l.logEndOffsetLocked()
	l.mu.RUnlock()
	return l.syncTo(target)
}

// syncTo returns once the durable end offset has reached target (or the log
// was truncated below it, or failed).
func (l *Log) syncTo(target record.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if err := l.usableLocked(); err != nil {
			return err
		}
		target = min(target, l.logEndOffsetLocked())
		if l.durableEndOffset >= target {
			return nil
		}
		if !l.syncing {
			break
		}
		l.syncDone.Wait()
	}
	l.syncing = true
	active, end := l.segments[len(l.segments)-1], l.logEndOffsetLocked()
	l.mu.Unlock()
	err := active.file.Sync()
	l.mu.Lock()
	l.syncing = false
	l.syncDone.Broadcast()
	if err != nil {
		return l.failLocked(fmt.Errorf("sync %s: %w", segmentFileName(active.baseOffset), err))
	}
	// Truncation and roll wait for syncing to clear, so nothing below end
	// moved while the lock was released.
	l.durableEndOffset = max(l.durableEndOffset, end)
	l.lastSync = l.cfg.Now()
	l.assertInvariantsLocked("sync")
	return nil
}
