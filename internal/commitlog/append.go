package commitlog

import (
	"fmt"
	"time"

	"github.com/tidelog/tide/internal/record"
)

// Append appends batches (one or more concatenated RecordBatch v2) with the
// offsets and leader epochs already stamped in them: by the replication
// core as leader (replica.HandleProduce), or by the leader they were
// replicated from. The log takes ownership of batches and never re-encodes
// them. The first batch must start at the log end offset and each next one
// where the previous ended; no batch may carry an epoch below the latest the
// log has.
//
// The log copies the batches into memory (the caller may reuse them once
// Append returns) and a sync job writes them to the file (pending.go): they
// are neither written nor durable when Append returns. The caller syncs
// (BeginSync, Sync) before their offsets may count as durable, which is how
// one sync covers every append since the last (the broker's group commit).
// An append the write backlog has no room for is refused (ErrWriteBacklog).
func (l *Log) Append(batches []byte) (AppendResult, error) {
	// Validated where they enter the log, outside the lock: it is the
	// expensive part. The check is the one a batch read back from the disk
	// gets: framing, CRC, header fields; the producer's gateway checks
	// (compressed records, dense offsets) ran at the leader.
	headers, err := record.ValidateAll(batches, l.limits)
	if err != nil {
		return AppendResult{}, err
	}
	return l.appendHeaders(batches, headers)
}

// AppendValidated is Append for batches the caller has validated in full
// (record.ValidateAll, with limits at least as strict as the log's) and
// hands over with the headers it got, updated where it stamped offsets,
// epochs or append times into the bytes: the replication core's appends,
// which it validated at its gateway (a producer's request, a fetch
// response). The log checks that the headers are the bytes' own
// (record.MatchHeaders) and that no batch is over its size limit, a cost
// per batch, and leaves out the second pass over every byte for the CRC
// and the records that Append makes: on the produce path that pass was a
// tenth of the broker's CPU. Everything else is Append's.
func (l *Log) AppendValidated(batches []byte, headers []record.Header) (AppendResult, error) {
	if err := record.MatchHeaders(batches, headers); err != nil {
		return AppendResult{}, err
	}
	for _, header := range headers {
		if header.Size() > l.limits.MaxBatchBytes {
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d is %d bytes, the log takes %d", record.ErrTooLarge, header.BaseOffset, header.Size(), l.limits.MaxBatchBytes)
		}
	}
	return l.appendHeaders(batches, headers)
}

// appendHeaders appends batches whose headers are known good, under the
// lock: each must start where the one before ended, at the log end, and
// no epoch may go back.
func (l *Log) appendHeaders(batches []byte, headers []record.Header) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return AppendResult{}, err
	}
	next, latestEpoch := l.logEndOffsetLocked(), l.epochs.LatestEpoch()
	for _, header := range headers {
		if header.BaseOffset != next {
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d, expected %d", ErrNotContiguous, header.BaseOffset, next)
		}
		if header.PartitionLeaderEpoch < latestEpoch || header.PartitionLeaderEpoch < 0 {
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d has epoch %d, log has %d", ErrEpochRegression, header.BaseOffset, header.PartitionLeaderEpoch, latestEpoch)
		}
		next, latestEpoch = header.NextOffset(), header.PartitionLeaderEpoch
	}
	return l.appendLocked(batches, headers)
}

