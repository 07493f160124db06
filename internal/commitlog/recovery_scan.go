package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"path"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

// isBatchDamage reports whether err says the bytes on disk are not a valid
// batch (as opposed to the disk failing to read them).
func isBatchDamage(err error) bool {
	return errors.Is(err, record.ErrTruncated) || errors.Is(err, record.ErrCorrupt) ||
		errors.Is(err, record.ErrInvalid) || errors.Is(err, record.ErrTooLarge)
}

// scanFrom validates every batch of segments[first:], rebuilding their
// indexes, and cuts the log at the first damaged batch, unless that batch
// lies below the recovery point. It returns where each epoch begins among the
// scanned batches, for the epoch cache.
func (l *Log) scanFrom(first int, recoveryPoint record.Offset) ([]leaderepoch.Entry, error) {
	l.recovery.ScannedFrom = l.segments[first].baseOffset
	var epochs []leaderepoch.Entry
	expected := l.segments[first].baseOffset
	for i := first; i < len(l.segments); i++ {
		s := l.segments[i]
		if s.baseOffset != expected {
			damage := fmt.Errorf("segment starts at %d, previous one ends at %d: %w", s.baseOffset, expected, record.ErrInvalid)
			return epochs, l.cutTail(i, 0, expected, recoveryPoint, damage)
		}
		position, damage, err := l.scanSegment(s, recoveryPoint, &epochs)
		if err != nil {
			return epochs, err
		}
		if damage != nil {
			return epochs, l.cutTail(i, position, s.nextOffset, recoveryPoint, damage)
		}
		// An inactive segment's time index ends with its largest
		// timestamp, as a roll leaves it; the active one's too, since
		// recovery checkpoints the log end as the recovery point, below
		// which a roll's new segment makes the active one trusted.
		if err := s.indexFinalTimestamp(); err != nil {
			return epochs, err
		}
		expected = s.nextOffset
	}
	return epochs, nil
}

// scanSegment validates s from its start, rebuilding its index and setting
// its next offset. It returns the position and cause of the first damaged
// batch, or a nil damage when the whole segment is valid.
func (l *Log) scanSegment(s *segment, recoveryPoint record.Offset, epochs *[]leaderepoch.Entry) (int64, error, error) {
	if err := s.index.reset(); err != nil {
		return 0, nil, err
	}
	if err := s.timeIndex.reset(); err != nil {
		return 0, nil, err
	}
	s.nextOffset, s.bytesSinceIndexEntry = s.baseOffset, 0
	s.resetTimestamps()
	for position := int64(0); position < s.size; {
		_, header, err := s.readBatch(position, l.limits)
		if err != nil && !isBatchDamage(err) {
			return 0, nil, err
		}
		if err == nil && header.PartitionLeaderEpoch < 0 {
			// The epoch lies outside the CRC; a stored batch always has one.
			err = fmt.Errorf("batch at offset %d has no leader epoch: %w", header.BaseOffset, record.ErrInvalid)
		}
		if err == nil && header.BaseOffset != s.nextOffset {
			err = fmt.Errorf("batch at offset %d where %d was expected: %w", header.BaseOffset, s.nextOffset, record.ErrInvalid)
		}
		if err == nil && !s.canIndex(header.NextOffset()) {
			// No append writes such a batch (the log rolls before it or
			// refuses it), so its CRC-valid header is damage, however it
			// got there: indexing it would wrap the relative offset.
			err = errCannotIndex(s, header)
		}
		// Batches wholly below the log start offset are dead (a truncation
		// to the log start may have forgotten their epochs), so only live
		// ones must have non-decreasing epochs.
		live := header.NextOffset() > l.logStartOffset
		if err == nil && live && len(*epochs) > 0 && header.PartitionLeaderEpoch < (*epochs)[len(*epochs)-1].Epoch {
			err = fmt.Errorf("batch at offset %d has epoch %d after epoch %d: %w", header.BaseOffset, header.PartitionLeaderEpoch, (*epochs)[len(*epochs)-1].Epoch, record.ErrInvalid)
		}
		if err != nil {
			return position, err, nil
		}
		s.observeTimestamp(header)
		if err := s.maybeIndex(header, position, l.cfg.IndexIntervalBytes); err != nil {
			return 0, nil, err
		}
		if live && (len(*epochs) == 0 || (*epochs)[len(*epochs)-1].Epoch != header.PartitionLeaderEpoch) {
			*epochs = append(*epochs, leaderepoch.Entry{Epoch: header.PartitionLeaderEpoch, StartOffset: header.BaseOffset})
		}
		s.nextOffset = header.NextOffset()
		position += batchSize(header)
		l.recovery.ScannedBatches++
	}
	return s.size, nil, nil
}

