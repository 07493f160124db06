package commitlog

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// segment is one file of a partition log, holding record batches whose base
// offsets start at baseOffset, byte for byte as they were appended, plus its
// sparse offset index.
//
// Invariants: batches are contiguous (each starts at the previous one's next
// offset) and [baseOffset, nextOffset) are the offsets it holds; size is the
// bytes appended, of which [0, flushed) are in the file and [flushed, size)
// in pending (pending.go); every index entry names a batch start.
type segment struct {
	baseOffset record.Offset
	nextOffset record.Offset
	size       int64
	file       disk.File
	// flushed, pending and pendingOpen are the owner's view of what is
	// written (pending.go), changed under the log's mu; written is the
	// file's length, changed under its syncMu by jobs and drains.
	flushed     int64
	pending     [][]byte
	pendingOpen bool
	written     int64
	// pendingRunBytes counts the bytes appended since the last seal, and
	// pendingBufferHint is that count at the last seal: the room a fresh
	// pending buffer gets (appendPending).
	pendingRunBytes   int64
	pendingBufferHint int64
	index             offsetIndex
	// bytesSinceIndexEntry counts the bytes appended since the last index
	// entry; an entry is added once it reaches the index interval.
	bytesSinceIndexEntry int64
	timeIndex            timeIndex
	// createdAtMs is the log's clock (Log.SetClock) when this process
	// created or opened the segment, or -1 if the log had no clock yet: the
	// age of a segment whose batches carry no timestamps, for rolling
	// (segment.ms). A restart restarts it.
	createdAtMs int64
	// firstTimestampMs is the max timestamp of the segment's first batch,
	// or -1: what Kafka measures a segment's age from when rolling
	// (LogSegment.rollingBasedTimestamp), so that segment.ms follows the
	// records' time, not the wall clock. Known for the active segment,
	// which recovery always scans.
	firstTimestampMs int64
	// maxTimestampMs is the largest batch max timestamp in the segment (-1
	// for none), and offsetOfMaxTimestamp the last offset of the first
	// batch carrying it: for retention by time (Kafka's largestTimestamp)
	// and ListOffsets' MAX_TIMESTAMP.
	maxTimestampMs       int64
	offsetOfMaxTimestamp record.Offset
}

func segmentFileName(base record.Offset) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }
func indexFileName(base record.Offset) string   { return fmt.Sprintf("%020d%s", base, indexSuffix) }
func timeIndexFileName(base record.Offset) string {
	return fmt.Sprintf("%020d%s", base, timeIndexSuffix)
}

// parseSegmentFileName returns the base offset named by a segment file name.
func parseSegmentFileName(name string) (record.Offset, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return record.Offset(base), true
}

// createSegment creates an empty segment and its indexes, replacing any old
// files of the same name. nowMs is the log's clock, -1 if it has none.
func createSegment(fs disk.FS, dir string, base record.Offset, nowMs int64) (*segment, error) {
	file, err := fs.Create(path.Join(dir, segmentFileName(base)))
	if err != nil {
		return nil, err
	}
	indexFile, err := fs.Create(path.Join(dir, indexFileName(base)))
	if err != nil {
		file.Close()
		return nil, err
	}
	timeIndexFile, err := fs.Create(path.Join(dir, timeIndexFileName(base)))
	if err != nil {
		file.Close()
		indexFile.Close()
		return nil, err
	}
	return &segment{
		baseOffset: base, nextOffset: base, file: file,
		index: newOffsetIndex(indexFile), timeIndex: newTimeIndex(timeIndexFile), createdAtMs: nowMs,
		firstTimestampMs: -1, maxTimestampMs: -1, offsetOfMaxTimestamp: -1,
	}, nil
}

// openOrCreate opens name, creating it empty when it is missing.
func openOrCreate(fs disk.FS, name string) (disk.File, error) {
	file, err := fs.Open(name)
	if errors.Is(err, disk.ErrNotExist) {
		file, err = fs.Create(name)
	}
	return file, err
}

// openSegment opens an existing segment file and its indexes (creating an
// empty index when one is missing). Its next offset is not known until the
// caller recovers or loads it.
func openSegment(fs disk.FS, dir string, base record.Offset, nowMs int64) (*segment, error) {
	file, err := fs.Open(path.Join(dir, segmentFileName(base)))
	if err != nil {
		return nil, err
	}
	size, err := file.Size()
	if err != nil {
		file.Close()
		return nil, err
	}
	indexFile, err := openOrCreate(fs, path.Join(dir, indexFileName(base)))
	if err != nil {
		file.Close()
		return nil, err
	}
	timeIndexFile, err := openOrCreate(fs, path.Join(dir, timeIndexFileName(base)))
	if err != nil {
		file.Close()
		indexFile.Close()
		return nil, err
	}
	s := &segment{
		baseOffset: base, nextOffset: base, file: file,
		index: newOffsetIndex(indexFile), timeIndex: newTimeIndex(timeIndexFile), createdAtMs: nowMs,
		firstTimestampMs: -1, maxTimestampMs: -1, offsetOfMaxTimestamp: -1,
	}
	s.setFileSize(size)
	return s, nil
}