func (l *Log) appendLocked(batches []byte, headers []record.Header) (AppendResult, error) {
	if len(headers) == 0 {
		next := l.logEndOffsetLocked()
		return AppendResult{BaseOffset: next, NextOffset: next}, nil
	}
	if int64(len(batches)) > l.cfg.SegmentBytes {
		return AppendResult{}, fmt.Errorf("%w: %d bytes, segments hold %d", ErrBatchTooLarge, len(batches), l.cfg.SegmentBytes)
	}
	if err := l.checkWriteBacklogLocked(int64(len(batches))); err != nil {
		return AppendResult{}, err
	}
	first, last := headers[0], headers[len(headers)-1]
	end, err := appendEnd(headers)
	if err != nil {
		return AppendResult{}, err
	}
	if err := l.maybeRollLocked(int64(len(batches)), end, maxTimestamp(headers)); err != nil {
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

// maxTimestamp is the largest max timestamp over batches' headers, or -1.
func maxTimestamp(headers []record.Header) int64 {
	largest := int64(-1)
	for _, header := range headers {
		largest = max(largest, header.MaxTimestampMs)
	}
	return largest
}

// maybeRollLocked starts a new active segment when appending size bytes
// ending at nextOffset would overfill the current one, when it is too old,
// or when the offsets would no longer fit the index's 32-bit relative field
// (SegmentOffsetSpanMax). An empty active segment starts at the log end
// offset, where the append starts, so the caller's span check covers it.
func (l *Log) maybeRollLocked(size int64, nextOffset record.Offset, incomingTimestampMs int64) error {
	active := l.segments[len(l.segments)-1]
	if active.size == 0 {
		return nil
	}
	full := active.size+size > l.cfg.SegmentBytes
	old := l.cfg.SegmentAge > 0 && l.segmentAgeLocked(active, incomingTimestampMs) >= l.cfg.SegmentAge.Milliseconds()
	if !full && !old && active.canIndex(nextOffset) {
		return nil
	}
	return l.rollLocked()
}

// segmentAgeLocked is how old the active segment is for rolling by
// segment.ms, in milliseconds, as Kafka measures it
// (LogSegment.timeWaitedForRoll): from its first batch's max timestamp to
// the incoming batches' when both have one, else by the log's clock since
// the segment was created, else 0. Time comes from the records or from the
// caller (SetClock), never from a clock of the log's own, so the
// simulator's virtual time rolls segments as the wall clock does in tide
// serve.
func (l *Log) segmentAgeLocked(active *segment, incomingTimestampMs int64) int64 {
	switch {
	case active.firstTimestampMs >= 0 && incomingTimestampMs >= 0:
		return incomingTimestampMs - active.firstTimestampMs
	case active.createdAtMs >= 0 && l.clockMs >= 0:
		return l.clockMs - active.createdAtMs
	}
	return 0
}

// SetSegmentLimits changes when the active segment rolls, from the next
// append on: a topic's segment.bytes and segment.ms changed on a live
// topic, which Kafka applies to its open logs at once. Rule
// segment-holds-a-batch: segmentBytes below the log's batch bound is
// raised to it, as the broker does when it opens the log; zero takes the
// default, as in Config; a value outside
// what Validate accepts, or a negative age, is refused and changes nothing.
func (l *Log) SetSegmentLimits(segmentBytes int64, segmentAge time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.cfg
	next.SegmentBytes, next.SegmentAge = segmentBytes, segmentAge
	next = next.withDefaults()
	next.SegmentBytes = max(next.SegmentBytes, int64(l.cfg.MaxBatchBytes))
	if err := next.Validate(); err != nil {
		return fmt.Errorf("commitlog: segment limits: %w", err)
	}
	l.cfg = next
	return nil
}

// SetClock tells the log the current time, in milliseconds since the Unix
// epoch, by its owner's clock (the wall clock in tide serve, the virtual
// one in the simulator): the creation time of the segments it makes from
// now on, for rolling segments whose batches carry no timestamps. The log
// reads no clock itself. A segment created or opened before the log had a
// clock counts its age from the first one it is given.
func (l *Log) SetClock(nowMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.clockMs < 0
	l.clockMs = nowMs
	if !first {
		return // every segment already has its creation time: cheap per tick
	}
	for _, s := range l.segments {
		if s.createdAtMs < 0 {
			s.createdAtMs = nowMs
		}
	}
}

// rollLocked closes the active segment and creates the next one, and
// leaves the rest to the next sync job (rolled.go): the closed segment's
// pending bytes and index entries, its fsync and its indexes', the
// directory sync, and the checkpoint of the new recovery point. The loop
// only adds the final time index entry, in memory, and creates the files.
func (l *Log) rollLocked() error {
	if len(l.segments) >= SegmentsOpenMax {
		return fmt.Errorf("%w: %d segments open", ErrTooManySegments, len(l.segments))
	}
	closing := l.segments[len(l.segments)-1]
	if err := closing.indexFinalTimestamp(); err != nil {
		return l.failLocked(fmt.Errorf("roll: time index: %w", err))
	}
	next, err := createSegment(l.cfg.FS, l.cfg.Dir, l.logEndOffsetLocked(), l.clockMs)
	if err != nil {
		return l.failLocked(fmt.Errorf("roll: %w", err))
	}
	l.segments = append(l.segments, next)
	l.rolled = append(l.rolled, closing)
	return nil
}

// CheckWriteBacklog says whether an append of size bytes would be refused
// for the write backlog (ErrWriteBacklog) right now: a caller that cannot
// take an append back once it is decided (the broker, whose replica has
// counted it) asks first. Only a sync job's completion or a drain shrinks
// the backlog, both on the goroutine that appends, so the answer holds
// until that goroutine's next append.
func (l *Log) CheckWriteBacklog(size int64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.checkWriteBacklogLocked(size)
}

// PendingBytes is how many appended bytes wait for a sync job to write them.
func (l *Log) PendingBytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.pendingBytesLocked()
}

// pendingBytesLocked counts the active segment's and the rolled ones':
// no other has any (assertInvariantsLocked).
func (l *Log) pendingBytesLocked() int64 {
	pending := l.segments[len(l.segments)-1].pendingBytes()
	for _, s := range l.rolled {
		pending += s.pendingBytes()
	}
	return pending
}

// checkWriteBacklogLocked refuses size more pending bytes past
// PendingBytesMax, unless none are pending: an append larger than the
// bound alone goes in once the disk has caught up, so that nothing the log
// takes at all is refused for ever.
func (l *Log) checkWriteBacklogLocked(size int64) error {
	pending := l.pendingBytesLocked()
	if pending > 0 && pending+size > l.cfg.PendingBytesMax {
		return fmt.Errorf("%w: %d bytes pending, %d more would pass %d", ErrWriteBacklog, pending, size, l.cfg.PendingBytesMax)
	}
	return nil
}
