package commitlog

import (
	"fmt"
	"path"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// cleanSegmentsLocked rewrites, oldest first, every segment that holds
// offsets below the map's end (the clean section and the dirty one), and
// swaps in each one the rewrite changed.
func (l *Log) cleanSegmentsLocked(m *offsetMap, opts CleanOptions, result *CleanResult) error {
	for i := 0; i < len(l.segments)-1 && l.segments[i].baseOffset < m.end; i++ {
		s := l.segments[i]
		w, err := l.rewriteSegmentLocked(s, m, opts, result)
		if err != nil {
			return err
		}
		if !w.changed || w.size > max(s.size, l.cfg.SegmentBytes) {
			if err := w.discard(l.cfg.FS); err != nil {
				return l.failLocked(fmt.Errorf("cleaner: discard %s: %w", w.file.Name(), err))
			}
			continue
		}
		result.SegmentsRewritten++
		result.BytesBefore += s.size
		result.BytesAfter += w.size
		if err := l.swapSegmentLocked(i, w); err != nil {
			return err
		}
	}
	return nil
}

// rewriteSegmentLocked writes the cleaned version of s into its .cleaned
// file, batch by batch (cleanBatch decides each one).
func (l *Log) rewriteSegmentLocked(s *segment, m *offsetMap, opts CleanOptions, result *CleanResult) (*segmentWriter, error) {
	file, err := l.cfg.FS.Create(path.Join(l.cfg.Dir, segmentFileName(s.baseOffset)+cleanedSuffix))
	if err != nil {
		return nil, l.failLocked(fmt.Errorf("cleaner: create: %w", err))
	}
	w := &segmentWriter{file: file, base: s.baseOffset, interval: l.cfg.IndexIntervalBytes, maxTimestampMs: -1}
	for position := int64(0); position < s.size; {
		batch, header, err := s.readBatch(position, l.limits)
		if err == nil {
			position += batchSize(header)
			err = l.cleanBatch(w, batch, header, m, opts, result)
		}
		if err != nil {
			file.Close()
			return nil, l.failLocked(fmt.Errorf("cleaner: %s: %w", segmentFileName(s.baseOffset), err))
		}
	}
	return w, nil
}

// cleanBatch decides what becomes of one batch and hands it to w. The
// rules, Kafka's (Cleaner.shouldRetainRecord, checkBatchRetention):
//
//   - Control batches, batches at or beyond the map's end and batches
//     wholly below the log start offset (dead, left for retention to
//     delete with their segment) are kept as they are. (tide has no transactions yet, so there are no aborted
//     records to remove and no markers whose transaction is done.)
//   - A record is removed when the map holds a later record of its key
//     (superseded), when it has no key (a compacted topic has no use for
//     it; Kafka drops them too), or when it is a tombstone whose batch's
//     delete horizon has passed. Offsets of the records kept never change.
//   - A batch that keeps a tombstone and has no delete horizon gets one,
//     now + delete.retention.ms (KIP-534): the tombstone stays at least
//     that long after the cleaner first saw it.
//   - A batch whose records all go leaves an empty batch covering its
//     offsets: with its producer's header if it is that producer's last
//     batch (KIP-98), else with none (see segmentWriter).
//   - A rewrite can be larger than the original (a delete horizon makes
//     the records' timestamp deltas longer; recompression may do worse
//     than the producer did). A batch whose rewrite would pass the log's
//     MaxBatchBytes is kept as it is, and a segment whose rewrite would
//     pass both its old size and SegmentBytes is not swapped in.
func (l *Log) cleanBatch(w *segmentWriter, batch []byte, header record.Header, m *offsetMap, opts CleanOptions, result *CleanResult) error {
	if header.IsControl() || header.BaseOffset >= m.end || header.NextOffset() <= l.logStartOffset {
		return w.keep(batch, header)
	}
	_, records, err := record.DecodeRecords(batch, l.limits.MaxBatchBytes, cleanerDecompressedBatchBytesMax)
	if err != nil {
		return err
	}
	kept := make([]record.StoredRecord, 0, len(records))
	var superseded, tombstones int
	keptTombstone := false
	for _, r := range records {
		offset := header.BaseOffset + record.Offset(r.OffsetDelta)
		switch {
		case offset >= m.end:
			kept = append(kept, r)
			keptTombstone = keptTombstone || r.IsTombstone()
		case r.Key == nil || m.supersedes(r.Key, offset):
			superseded++
		case r.IsTombstone() && header.HasDeleteHorizon() && opts.NowMs >= header.DeleteHorizonMs():
			tombstones++
		default:
			kept = append(kept, r)
			keptTombstone = keptTombstone || r.IsTombstone()
		}
	}
	stampHorizon := keptTombstone && !header.HasDeleteHorizon()
	lastOfProducer := header.ProducerID >= 0 && m.lastOfProducer[header.ProducerID] == header.BaseOffset
	if len(records) > 0 && len(kept) == len(records) && !stampHorizon || len(records) == 0 && (lastOfProducer || header.ProducerID < 0) {
		return w.keep(batch, header)
	}
	if len(kept) == 0 {
		result.RecordsRemoved += superseded
		result.TombstonesRemoved += tombstones
		var producer *record.ProducerState
		if lastOfProducer {
			producer = &record.ProducerState{ProducerID: header.ProducerID, ProducerEpoch: header.ProducerEpoch, BaseSequence: header.BaseSequence}
		}
		return w.replace(record.EmptyBatch(header.BaseOffset, header.LastOffsetDelta, header.PartitionLeaderEpoch, header.MaxTimestampMs, producer, header.Attributes))
	}
	horizonMs := int64(-1)
	if stampHorizon {
		horizonMs = opts.NowMs + opts.Config.DeleteRetentionMs
	}
	rewritten, err := record.RewriteBatch(header, kept, horizonMs)
	if err != nil {
		return err
	}
	if len(rewritten) > l.limits.MaxBatchBytes {
		return w.keep(batch, header)
	}
	result.RecordsRemoved += superseded
	result.TombstonesRemoved += tombstones
	return w.replace(rewritten)
}

// mustParseHeader parses the header of a batch this package just built.
func mustParseHeader(batch []byte) record.Header {
	header, err := record.ParseHeader(batch)
	if err != nil {
		panic(fmt.Sprintf("commitlog: cleaner built a batch that does not parse: %v", err))
	}
	return header
}

// segmentWriter writes a cleaned segment and its index.
//
// The log's batches keep their boundaries after cleaning: where every
// record of a batch went, an empty batch (no records; the batch's offsets,
// leader epoch and newest timestamp) takes its place. Kafka drops such a
// batch and leaves a hole; tide's recovery, reads and follower appends
// check that each batch starts where the last one ended (there a gap is
// damage or a lost append), and a follower whose log ends at a batch
// boundary of the leader's must find a batch starting there. A consumer
// fetching an offset in the empty batch gets it and moves past it, as it
// moves past Kafka's hole. The empty batch costs its 61-byte header.
type segmentWriter struct {
	file           disk.File
	base           record.Offset
	size           int64
	interval       int64
	sinceIndex     int64
	index          []indexEntry
	maxTimestampMs int64
	// changed is set once anything differs from the original segment.
	changed bool
}

// keep appends an original batch as it is.
func (w *segmentWriter) keep(batch []byte, header record.Header) error {
	return w.append(batch, header)
}

// replace appends a batch the cleaner rewrote.
func (w *segmentWriter) replace(batch []byte) error {
	w.changed = true
	return w.append(batch, mustParseHeader(batch))
}

func (w *segmentWriter) append(batch []byte, header record.Header) error {
	if _, err := w.file.Write(batch); err != nil {
		return err
	}
	if w.sinceIndex < w.interval {
		w.sinceIndex += int64(len(batch))
	} else {
		w.sinceIndex = int64(len(batch))
		w.index = append(w.index, indexEntry{relativeOffset: uint32(header.BaseOffset - w.base), position: uint32(w.size)})
	}
	w.size += int64(len(batch))
	w.maxTimestampMs = max(w.maxTimestampMs, header.MaxTimestampMs)
	return nil
}

// discard removes an unchanged rewrite.
func (w *segmentWriter) discard(fs disk.FS) error {
	name := w.file.Name()
	if err := w.file.Close(); err != nil {
		return err
	}
	return fs.Remove(name)
}