// cutTail removes the log from segments[i] at position on: the damaged batch
// (whose offset is offset) and everything after it. Damage below the recovery
// point is refused with a CorruptionError.
func (l *Log) cutTail(i int, position int64, offset, recoveryPoint record.Offset, damage error) error {
	s := l.segments[i]
	if offset < recoveryPoint {
		return &CorruptionError{Segment: path.Join(l.cfg.Dir, segmentFileName(s.baseOffset)), Position: position, Offset: offset, Cause: damage}
	}
	l.recovery.TailError = damage
	for len(l.segments) > i+1 {
		last := l.segments[len(l.segments)-1]
		l.recovery.TruncatedBytes += last.size
		l.recovery.RemovedSegments++
		if err := last.remove(l.cfg.FS, l.cfg.Dir); err != nil {
			return err
		}
		l.segments = l.segments[:len(l.segments)-1]
	}
	if i > 0 && position == 0 {
		// The whole segment is beyond the damage: remove it too.
		l.recovery.TruncatedBytes += s.size
		l.recovery.RemovedSegments++
		l.segments = l.segments[:i]
		return s.remove(l.cfg.FS, l.cfg.Dir)
	}
	l.recovery.TruncatedBytes += s.size - position
	if err := s.file.Truncate(position); err != nil {
		return err
	}
	s.setFileSize(position)
	return nil
}

// recoverEpochCache loads the epoch checkpoint and makes it agree with the
// log. Entries for the scanned region are recomputed from its batches; entries
// below it are trusted like the segments they describe. An entry starting
// exactly at the log end offset, with an epoch above the last batch's, is
// kept: it is what a new leader records before its first write (KAFKA-7415).
// A missing or unreadable checkpoint is rebuilt from every batch in the log.
// The checkpoint is rewritten when the result differs from it.
func (l *Log) recoverEpochCache(scanned []leaderepoch.Entry) error {
	data, err := readSmallFile(l.cfg.FS, path.Join(l.cfg.Dir, epochCheckpointName))
	var loaded leaderepoch.Cache
	if err == nil {
		loaded, err = leaderepoch.UnmarshalCheckpoint(data)
	}
	if err != nil && !errors.Is(err, disk.ErrNotExist) && !(errors.Is(err, errCheckpointFormat) || errors.Is(err, leaderepoch.ErrMalformedCheckpoint)) {
		return err
	}
	scanStart := l.recovery.ScannedFrom
	if err != nil {
		if l.logEndOffsetLocked() > l.logStartOffset {
			l.recovery.EpochCacheRebuilt = true
		}
		if scanned, err = l.allEpochStarts(); err != nil {
			return err
		}
		scanStart = 0
	}
	cache := loaded.Clone()
	cache.TruncateFromEnd(scanStart)
	for _, entry := range scanned {
		if cache.LatestEpoch() != entry.Epoch {
			cache.Assign(entry.Epoch, entry.StartOffset)
		}
	}
	logEnd := l.logEndOffsetLocked()
	if last, ok := loaded.Latest(); ok && last.StartOffset == logEnd && last.Epoch > cache.LatestEpoch() {
		cache.Assign(last.Epoch, last.StartOffset)
	}
	cache.TruncateFromStart(l.logStartOffset)
	l.epochs = cache
	if data != nil && bytes.Equal(data, cache.MarshalCheckpoint()) {
		return nil
	}
	return l.writeEpochCheckpointLocked()
}

// allEpochStarts walks the batch headers of the whole log and returns where
// each epoch begins.
func (l *Log) allEpochStarts() ([]leaderepoch.Entry, error) {
	var epochs []leaderepoch.Entry
	for _, s := range l.segments {
		for position := int64(0); position < s.size; {
			header, err := s.readHeader(position)
			if err == nil && header.PartitionLeaderEpoch < 0 {
				err = fmt.Errorf("batch at offset %d has no leader epoch: %w", header.BaseOffset, record.ErrInvalid)
			}
			if err != nil {
				return nil, &CorruptionError{Segment: segmentFileName(s.baseOffset), Position: position, Offset: s.baseOffset, Cause: err}
			}
			live := header.NextOffset() > l.logStartOffset
			if live && (len(epochs) == 0 || epochs[len(epochs)-1].Epoch != header.PartitionLeaderEpoch) {
				epochs = append(epochs, leaderepoch.Entry{Epoch: header.PartitionLeaderEpoch, StartOffset: header.BaseOffset})
			}
			position += batchSize(header)
		}
	}
	return epochs, nil
}

// finishRecovery syncs what recovery changed, so that the recovered log is
// the durable log, and checkpoints the offsets.
func (l *Log) finishRecovery(highWatermark record.Offset) error {
	// The rebuilt indexes' entries are pending (entryFile): into the
	// files first, which Open then spills from memory for all but the
	// active segment.
	if err := l.drainLocked(); err != nil {
		return err
	}
	for _, s := range l.segments {
		if s.baseOffset >= l.recovery.ScannedFrom || s == l.segments[len(l.segments)-1] {
			if err := s.sync(); err != nil {
				return err
			}
		}
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		return err
	}
	logEnd := l.logEndOffsetLocked()
	l.durableEndOffset, l.recoveryPoint = logEnd, logEnd
	l.highWatermark = max(highWatermark, l.logStartOffset)
	l.assertInvariantsLocked("recovery")
	return l.writeOffsetsCheckpointLocked()
}
