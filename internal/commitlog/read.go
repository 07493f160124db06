package commitlog

import (
	"fmt"
	"sort"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Chunk is a run of whole batches of one segment, or a part of one: in the
// segment's file (File), the form in which the server can send them to a
// socket without copying (sendfile when File is a disk.OSFile); or, for
// bytes appended and not yet written (pending.go), in memory (Bytes, File
// nil), which only a copy (ReadResult.AppendTo) may take. Position is
// where the bytes sit in the segment either way. A file chunk stays valid
// until the log truncates or deletes that segment; the caller must finish
// with it before it asks the log to.
//
// A memory chunk's bytes stay valid only until the log next completes a
// sync (CompleteSync) or drains (a roll, truncation, deletion, Close):
// either may hand the buffer to pendingPool, and a later append may fill
// it with other records. The caller copies them (AppendTo) on the
// goroutine that owns the log, before it returns to its loop; every
// caller in tide does so right after Read (broker route, the group
// coordinator's load, the simulator's checkers). A result that must
// outlive that is copied, or held only when InFiles; a reader on another
// goroutine uses ReadAppend, which copies under the log's lock.
type Chunk struct {
	File     disk.File
	Bytes    []byte
	Position int64
	Size     int64
}

// ReadResult is what Read found: whole batches covering offsets
// [FirstOffset, NextOffset), in Chunks. FirstOffset may be below the offset
// asked for, because the batch holding it is returned whole, as Kafka does;
// clients skip the records before their position.
type ReadResult struct {
	Chunks      []Chunk
	FirstOffset record.Offset
	NextOffset  record.Offset
	SizeBytes   int64
}

// Empty reports whether the read found no batch.
func (r ReadResult) Empty() bool { return len(r.Chunks) == 0 }

// InFiles reports whether every chunk is in a file, so that the result may
// be sent without a copy. A read below the high watermark always is: only
// bytes past the durable end offset can be pending, and the high watermark
// counts durable bytes only (with flush=always). The caller checks anyway.
func (r ReadResult) InFiles() bool {
	for _, chunk := range r.Chunks {
		if chunk.File == nil {
			return false
		}
	}
	return true
}

// AppendTo reads the chunks' bytes and appends them to dst: a file
// chunk's from its file, a memory chunk's by copy.
func (r ReadResult) AppendTo(dst []byte) ([]byte, error) {
	for _, chunk := range r.Chunks {
		if chunk.File == nil {
			dst = append(dst, chunk.Bytes...)
			continue
		}
		start := len(dst)
		dst = append(dst, make([]byte, chunk.Size)...)
		if _, err := chunk.File.ReadAt(dst[start:], chunk.Position); err != nil {
			return nil, fmt.Errorf("read %s at %d: %w", chunk.File.Name(), chunk.Position, err)
		}
	}
	return dst, nil
}

// Read returns whole batches from the one holding offset from, in log order,
// stopping before a batch that does not end at or below upTo (exclusive; pass
// the high watermark to serve consumers, the log end offset to serve
// followers) and before maxBytes would be exceeded. The first batch is
// returned even when it alone is larger than maxBytes, so that a consumer
// always makes progress (KIP-74).
//
// from must lie in [log start offset, log end offset]; reading at the log end
// offset returns an empty result.
func (l *Log) Read(from record.Offset, maxBytes int64, upTo record.Offset) (ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.readLocked(from, maxBytes, upTo)
}

// ReadAppend is Read followed by AppendTo(dst), both under the log's
// lock: for a reader on another goroutine than the owner's, which could
// not copy a memory chunk before the owner recycles it (Chunk). It
// returns the bytes read appended to dst, and the result without its
// chunks.
func (l *Log) ReadAppend(dst []byte, from record.Offset, maxBytes int64, upTo record.Offset) (ReadResult, []byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	result, err := l.readLocked(from, maxBytes, upTo)
	if err != nil {
		return ReadResult{}, dst, err
	}
	dst, err = result.AppendTo(dst)
	result.Chunks = nil
	return result, dst, err
}

func (l *Log) readLocked(from record.Offset, maxBytes int64, upTo record.Offset) (ReadResult, error) {
	if err := l.usableLocked(); err != nil {
		return ReadResult{}, err
	}
	logEnd := l.logEndOffsetLocked()
	if from < l.logStartOffset || from > logEnd {
		return ReadResult{}, fmt.Errorf("%w: read at %d outside [%d, %d]", ErrOffsetOutOfRange, from, l.logStartOffset, logEnd)
	}
	upTo = min(upTo, logEnd)
	result := ReadResult{FirstOffset: from, NextOffset: from}
	if from >= upTo {
		return result, nil
	}
	index := l.segmentIndexLocked(from)
	start, known := l.cursors.find(l.segments[index], l.syncGeneration, from)
	first := true
	for ; index < len(l.segments); index++ {
		if !known {
			found, ok, err := l.segments[index].find(from)
			if err != nil {
				return result, err
			}
			if !ok {
				continue // every batch of this segment ends below from
			}
			start = found.position
		}
		end, done, err := l.readSegmentLocked(l.segments[index], &result, start, maxBytes, upTo, &first)
		if err != nil {
			return result, err
		}
		if done {
			if !result.Empty() {
				l.cursors.remember(from, readCursor{segment: l.segments[index], generation: l.syncGeneration, offset: result.NextOffset, position: end})
			}
			return result, nil
		}
		known = false
	}
	return result, nil
}

// readSegmentLocked adds the segment's qualifying batches from position
// on to result, and returns the position it stopped at and whether the
// read is complete.
func (l *Log) readSegmentLocked(s *segment, result *ReadResult, position int64, maxBytes int64, upTo record.Offset, first *bool) (int64, bool, error) {
	start := position
	headers := newHeaderReader(s)
	defer headers.release()
	for position < s.size {
		header, err := headers.header(position)
		if err == nil && position+batchSize(header) > s.size {
			err = fmt.Errorf("batch of %d bytes runs past the segment end: %w", batchSize(header), record.ErrCorrupt)
		}
		if err == nil && !*first && header.BaseOffset != result.NextOffset {
			err = fmt.Errorf("batch at offset %d follows one ending at %d: %w", header.BaseOffset, result.NextOffset, record.ErrCorrupt)
		}
		if err != nil {
			return position, true, &CorruptionError{Segment: segmentFileName(s.baseOffset), Position: position, Offset: result.NextOffset, Cause: err}
		}
		if header.NextOffset() > upTo || (!*first && result.SizeBytes+batchSize(header) > maxBytes) {
			break
		}
		if *first {
			result.FirstOffset = header.BaseOffset
			*first = false
		}
		result.SizeBytes += batchSize(header)
		result.NextOffset = header.NextOffset()
		position += batchSize(header)
	}
	result.Chunks = s.chunks(result.Chunks, start, position)
	return position, position < s.size, nil
}

// chunks appends the segment's bytes [start, end) to chunks: the part
// below flushed as a file chunk, the rest as memory chunks.
func (s *segment) chunks(chunks []Chunk, start, end int64) []Chunk {
	if fileEnd := min(end, s.flushed); start < fileEnd {
		chunks = append(chunks, Chunk{File: s.file, Position: start, Size: fileEnd - start})
	}
	if from := max(start, s.flushed); from < end {
		chunks = s.pendingChunks(chunks, from, end)
	}
	return chunks
}

// segmentIndexLocked returns the index of the segment holding offset: the
// last one whose base offset is at or below it.
func (l *Log) segmentIndexLocked(offset record.Offset) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })
	return max(i-1, 0)
}
