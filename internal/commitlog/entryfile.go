package commitlog

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/tidelog/tide/internal/disk"
)

// entryFile is the file behind one of a segment's indexes: fixed-size
// entries appended in order. The offset index and the time index differ
// only in their entry's layout and in the order each checks; the file
// handling is this.
//
// The active segment's entries are kept in memory as well, where appends
// and truncations change them. An inactive segment's are not (spill):
// kept for every segment they grew with the backlog, one entry of each
// index per 4 KiB of small batches, 6.8 MiB of heap per GiB of log
// (BenchmarkIndexMemory). A spilled index is searched in its file, a
// binary search of entry reads through the page cache (Kafka maps its
// index files instead), and read back into memory (unspill) before
// anything changes it: a truncation into it, or appends once it is the
// active segment's again.
//
// Invariant: while spilled, entries is nil and the file holds count
// entries, the newest of them newest.
type entryFile[E any] struct {
	file       disk.File
	entries    []E
	entryBytes int64
	decode     func([]byte) E
	spilled    bool
	count      int
	newest     E
}

// newEntryFile is an empty index over file, whose entries are entryBytes
// long and read with decode.
func newEntryFile[E any](file disk.File, entryBytes int64, decode func([]byte) E) entryFile[E] {
	return entryFile[E]{file: file, entryBytes: entryBytes, decode: decode}
}

// length is how many entries the index has.
func (f *entryFile[E]) length() int {
	if f.spilled {
		return f.count
	}
	return len(f.entries)
}

// at is the i-th entry; false when a spilled index's file could not be
// read, which its callers take as no entry (a scan from the segment's
// start, slower but right: the index is derived data).
func (f *entryFile[E]) at(i int) (E, bool) {
	if !f.spilled {
		return f.entries[i], true
	}
	buffer := make([]byte, f.entryBytes)
	if _, err := f.file.ReadAt(buffer, int64(i)*f.entryBytes); err != nil {
		var zero E
		return zero, false
	}
	return f.decode(buffer), true
}

// search is sort.Search over the entries: the first index at which found
// holds, or length(); false when a read failed.
func (f *entryFile[E]) search(found func(E) bool) (int, bool) {
	failed := false
	i := sort.Search(f.length(), func(i int) bool {
		entry, ok := f.at(i)
		failed = failed || !ok
		return !ok || found(entry)
	})
	return i, !failed
}

// last is the newest entry, if any.
func (f *entryFile[E]) last() (E, bool) {
	switch {
	case f.spilled && f.count > 0:
		return f.newest, true
	case !f.spilled && len(f.entries) > 0:
		return f.entries[len(f.entries)-1], true
	}
	var zero E
	return zero, false
}

// spill drops the entries from memory; the file keeps them.
func (f *entryFile[E]) spill() {
	if f.spilled {
		return
	}
	f.count = len(f.entries)
	f.newest, _ = f.last()
	f.entries, f.spilled = nil, true
}

// unspill reads a spilled index's entries back into memory.
func (f *entryFile[E]) unspill() error {
	if !f.spilled {
		return nil
	}
	data := make([]byte, int64(f.count)*f.entryBytes)
	if _, err := f.file.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && len(data) == 0) {
		return fmt.Errorf("read back a spilled index: %w", err)
	}
	entries := make([]E, 0, f.count)
	for i := int64(0); i < int64(len(data)); i += f.entryBytes {
		entries = append(entries, f.decode(data[i:i+f.entryBytes]))
	}
	f.entries, f.spilled, f.count = entries, false, 0
	return nil
}

// adopt takes other's entries, in memory or spilled: a cleaned segment
// keeps its original's time index file.
func (f *entryFile[E]) adopt(other *entryFile[E]) {
	f.entries, f.spilled, f.count, f.newest = other.entries, other.spilled, other.count, other.newest
}

// write appends an entry, encoded by the caller.
func (f *entryFile[E]) write(entry E, encoded []byte) error {
	if err := f.unspill(); err != nil {
		return err
	}
	if _, err := f.file.Write(encoded); err != nil {
		return err
	}
	f.entries = append(f.entries, entry)
	return nil
}

// keep drops every entry from the n-th on, in memory and on disk.
func (f *entryFile[E]) keep(n int) error {
	if err := f.unspill(); err != nil {
		return err
	}
	if n == len(f.entries) {
		return nil
	}
	f.entries = f.entries[:n]
	return f.file.Truncate(int64(n) * f.entryBytes)
}

// reset empties the index, in memory and on disk.
func (f *entryFile[E]) reset() error {
	f.entries, f.spilled, f.count = f.entries[:0], false, 0
	return f.file.Truncate(0)
}

// readWhole reads the whole file for load, and empties the entries in
// memory that load fills again. A file that is not whole entries returns
// an error wrapping errIndexInconsistent.
func (f *entryFile[E]) readWhole() ([]byte, error) {
	size, err := f.file.Size()
	if err != nil {
		return nil, err
	}
	if size%f.entryBytes != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not whole entries of %d", errIndexInconsistent, size, f.entryBytes)
	}
	data := make([]byte, size)
	if _, err := f.file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	f.entries, f.spilled, f.count = f.entries[:0], false, 0
	return data, nil
}
