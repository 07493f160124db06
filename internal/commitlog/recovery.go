package commitlog

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// RecoveryReport says what Open found and what it repaired.
type RecoveryReport struct {
	// ScannedFrom is the offset from which batches were read and validated.
	ScannedFrom record.Offset
	// ScannedBatches counts the batches validated.
	ScannedBatches int
	// TruncatedBytes counts the bytes of a torn or corrupt tail cut off
	// (all above the recovery point), and RemovedSegments the segments
	// removed because they lay beyond it or below the log start offset.
	TruncatedBytes  int64
	RemovedSegments int
	// TailError is why the tail was cut, if it was.
	TailError error
	// IndexesRebuilt counts trusted segments whose indexes (offset or time)
	// were rebuilt because they disagreed with their segments or were
	// missing (a directory from before tide kept time indexes).
	IndexesRebuilt int
	// EpochCacheRebuilt is true when the epoch checkpoint was missing or
	// unreadable and the cache was rebuilt from every batch in the log.
	EpochCacheRebuilt bool
	// OffsetsCheckpointLost is true when the offsets checkpoint was
	// missing or unreadable, so the whole log was scanned and the high
	// watermark restarted at the log start offset.
	OffsetsCheckpointLost bool
}

// Open opens the partition log in cfg.Dir, creating it if needed, and
// recovers it: it trusts the segments below the recovery point (after
// checking their indexes), validates every batch from the segment holding
// the recovery point to the end, cuts a torn or corrupt tail there, and
// makes the epoch cache and checkpoints agree with what remains. Damage below
// the recovery point is never cut: Open returns a *CorruptionError instead,
// because those bytes were synced and may be acknowledged data.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("commitlog: %w", err)
	}
	cfg = cfg.withDefaults()
	l := &Log{cfg: cfg, limits: record.Limits{MaxBatchBytes: cfg.MaxBatchBytes}, clockMs: -1}
	if err := l.recover(); err != nil {
		for _, s := range l.segments {
			s.close()
		}
		return nil, err
	}
	for i := 0; i < len(l.segments)-1; i++ {
		l.segments[i].spillIndexes() // checked; only the active one's stay in memory
	}
	return l, nil
}

func (l *Log) recover() error {
	fs, dir := l.cfg.FS, l.cfg.Dir
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	bases, err := l.listAndCleanDirectory()
	if err != nil {
		return err
	}
	checkpoint := l.readOffsetsCheckpoint()
	for _, base := range bases {
		s, err := openSegment(fs, dir, base, l.clockMs)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
	}
	if err := l.dropSegmentsBelowLogStart(checkpoint.LogStartOffset); err != nil {
		return err
	}
	if len(l.segments) == 0 {
		return l.startEmpty(checkpoint.LogStartOffset)
	}
	l.logStartOffset = max(checkpoint.LogStartOffset, l.segments[0].baseOffset)
	scanFrom, err := l.loadTrustedSegments(checkpoint.RecoveryPoint)
	if err != nil {
		return err
	}
	scanned, err := l.scanFrom(scanFrom, checkpoint.RecoveryPoint)
	if err != nil {
		return err
	}
	logEnd := l.logEndOffsetLocked()
	if l.logStartOffset > logEnd {
		// Every record left is below the log start offset: they were
		// deleted, and the log restarts empty at its start.
		return l.restartEmpty(l.logStartOffset)
	}
	if checkpoint.RecoveryPoint > logEnd {
		return &CorruptionError{Segment: dir, Offset: logEnd, Cause: fmt.Errorf("log ends at %d, below its recovery point %d", logEnd, checkpoint.RecoveryPoint)}
	}
	if err := l.recoverEpochCache(scanned); err != nil {
		return err
	}
	return l.finishRecovery(min(checkpoint.HighWatermark, logEnd))
}

// listAndCleanDirectory removes leftovers of interrupted atomic writes and
// orphan indexes, and returns the segments' base offsets in order.
func (l *Log) listAndCleanDirectory() ([]record.Offset, error) {
	fs, dir := l.cfg.FS, l.cfg.Dir
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var bases []record.Offset
	segmentNames := map[string]bool{}
	for _, name := range names {
		if base, ok := parseSegmentFileName(name); ok {
			bases = append(bases, base)
			segmentNames[strings.TrimSuffix(name, segmentSuffix)] = true
		}
	}
	for _, name := range names {
		orphanIndex := strings.HasSuffix(name, indexSuffix) && !segmentNames[strings.TrimSuffix(name, indexSuffix)]
		// A .cleaned file is a cleaner's rewrite that a crash stopped
		// before its swap: the original it would replace is intact.
		orphanTimeIndex := strings.HasSuffix(name, timeIndexSuffix) && !segmentNames[strings.TrimSuffix(name, timeIndexSuffix)]
		if strings.HasSuffix(name, temporarySuffix) || strings.HasSuffix(name, cleanedSuffix) || orphanIndex || orphanTimeIndex {
			if err := fs.Remove(path.Join(dir, name)); err != nil {
				return nil, err
			}
		}
	}
	return bases, nil
}

// readOffsetsCheckpoint returns the checkpoint, or zeros (scan everything,
// high watermark from zero) when it is missing or unreadable.
func (l *Log) readOffsetsCheckpoint() offsetsCheckpoint {
	data, err := readSmallFile(l.cfg.FS, path.Join(l.cfg.Dir, offsetsCheckpointName))
	if err == nil {
		if checkpoint, err := unmarshalOffsetsCheckpoint(data); err == nil {
			return checkpoint
		}
	}
	if !errors.Is(err, disk.ErrNotExist) {
		l.recovery.OffsetsCheckpointLost = true
	}
	return offsetsCheckpoint{}
}

