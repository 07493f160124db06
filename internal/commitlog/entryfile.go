package commitlog

import (
	"errors"
	"fmt"
	"io"

	"github.com/tidelog/tide/internal/disk"
)

// entryFile is the file behind one of a segment's indexes: fixed-size
// entries appended in order, the same entries kept in memory. The offset
// index and the time index differ only in their entry's layout and in the
// order each checks; the file handling is this.
type entryFile[E any] struct {
	file    disk.File
	entries []E
}

// write appends an entry, encoded by the caller.
func (f *entryFile[E]) write(entry E, encoded []byte) error {
	if _, err := f.file.Write(encoded); err != nil {
		return err
	}
	f.entries = append(f.entries, entry)
	return nil
}

// keep drops every entry from the n-th on, in memory and on disk.
func (f *entryFile[E]) keep(n int, entryBytes int64) error {
	if n == len(f.entries) {
		return nil
	}
	f.entries = f.entries[:n]
	return f.file.Truncate(int64(n) * entryBytes)
}

// reset empties the index, in memory and on disk.
func (f *entryFile[E]) reset() error {
	f.entries = f.entries[:0]
	return f.file.Truncate(0)
}

// readWhole reads the whole file for load, and empties the entries in
// memory that load fills again. A file that is not whole entries returns
// an error wrapping errIndexInconsistent.
func (f *entryFile[E]) readWhole(entryBytes int64) ([]byte, error) {
	size, err := f.file.Size()
	if err != nil {
		return nil, err
	}
	if size%entryBytes != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not whole entries of %d", errIndexInconsistent, size, entryBytes)
	}
	data := make([]byte, size)
	if _, err := f.file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	f.entries = f.entries[:0]
	return data, nil
}
