package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// TimestampOffset is a record found by its timestamp: its offset,
// timestamp and the leader epoch of its batch, as ListOffsets answers them.
type TimestampOffset struct {
	Offset      record.Offset
	TimestampMs int64
	LeaderEpoch record.LeaderEpoch
}

// OffsetForTimestamp finds the first record at or above the log start
// offset whose timestamp is at or after timestampMs (ListOffsets by
// timestamp, KIP-33 and KIP-79), and reports false when there is none
// below upTo (exclusive: the high watermark for consumers), which Kafka
// answers with offset -1. As in Kafka (UnifiedLog.fetchOffsetByTimestamp),
// the segment searched is the first whose largest timestamp is at or after
// the target; its time index says where to start, its offset index where
// that batch lies, and the batches from there are read until a record
// qualifies.
func (l *Log) OffsetForTimestamp(timestampMs int64, upTo record.Offset) (TimestampOffset, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return TimestampOffset{}, false, err
	}
	for _, s := range l.segments {
		if s.maxTimestampMs < timestampMs || s.nextOffset <= l.logStartOffset {
			continue
		}
		from := max(s.baseOffset+record.Offset(s.timeIndex.lookup(timestampMs)), l.logStartOffset)
		found, ok, err := l.searchSegmentLocked(s, from, timestampMs)
		if err != nil || ok {
			return found, ok && found.Offset < upTo, err
		}
	}
	return TimestampOffset{}, false, nil
}

// MaxTimestampOffset is the record with the largest timestamp in the log
// (ListOffsets' MAX_TIMESTAMP, -3, KIP-734): the first record carrying the
// largest timestamp of the segment whose largest timestamp is greatest
// (the first such segment), and false when no record has a timestamp or
// it lies at or above upTo.
func (l *Log) MaxTimestampOffset(upTo record.Offset) (TimestampOffset, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return TimestampOffset{}, false, err
	}
	var newest *segment
	for _, s := range l.segments {
		if s.nextOffset > l.logStartOffset && s.maxTimestampMs >= 0 && (newest == nil || s.maxTimestampMs > newest.maxTimestampMs) {
			newest = s
		}
	}
	if newest == nil {
		return TimestampOffset{}, false, nil
	}
	from := max(newest.baseOffset+record.Offset(newest.timeIndex.lookup(newest.maxTimestampMs)), l.logStartOffset)
	found, ok, err := l.searchSegmentLocked(newest, from, newest.maxTimestampMs)
	return found, ok && found.Offset < upTo, err
}

// searchSegmentLocked reads s's batches from the one holding offset from,
// for the first record at or above from with a timestamp at or after
// timestampMs.
func (l *Log) searchSegmentLocked(s *segment, from record.Offset, timestampMs int64) (TimestampOffset, bool, error) {
	start, ok, err := s.find(from)
	if err != nil || !ok {
		return TimestampOffset{}, false, err
	}
	for position := start.position; position < s.size; {
		header, err := s.readHeader(position)
		if err != nil {
			return TimestampOffset{}, false, &CorruptionError{Segment: segmentFileName(s.baseOffset), Position: position, Offset: from, Cause: err}
		}
		if header.MaxTimestampMs >= timestampMs {
			batch, _, err := s.readBatch(position, l.limits)
			if err != nil {
				return TimestampOffset{}, false, &CorruptionError{Segment: segmentFileName(s.baseOffset), Position: position, Offset: header.BaseOffset, Cause: err}
			}
			offset, recordTimestampMs, found, err := record.FirstRecordAtOrAfter(batch, from, timestampMs, l.limits)
			if err != nil {
				return TimestampOffset{}, false, fmt.Errorf("search batch %d by timestamp: %w", header.BaseOffset, err)
			}
			if found {
				return TimestampOffset{Offset: offset, TimestampMs: recordTimestampMs, LeaderEpoch: header.PartitionLeaderEpoch}, true, nil
			}
		}
		position += batchSize(header)
	}
	return TimestampOffset{}, false, nil
}
