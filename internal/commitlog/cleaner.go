package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// The log cleaner (cleanup.policy=compact), after Kafka's LogCleaner: it
// keeps the latest record of every key and drops the ones a later record of
// the same key supersedes, so that a compacted topic holds at least the last
// value of each key for as long as the topic lives. docs/storage.md
// ("Compaction") describes it; the steps of a pass:
//
//  1. Plan (planCleanLocked): the dirty section runs from the cleaner
//     checkpoint to the first uncleanable offset, rounded down to a segment
//     boundary; it is cleaned only when its share of the cleanable bytes
//     passes min.cleanable.dirty.ratio.
//  2. Offset map (buildOffsetMapLocked): the latest offset of every key in
//     the dirty section, within CleanerConfig.OffsetMapBytes.
//  3. Rewrite (cleaner_rewrite.go): every segment from the log start to the
//     end of the map, record by record, into a .cleaned file.
//  4. Swap (cleaner_swap.go): each rewritten segment replaces its original
//     by rename, oldest first, each swap durable before the next; then the
//     checkpoint moves to the end of the map.

// CleanOptions are one cleaning pass's inputs. Time and the bound come in as
// values: the log reads no clock for cleaning.
type CleanOptions struct {
	Config CleanerConfig
	// UpTo bounds what may be cleaned: nothing at or above it is read into
	// the offset map or rewritten. The broker passes the high watermark
	// (rules.CleanBelowHighWatermark): a record above it is not committed
	// and may yet be truncated away, so it must never supersede (and so
	// remove) a committed one. The log further bounds the pass by its
	// active segment (never cleaned) and its durable end.
	UpTo record.Offset
	// NowMs is the time, in milliseconds since the Unix epoch, for
	// min.compaction.lag.ms and tombstones' delete horizons.
	NowMs int64
	// IgnoreDirtyRatio cleans whatever is cleanable, however little is
	// dirty (tests and tools).
	IgnoreDirtyRatio bool
}

// CleanResult says what a pass did.
type CleanResult struct {
	// Cleaned is false when the pass did nothing; Skipped says why.
	Cleaned bool
	Skipped string
	// FirstDirty and End are the dirty section the pass cleaned,
	// [FirstDirty, End): End is the new cleaner checkpoint.
	FirstDirty, End record.Offset
	// DirtyRatio is the dirty share of the cleanable bytes, as planned.
	DirtyRatio float64
	// SegmentsRewritten counts the segments swapped for cleaned ones.
	SegmentsRewritten int
	// BytesBefore and BytesAfter are the sizes of the segments rewritten.
	BytesBefore, BytesAfter int64
	// RecordsRemoved counts superseded (and keyless) records removed,
	// TombstonesRemoved tombstones past their delete horizon.
	RecordsRemoved, TombstonesRemoved int
}

// cleanPlan is the section of the log one pass cleans.
type cleanPlan struct {
	firstDirty record.Offset
	// cleanable is how many leading segments lie wholly below the first
	// uncleanable offset; the dirty ones are those from dirtySegment.
	cleanable, dirtySegment int
	ratio                   float64
}