// dropSegmentsBelowLogStart finishes a retention deletion that a crash
// interrupted: segments wholly below the checkpointed log start offset.
func (l *Log) dropSegmentsBelowLogStart(logStart record.Offset) error {
	for len(l.segments) > 1 && l.segments[1].baseOffset <= logStart {
		if err := l.segments[0].remove(l.cfg.FS, l.cfg.Dir); err != nil {
			return err
		}
		l.segments = l.segments[1:]
		l.recovery.RemovedSegments++
	}
	return nil
}

// startEmpty creates the first segment of a new (or emptied) log.
func (l *Log) startEmpty(logStart record.Offset) error {
	s, err := createSegment(l.cfg.FS, l.cfg.Dir, logStart, l.clockMs)
	if err != nil {
		return err
	}
	l.segments = []*segment{s}
	l.logStartOffset = logStart
	l.recovery.ScannedFrom = logStart
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		return err
	}
	if err := l.recoverEpochCache(nil); err != nil {
		return err
	}
	return l.finishRecovery(logStart)
}

// restartEmpty removes every segment and starts an empty log at logStart.
func (l *Log) restartEmpty(logStart record.Offset) error {
	for _, s := range l.segments {
		l.recovery.RemovedSegments++
		if err := s.remove(l.cfg.FS, l.cfg.Dir); err != nil {
			return err
		}
	}
	l.segments = nil
	return l.startEmpty(logStart)
}

// loadTrustedSegments sets up every segment wholly below the recovery point
// (checking its index, rebuilding it if needed) and returns the index of the
// first segment recovery must scan.
func (l *Log) loadTrustedSegments(recoveryPoint record.Offset) (int, error) {
	scanFrom := 0
	for scanFrom < len(l.segments)-1 && l.segments[scanFrom+1].baseOffset <= recoveryPoint {
		s := l.segments[scanFrom]
		s.nextOffset = l.segments[scanFrom+1].baseOffset
		if !s.canIndex(s.nextOffset) {
			// The next segment's name says this one holds more offsets
			// than its index can address: its batches say so too, or
			// the names lie. Either way the synced log is not what tide
			// writes.
			return 0, &CorruptionError{Segment: path.Join(l.cfg.Dir, segmentFileName(s.baseOffset)), Position: 0, Offset: s.baseOffset,
				Cause: fmt.Errorf("segment spans offsets [%d, %d), more than the %d an index can address: %w", s.baseOffset, s.nextOffset, int64(SegmentOffsetSpanMax), record.ErrInvalid)}
		}
		if err := l.loadIndexes(s); err != nil {
			return 0, err
		}
		scanFrom++
	}
	return scanFrom, nil
}

// loadIndexes loads a trusted segment's offset and time indexes, checking
// them against the segment, and rebuilds both from its batch headers when
// either disagrees. The segment's largest timestamp is its time index's
// last entry (forced there when it rolled).
func (l *Log) loadIndexes(s *segment) error {
	err := s.index.load(s)
	if err == nil {
		err = s.timeIndex.load(s)
	}
	if err != nil {
		if !errors.Is(err, errIndexInconsistent) {
			return err
		}
		return l.rebuildIndex(s)
	}
	s.resetTimestamps()
	if last, ok := s.timeIndex.last(); ok {
		s.maxTimestampMs, s.offsetOfMaxTimestamp = last.timestampMs, s.baseOffset+record.Offset(last.relativeOffset)
	}
	return nil
}

// rebuildIndex rebuilds a trusted segment's indexes from its batch headers.
func (l *Log) rebuildIndex(s *segment) error {
	l.recovery.IndexesRebuilt++
	if err := s.index.reset(); err != nil {
		return err
	}
	if err := s.timeIndex.reset(); err != nil {
		return err
	}
	s.bytesSinceIndexEntry = 0
	s.resetTimestamps()
	expected := s.baseOffset
	for position := int64(0); position < s.size; {
		header, err := s.readHeader(position)
		if err == nil && (header.BaseOffset != expected || position+batchSize(header) > s.size) {
			err = fmt.Errorf("batch header says offset %d and %d bytes where offset %d was expected: %w", header.BaseOffset, batchSize(header), expected, record.ErrCorrupt)
		}
		if err == nil && !s.canIndex(header.NextOffset()) {
			err = errCannotIndex(s, header)
		}
		if err != nil {
			return &CorruptionError{Segment: path.Join(l.cfg.Dir, segmentFileName(s.baseOffset)), Position: position, Offset: expected, Cause: err}
		}
		s.observeTimestamp(header)
		if err := s.maybeIndex(header, position, l.cfg.IndexIntervalBytes); err != nil {
			return err
		}
		position += batchSize(header)
		expected = header.NextOffset()
	}
	if err := s.indexFinalTimestamp(); err != nil {
		return err
	}
	if expected != s.nextOffset {
		return &CorruptionError{Segment: path.Join(l.cfg.Dir, segmentFileName(s.baseOffset)), Position: s.size, Offset: expected,
			Cause: fmt.Errorf("segment ends at offset %d, the next one starts at %d: %w", expected, s.nextOffset, record.ErrCorrupt)}
	}
	return nil
}
