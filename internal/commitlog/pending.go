package commitlog

import (
	"errors"
	"fmt"
	"io"
)

// Write-behind (docs/storage.md, "The sync pipeline"): an append copies
// its batches into the active segment's pending buffers, on the goroutine
// that appends (the node loop), and a sync job writes them to the file
// before it syncs it, on an I/O worker. The loop never calls write(2) on
// a segment: a write can block under the kernel's dirty-page throttling,
// and on the produce path it was a quarter of the loop's time.
//
// A segment's bytes [0, flushed) are known to be in its file, as the
// loop sees it, and [flushed, size) are in pending, in order. A pending
// buffer handed to a job is sealed: nothing is appended to it again. A
// buffer whose bytes are in the file goes back to pendingPool when the
// segment drops it (markFlushed), for a later append to fill: a reader
// that got a slice of it (a memory Chunk) has copied it by then (read.go).
// The file's own length, written, is what jobs and drains
// have written, guarded by the log's syncMu; flushed <= written <= size.
// Only the active segment has pending bytes: a roll drains the segment it
// closes.

// pendingBufferBytesMax bounds the capacity a pending buffer is given
// ahead of its appends: a job writes a longer run as several buffers.
const pendingBufferBytesMax = 1 << 20

// appendPending copies batches to the end of the segment's pending bytes:
// into its open buffer while it has room, else into a fresh one. A buffer
// never grows by reallocation (which for large slices copies everything
// again at each 1.25x growth: a 16 KiB append cost 60 µs under a slow
// sync in BenchmarkAppendPipeline); a fresh one gets the room the
// appends between the last two jobs took (pendingRunBytes), or twice the
// full one's, up to pendingBufferBytesMax, rounded up to the pool's class
// (pendingpool.go).
func (s *segment) appendPending(batches []byte) {
	n := len(s.pending)
	if n > 0 && s.pendingOpen && len(s.pending[n-1])+len(batches) <= cap(s.pending[n-1]) {
		s.pending[n-1] = append(s.pending[n-1], batches...)
		s.pendingRunBytes += int64(len(batches))
		return
	}
	room := s.pendingBufferHint
	if n > 0 && s.pendingOpen {
		room = 2 * int64(cap(s.pending[n-1]))
	}
	room = max(int64(len(batches)), min(room, pendingBufferBytesMax))
	buffer := append(getPendingBuffer(room), batches...)
	s.pending = append(s.pending, buffer)
	s.pendingOpen = true
	s.pendingRunBytes += int64(len(batches))
}

// pendingBytes is how many appended bytes are not known to be in the file.
func (s *segment) pendingBytes() int64 { return s.size - s.flushed }

// sealPending hands the pending buffers out: the next append starts a
// fresh one, sized for as many bytes as came since the last seal. It
// returns a copy of the list, which a job keeps.
func (s *segment) sealPending() [][]byte {
	s.pendingOpen = false
	s.pendingBufferHint, s.pendingRunBytes = s.pendingRunBytes, 0
	return append([][]byte(nil), s.pending...)
}

// markFlushed records that the file holds the segment's bytes up to end,
// and drops the pending buffers below it. A job's end is a boundary
// between buffers (it wrote whole buffers), or at or below flushed when a
// drain got there first.
func (s *segment) markFlushed(end int64) {
	for s.flushed < end {
		if len(s.pending) == 0 || s.flushed+int64(len(s.pending[0])) > end {
			panic(fmt.Sprintf("commitlog: segment %d flushed to %d, which is not the end of a pending buffer (flushed %d, size %d)", s.baseOffset, end, s.flushed, s.size))
		}
		s.flushed += int64(len(s.pending[0]))
		putPendingBuffer(s.pending[0])
		s.pending[0] = nil
		s.pending = s.pending[1:]
	}
	if len(s.pending) == 0 {
		s.pending, s.pendingOpen = nil, false
	}
}

// setFileSize makes the segment exactly its file's first size bytes, with
// nothing pending: after opening it, recovery cutting it, or a truncation,
// each of which works on a drained segment. The caller holds the log's
// syncMu or is alone with the log (Open).
func (s *segment) setFileSize(size int64) {
	if s.size > s.flushed && size > s.flushed {
		panic(fmt.Sprintf("commitlog: segment %d cut to %d with bytes [%d, %d) unwritten", s.baseOffset, size, s.flushed, s.size))
	}
	s.size, s.flushed, s.written = size, size, size
	s.pending, s.pendingOpen = nil, false
}

