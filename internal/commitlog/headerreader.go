package commitlog

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tidelog/tide/internal/record"
)

// headerWindowBytes is how much of a segment a headerReader reads at once
// when batches are small: 16 batches of 1 KiB per read(2) rather than one.
const headerWindowBytes = 16 << 10

// headerWindows recycle the readers' windows: a read allocates none.
var headerWindows = sync.Pool{New: func() any { return new([headerWindowBytes]byte) }}

// headerReader reads the headers of consecutive batches of one segment,
// for Read, which walks the headers of every batch it returns to stop at
// a batch boundary. One read(2) of a 61-byte header per batch made a read
// of 1 MiB in 1 KiB batches a thousand system calls
// (BenchmarkReadFromStart); after a small batch the reader reads a window
// of the segment and parses the next headers out of it. After a large
// batch (a quarter of the window or more) it reads the next header alone,
// so large batches are not copied through user space, which sendfile
// spares them.
type headerReader struct {
	segment *segment
	window  *[headerWindowBytes]byte
	// The window holds the segment's bytes [start, start+length).
	start, length int64
	// lastBatchBytes is the size of the batch last read, or 0.
	lastBatchBytes int64
}

func newHeaderReader(s *segment) headerReader {
	return headerReader{segment: s}
}

// header reads and parses the batch header at position, as
// segment.readHeader does.
func (r *headerReader) header(position int64) (record.Header, error) {
	s := r.segment
	if position+record.HeaderSize > s.size {
		return record.Header{}, fmt.Errorf("header at %d runs past segment end %d: %w", position, s.size, record.ErrTruncated)
	}
	if r.lastBatchBytes == 0 || r.lastBatchBytes >= headerWindowBytes/4 {
		header, err := s.readHeader(position)
		r.lastBatchBytes = batchSize(header)
		return header, err
	}
	if position < r.start || position+record.HeaderSize > r.start+r.length {
		if err := r.fill(position); err != nil {
			return record.Header{}, err
		}
	}
	at := position - r.start
	header, err := record.ParseHeader(r.window[at : at+record.HeaderSize])
	r.lastBatchBytes = batchSize(header)
	return header, err
}

// fill reads the window from position on, up to the segment's end.
func (r *headerReader) fill(position int64) error {
	if r.window == nil {
		r.window = headerWindows.Get().(*[headerWindowBytes]byte)
	}
	length := min(headerWindowBytes, r.segment.size-position)
	n, err := r.segment.readAt(r.window[:length], position)
	if int64(n) < length {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.length = 0
		return err
	}
	r.start, r.length = position, length
	return nil
}

// release gives the window back; the reader is not used after.
func (r *headerReader) release() {
	if r.window != nil {
		headerWindows.Put(r.window)
		r.window = nil
	}
}