// Clean runs one cleaning pass, if the log needs one (see CleanOptions and
// the steps above). It holds the log's lock throughout, so appends and reads
// wait for it; the broker bounds the work by cleaning one log at a time.
// It replaces segment files: the files of a segment swapped out stay open
// until the next pass or Close, so a Chunk read before the pass stays
// readable until then. A
// failure to write or swap fails the log (ErrLogFailed); recovery on reopen
// finishes with either the original or the cleaned version of each segment.
func (l *Log) Clean(opts CleanOptions) (CleanResult, error) {
	if err := opts.Config.Validate(); err != nil {
		return CleanResult{}, fmt.Errorf("commitlog: clean: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return CleanResult{}, err
	}
	if err := l.closeRetiredLocked(); err != nil {
		return CleanResult{}, l.failLocked(fmt.Errorf("cleaner: close swapped-out segments: %w", err))
	}
	if !opts.Config.Compact {
		return CleanResult{Skipped: "cleanup.policy has no compact"}, nil
	}
	// The cleaner rewrites and swaps inactive segments: a rolled one is
	// settled first (rolled.go), its bytes and entries in its files.
	if err := l.settleRolledLocked(); err != nil {
		return CleanResult{}, err
	}
	plan, skipped, err := l.planCleanLocked(opts)
	if err != nil || skipped != "" {
		return CleanResult{Skipped: skipped, FirstDirty: plan.firstDirty, DirtyRatio: plan.ratio}, err
	}
	offsets, err := l.buildOffsetMapLocked(plan, opts.Config.offsetMapBytes())
	if err != nil {
		return CleanResult{}, err
	}
	result := CleanResult{Cleaned: true, FirstDirty: plan.firstDirty, End: offsets.end, DirtyRatio: plan.ratio}
	if err := l.cleanSegmentsLocked(offsets, opts, &result); err != nil {
		return result, err
	}
	if err := l.writeCleanerCheckpointLocked(offsets.end); err != nil {
		return result, err
	}
	l.assertInvariantsLocked("clean")
	return result, nil
}

// planCleanLocked finds the dirty section, or says why there is nothing to
// clean. The first uncleanable offset is the smallest of opts.UpTo, the
// active segment's base offset, the durable end offset and, with
// min.compaction.lag.ms, the base offset of the first dirty segment holding
// a record younger than the lag; only whole segments below it are cleaned.
func (l *Log) planCleanLocked(opts CleanOptions) (cleanPlan, string, error) {
	firstDirty, err := l.firstDirtyLocked()
	if err != nil {
		return cleanPlan{}, "", l.failLocked(fmt.Errorf("read cleaner checkpoint: %w", err))
	}
	plan := cleanPlan{firstDirty: firstDirty}
	uncleanable := min(opts.UpTo, l.segments[len(l.segments)-1].baseOffset, l.durableEndOffset)
	for plan.cleanable < len(l.segments)-1 && l.segments[plan.cleanable].nextOffset <= uncleanable {
		s := l.segments[plan.cleanable]
		if opts.Config.MinCompactionLagMs > 0 && s.nextOffset > firstDirty {
			maxTimestampMs, err := l.segmentMaxTimestampLocked(s)
			if err != nil {
				return plan, "", err
			}
			if maxTimestampMs > opts.NowMs-opts.Config.MinCompactionLagMs {
				break
			}
		}
		plan.cleanable++
	}
	var cleanBytes, dirtyBytes int64
	plan.dirtySegment = plan.cleanable
	for i := plan.cleanable - 1; i >= 0 && l.segments[i].nextOffset > firstDirty; i-- {
		plan.dirtySegment = i
	}
	for i, s := range l.segments[:plan.cleanable] {
		if i < plan.dirtySegment {
			cleanBytes += s.size
		} else {
			dirtyBytes += s.size
		}
	}
	if dirtyBytes == 0 {
		return plan, "nothing cleanable is dirty", nil
	}
	plan.ratio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	if opts.IgnoreDirtyRatio || plan.ratio > opts.Config.MinCleanableDirtyRatio {
		return plan, "", nil
	}
	overdue, err := l.compactionOverdueLocked(plan, opts)
	if err != nil || overdue {
		return plan, "", err
	}
	return plan, fmt.Sprintf("dirty ratio %.2f is not above %.2f", plan.ratio, opts.Config.MinCleanableDirtyRatio), nil
}

// compactionOverdueLocked reports whether max.compaction.lag.ms forces a
// pass: the first cleanable dirty segment's newest record is older than
// the lag. Measured by the newest record, which the segment tracks for
// retention, a record may wait up to the lag plus its segment's time span
// (segment.ms; the broker rolls a compacted topic's segments at the lag
// at most, as Kafka's maxSegmentMs does).
func (l *Log) compactionOverdueLocked(plan cleanPlan, opts CleanOptions) (bool, error) {
	if opts.Config.MaxCompactionLagMs <= 0 || plan.dirtySegment >= plan.cleanable {
		return false, nil
	}
	maxTimestampMs, err := l.segmentMaxTimestampLocked(l.segments[plan.dirtySegment])
	if err != nil {
		return false, err
	}
	return maxTimestampMs >= 0 && maxTimestampMs <= opts.NowMs-opts.Config.MaxCompactionLagMs, nil
}

// segmentMaxTimestampLocked is the newest record timestamp in s (-1 for
// none), as the segment tracks it for retention (its time index, rebuilt
// by recovery when missing).
func (l *Log) segmentMaxTimestampLocked(s *segment) (int64, error) {
	return s.maxTimestampMs, nil
}

// offsetMap is the latest offset of each key in [start, end) of the dirty
// section, and the last batch of each idempotent producer below end, whose
// header the cleaner keeps (KIP-98: the producer's state is rebuilt from
// the log's batch headers, and its last sequence must survive).
type offsetMap struct {
	latest map[string]record.Offset
	// end is the first offset not in the map: the pass cleans below it
	// and the cleaner checkpoint moves to it.
	end            record.Offset
	lastOfProducer map[int64]record.Offset
	bytes          int64
}

// supersedes reports whether the map holds a later record of key than the
// one at offset.
func (m *offsetMap) supersedes(key []byte, offset record.Offset) bool {
	latest, ok := m.latest[string(key)]
	return ok && latest > offset
}

// buildOffsetMapLocked records the latest offset of every key in the dirty
// section, batch by batch, stopping before the first batch whose new keys
// would take the map past limitBytes (the first batch always goes in, so a
// pass always makes progress). Control batches carry no keys.
func (l *Log) buildOffsetMapLocked(plan cleanPlan, limitBytes int64) (*offsetMap, error) {
	m := &offsetMap{latest: map[string]record.Offset{}, lastOfProducer: map[int64]record.Offset{},
		end: l.segments[plan.cleanable-1].nextOffset}
	for _, s := range l.segments[:plan.cleanable] {
		stop, err := l.mapSegmentLocked(s, m, plan.firstDirty, limitBytes)
		if err != nil {
			return nil, err
		}
		if stop {
			break
		}
	}
	return m, nil
}

// mapSegmentLocked adds s's dirty batches to m and reports whether the map
// is full (m.end is then where it stopped).
func (l *Log) mapSegmentLocked(s *segment, m *offsetMap, firstDirty record.Offset, limitBytes int64) (bool, error) {
	for position := int64(0); position < s.size; {
		batch, header, err := s.readBatch(position, l.limits)
		if err != nil {
			return false, l.failLocked(fmt.Errorf("cleaner read of %s at %d: %w", segmentFileName(s.baseOffset), position, err))
		}
		position += batchSize(header)
		if header.LastOffset() < firstDirty || header.IsControl() {
			m.noteProducer(header)
			continue
		}
		_, records, err := record.DecodeRecords(batch, l.limits.MaxBatchBytes, cleanerDecompressedBatchBytesMax)
		if err != nil {
			return false, l.failLocked(fmt.Errorf("cleaner decode of %s at offset %d: %w", segmentFileName(s.baseOffset), header.BaseOffset, err))
		}
		var added int64
		for _, r := range records {
			if _, ok := m.latest[string(r.Key)]; r.Key != nil && !ok {
				added += int64(len(r.Key)) + offsetMapEntryOverheadBytes
			}
		}
		if m.bytes > 0 && m.bytes+added > limitBytes {
			m.end = header.BaseOffset
			return true, nil
		}
		m.bytes += added
		for _, r := range records {
			if offset := header.BaseOffset + record.Offset(r.OffsetDelta); r.Key != nil && offset >= firstDirty {
				m.latest[string(r.Key)] = offset
			}
		}
		m.noteProducer(header)
	}
	return false, nil
}

// noteProducer remembers header as its producer's last batch so far.
func (m *offsetMap) noteProducer(header record.Header) {
	if header.ProducerID >= 0 && header.BaseOffset < m.end {
		m.lastOfProducer[header.ProducerID] = header.BaseOffset
	}
}