// readHeader reads and parses the batch header at position.
func (s *segment) readHeader(position int64) (record.Header, error) {
	var buf [record.HeaderSize]byte
	if position+record.HeaderSize > s.size {
		return record.Header{}, fmt.Errorf("header at %d runs past segment end %d: %w", position, s.size, record.ErrTruncated)
	}
	if _, err := s.readAt(buf[:], position); err != nil {
		return record.Header{}, err
	}
	return record.ParseHeader(buf[:])
}

// readBatch reads the whole batch at position and validates it: the check a
// batch gets again when it comes back from the disk.
func (s *segment) readBatch(position int64, limits record.Limits) ([]byte, record.Header, error) {
	header, err := s.readHeader(position)
	if err != nil {
		return nil, record.Header{}, err
	}
	size := batchSize(header)
	if size > int64(limits.MaxBatchBytes) || position+size > s.size {
		// Let Validate classify it (too large or truncated) from the header.
		size = min(int64(limits.MaxBatchBytes), s.size-position)
		size = max(size, record.HeaderSize)
	}
	data := make([]byte, size)
	if _, err := s.readAt(data, position); err != nil && !errors.Is(err, io.EOF) {
		return nil, header, err
	}
	header, err = record.Validate(data, limits)
	return data, header, err
}

// canIndex reports whether the segment can hold offsets up to nextOffset
// (exclusive): whether every offset below it is within SegmentOffsetSpanMax
// of the base offset, as an index entry's relative offset must be.
func (s *segment) canIndex(nextOffset record.Offset) bool {
	return nextOffset-s.baseOffset <= SegmentOffsetSpanMax
}

// append copies batches (already validated and stamped, described by
// headers) to the end of the segment's pending bytes and indexes them; a
// sync job writes them to the file (pending.go). The caller has checked
// that the segment can index them (canIndex).
func (s *segment) append(batches []byte, headers []record.Header, indexInterval int64) error {
	for _, header := range headers {
		if !s.canIndex(header.NextOffset()) {
			panic(fmt.Sprintf("commitlog: batch [%d, %d) appended to segment %d, which cannot index it", header.BaseOffset, header.NextOffset(), s.baseOffset))
		}
	}
	position := s.size
	s.appendPending(batches)
	for _, header := range headers {
		if header.BaseOffset != s.nextOffset {
			panic(fmt.Sprintf("commitlog: batch at %d appended to segment ending at %d", header.BaseOffset, s.nextOffset))
		}
		s.observeTimestamp(header)
		if err := s.maybeIndex(header, position, indexInterval); err != nil {
			return err
		}
		position += batchSize(header)
		s.nextOffset = header.NextOffset()
	}
	s.size = position
	return nil
}

// observeTimestamp takes a batch's max timestamp into the segment's first
// and largest timestamps.
func (s *segment) observeTimestamp(header record.Header) {
	if header.BaseOffset == s.baseOffset {
		s.firstTimestampMs = header.MaxTimestampMs
	}
	if header.MaxTimestampMs > s.maxTimestampMs {
		s.maxTimestampMs, s.offsetOfMaxTimestamp = header.MaxTimestampMs, header.LastOffset()
	}
}

// resetTimestamps forgets the segment's timestamps, before a scan
// recomputes them.
func (s *segment) resetTimestamps() {
	s.firstTimestampMs, s.maxTimestampMs, s.offsetOfMaxTimestamp = -1, -1, -1
}

// indexFinalTimestamp forces the time index entry for the segment's
// largest timestamp, when it becomes inactive (Kafka's
// onBecomeInactiveSegment): an inactive segment's last time index entry is
// its largest timestamp, which recovery reads back instead of scanning.
func (s *segment) indexFinalTimestamp() error {
	if s.maxTimestampMs < 0 {
		return nil
	}
	return s.timeIndex.maybeAppend(timeIndexEntry{timestampMs: s.maxTimestampMs, relativeOffset: uint32(s.offsetOfMaxTimestamp - s.baseOffset)})
}