// writeBuffers writes buffers, which hold the segment's bytes from start
// on, to the file, skipping what it holds already (written): a job whose
// bytes a drain wrote before it ran writes nothing. One Write per buffer.
// The caller holds the log's syncMu.
func (s *segment) writeBuffers(start int64, buffers [][]byte) error {
	if s.written < start {
		panic(fmt.Sprintf("commitlog: segment %d written to %d, a write starts at %d", s.baseOffset, s.written, start))
	}
	position := start
	for _, buffer := range buffers {
		end := position + int64(len(buffer))
		if end > s.written {
			n, err := s.file.Write(buffer[s.written-position:])
			s.written += int64(n)
			if err != nil {
				return fmt.Errorf("write %s: %w", s.file.Name(), err)
			}
			if s.written != end {
				return fmt.Errorf("write %s: %w", s.file.Name(), io.ErrShortWrite)
			}
		}
		position = end
	}
	return nil
}

// readAt reads the segment's bytes at position into p, as io.ReaderAt
// does: [.., flushed) from the file, the rest from the pending buffers.
func (s *segment) readAt(p []byte, position int64) (int, error) {
	n := 0
	if position < s.flushed {
		fromFile := min(int64(len(p)), s.flushed-position)
		read, err := s.file.ReadAt(p[:fromFile], position)
		n = read
		if err != nil && !(errors.Is(err, io.EOF) && int64(read) == fromFile) {
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
	}
	at := s.flushed
	for _, buffer := range s.pending {
		end := at + int64(len(buffer))
		if want := position + int64(n); want < end && want >= at {
			n += copy(p[n:], buffer[want-at:])
			if n == len(p) {
				return n, nil
			}
		}
		at = end
	}
	return n, io.EOF
}

// pendingChunks appends to chunks the segment's bytes [position, end),
// which lie in pending, as memory chunks: one per buffer they touch.
func (s *segment) pendingChunks(chunks []Chunk, position, end int64) []Chunk {
	at := s.flushed
	for _, buffer := range s.pending {
		bufferEnd := at + int64(len(buffer))
		from, to := max(position, at), min(end, bufferEnd)
		if from < to {
			chunks = append(chunks, Chunk{Bytes: buffer[from-at : to-at : to-at], Position: from, Size: to - from})
		}
		at = bufferEnd
	}
	return chunks
}

// sealWrite seals the segment's pending bytes and index entries for a job.
func (s *segment) sealWrite() segmentWrite {
	write := segmentWrite{segment: s, start: s.flushed}
	if s.pendingBytes() > 0 {
		write.buffers = s.sealPending()
	}
	write.index = s.index.sealPending()
	write.timeIndex = s.timeIndex.sealPending()
	return write
}

// pendingIndexEntries is how many entries of the segment's two indexes are
// not known to be in their files.
func (s *segment) pendingIndexEntries() int {
	return s.index.pendingEntries() + s.timeIndex.pendingEntries()
}

// run writes a job's bytes, then its index entries: an entry names a batch
// the segment's file holds by the time the entry is in its own file (the
// job syncs the segment, and recovery checks every index entry of a
// trusted segment against its batches and rebuilds one that disagrees).
// The caller holds the log's syncMu.
func (w segmentWrite) run() error {
	if err := w.segment.writeBuffers(w.start, w.buffers); err != nil {
		return err
	}
	if err := w.segment.index.writeEntries(w.index); err != nil {
		return err
	}
	return w.segment.timeIndex.writeEntries(w.timeIndex)
}

// markFlushed records, at the job's completion, that its bytes and
// entries are in the files.
func (w segmentWrite) markFlushed() {
	w.segment.markFlushed(w.end())
	w.segment.index.markFlushed(w.segment.index.end(w.index))
	w.segment.timeIndex.markFlushed(w.segment.timeIndex.end(w.timeIndex))
}

// drain writes every pending byte and index entry of the segment, on the
// calling goroutine. The caller holds the log's syncMu.
func (s *segment) drain() error {
	if s.pendingBytes() > 0 {
		if err := s.writeBuffers(s.flushed, s.pending); err != nil {
			return err
		}
		s.markFlushed(s.size)
	}
	if err := s.index.drain(); err != nil {
		return err
	}
	return s.timeIndex.drain()
}