// maybeIndex adds an index entry for the batch at position when enough bytes
// have gone by since the last one. The batch must lie within the segment's
// span (canIndex): appends check it before writing, recovery treats a batch
// outside it as damage.
func (s *segment) maybeIndex(header record.Header, position, indexInterval int64) error {
	if s.bytesSinceIndexEntry < indexInterval {
		s.bytesSinceIndexEntry += batchSize(header)
		return nil
	}
	s.bytesSinceIndexEntry = batchSize(header)
	err := s.index.append(indexEntry{
		relativeOffset: uint32(header.BaseOffset - s.baseOffset),
		position:       uint32(position),
	})
	if err != nil || s.maxTimestampMs < 0 {
		return err
	}
	// Beside each offset index entry, the largest timestamp so far (KIP-33,
	// Kafka's LogSegment.append).
	return s.indexFinalTimestamp()
}

// spillIndexes drops the indexes' entries from memory once the segment is
// no longer the active one (entryFile).
func (s *segment) spillIndexes() {
	s.index.spill()
	s.timeIndex.spill()
}

// batchPosition is where a batch sits in a segment.
type batchPosition struct {
	position int64
	header   record.Header
}

// find returns the first batch whose last offset is at or above offset, and
// false when every batch ends below it.
func (s *segment) find(offset record.Offset) (batchPosition, bool, error) {
	if offset >= s.nextOffset {
		return batchPosition{}, false, nil
	}
	position := int64(0) // a read that goes on from the segment before starts at its first batch
	if offset > s.baseOffset {
		position = s.index.lookup(uint32(offset - s.baseOffset))
	}
	for position < s.size {
		header, err := s.readHeader(position)
		if err != nil {
			return batchPosition{}, false, err
		}
		if header.LastOffset() >= offset {
			return batchPosition{position: position, header: header}, true, nil
		}
		position += batchSize(header)
	}
	return batchPosition{}, false, nil
}

// truncateTo removes every batch whose last offset is at or above offset and
// returns the segment's new next offset, which is at or below offset.
func (s *segment) truncateTo(offset record.Offset) (record.Offset, error) {
	found, ok, err := s.find(offset)
	if err != nil || !ok {
		return s.nextOffset, err
	}
	if err := s.index.truncateToPosition(found.position); err != nil {
		return 0, err
	}
	if err := s.timeIndex.truncateToOffset(uint32(found.header.BaseOffset - s.baseOffset)); err != nil {
		return 0, err
	}
	if err := s.file.Truncate(found.position); err != nil {
		return 0, err
	}
	s.setFileSize(found.position)
	s.nextOffset = found.header.BaseOffset
	s.bytesSinceIndexEntry = 0
	return s.nextOffset, s.recomputeTimestamps()
}

// recomputeTimestamps reads the segment's batch headers again for its
// first and largest timestamps, after a truncation removed batches.
func (s *segment) recomputeTimestamps() error {
	s.resetTimestamps()
	for position := int64(0); position < s.size; {
		header, err := s.readHeader(position)
		if err != nil {
			return err
		}
		if position == 0 {
			s.firstTimestampMs = header.MaxTimestampMs
		}
		if header.MaxTimestampMs > s.maxTimestampMs {
			s.maxTimestampMs, s.offsetOfMaxTimestamp = header.MaxTimestampMs, header.LastOffset()
		}
		position += batchSize(header)
	}
	return nil
}

// close closes the segment's files without syncing them.
func (s *segment) close() error {
	return errors.Join(s.file.Close(), s.index.file.Close(), s.timeIndex.file.Close())
}

// remove closes and deletes the segment's files.
func (s *segment) remove(fs disk.FS, dir string) error {
	closeErr := s.close()
	removeErr := fs.Remove(path.Join(dir, segmentFileName(s.baseOffset)))
	indexErr := fs.Remove(path.Join(dir, indexFileName(s.baseOffset)))
	if errors.Is(indexErr, disk.ErrNotExist) {
		indexErr = nil
	}
	timeIndexErr := fs.Remove(path.Join(dir, timeIndexFileName(s.baseOffset)))
	if errors.Is(timeIndexErr, disk.ErrNotExist) {
		timeIndexErr = nil
	}
	return errors.Join(closeErr, removeErr, indexErr, timeIndexErr)
}

// sync makes the segment and its index durable.
func (s *segment) sync() error {
	if err := s.file.Sync(); err != nil {
		return err
	}
	if err := s.index.file.Sync(); err != nil {
		return err
	}
	return s.timeIndex.file.Sync()
}

// batchSize is a batch's size in bytes as a file position.
func batchSize(header record.Header) int64 { return int64(header.Size()) }
