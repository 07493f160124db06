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
// Entries are written behind, as segment bytes are (pending.go): add
// appends an entry in memory only, on the goroutine that appends, and a
// sync job (or a drain) writes the entries past flushed to the file, after
// its segment's bytes. The node loop never calls write(2) on an index.
// flushed is how many entries the file holds as the owner sees it (a
// completed job or a drain wrote them), changed under the log's mu;
// written is how many it holds, changed under the log's syncMu by jobs,
// drains and truncations.
//
// Invariants: flushed <= written <= length(); while spilled, entries is nil
// and the file holds count entries (flushed == written == count), the
// newest of them newest: only an index whose entries are all in its file
// is spilled.
type entryFile[E any] struct {
	file       disk.File
	entries    []E
	entryBytes int64
	decode     func([]byte) E
	encode     func([]byte, E) []byte
	spilled    bool
	count      int
	newest     E
	flushed    int
	written    int
}

// newEntryFile is an empty index over file, whose entries are entryBytes
// long, read with decode and appended to a buffer with encode.
func newEntryFile[E any](file disk.File, entryBytes int64, decode func([]byte) E, encode func([]byte, E) []byte) entryFile[E] {
	return entryFile[E]{file: file, entryBytes: entryBytes, decode: decode, encode: encode}
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

// spill drops the entries from memory; the file keeps them. Every entry
// must be in the file already (flushed): a spilled index is read from it.
func (f *entryFile[E]) spill() {
	if f.spilled {
		return
	}
	if f.flushed != len(f.entries) {
		panic(fmt.Sprintf("commitlog: %s spilled with entries [%d, %d) not written", f.file.Name(), f.flushed, len(f.entries)))
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
// keeps its original's time index file, whose entries are all written.
func (f *entryFile[E]) adopt(other *entryFile[E]) {
	f.entries, f.spilled, f.count, f.newest = other.entries, other.spilled, other.count, other.newest
	f.flushed, f.written = other.flushed, other.written
}

// setWritten makes entries the index's, all of them in its file already:
// the cleaner wrote them there.
func (f *entryFile[E]) setWritten(entries []E) {
	f.entries, f.spilled, f.count = entries, false, 0
	f.flushed, f.written = len(entries), len(entries)
}

// add appends an entry in memory; a sync job or a drain writes it.
func (f *entryFile[E]) add(entry E) error {
	if err := f.unspill(); err != nil {
		return err
	}
	f.entries = append(f.entries, entry)
	return nil
}

// pendingEntries is how many entries are not known to be in the file.
func (f *entryFile[E]) pendingEntries() int { return f.length() - f.flushed }

// entriesWrite is a job's write of an index's entries from start on,
// encoded as the file holds them: a copy, so later adds and truncations
// of the entries in memory never touch it.
type entriesWrite struct {
	start int
	data  []byte
}

// sealPending encodes the entries past flushed for a job to write.
func (f *entryFile[E]) sealPending() entriesWrite {
	write := entriesWrite{start: f.flushed}
	if pending := f.pendingEntries(); pending > 0 {
		write.data = make([]byte, 0, int64(pending)*f.entryBytes)
		for _, entry := range f.entries[f.flushed:] {
			write.data = f.encode(write.data, entry)
		}
	}
	return write
}

// end is the entry count the write leaves in the file.
func (f *entryFile[E]) end(write entriesWrite) int {
	return write.start + int(int64(len(write.data))/f.entryBytes)
}

// writeEntries writes a job's or a drain's entries to the file, skipping
// those it holds already (written): what a drain wrote before the job ran
// is not written twice. The caller holds the log's syncMu.
func (f *entryFile[E]) writeEntries(write entriesWrite) error {
	if f.written < write.start {
		panic(fmt.Sprintf("commitlog: %s holds %d entries, a write starts at %d", f.file.Name(), f.written, write.start))
	}
	end := f.end(write)
	if end <= f.written {
		return nil
	}
	n, err := f.file.Write(write.data[int64(f.written-write.start)*f.entryBytes:])
	f.written += int(int64(n) / f.entryBytes)
	if err != nil {
		return fmt.Errorf("write %s: %w", f.file.Name(), err)
	}
	if f.written != end {
		return fmt.Errorf("write %s: %w", f.file.Name(), io.ErrShortWrite)
	}
	return nil
}

// markFlushed records that the file holds the first end entries.
func (f *entryFile[E]) markFlushed(end int) {
	f.flushed = min(max(f.flushed, end), f.length())
}

// drain writes every pending entry to the file, on the calling goroutine.
// The caller holds the log's syncMu.
func (f *entryFile[E]) drain() error {
	if f.pendingEntries() == 0 {
		return nil
	}
	write := f.sealPending()
	if err := f.writeEntries(write); err != nil {
		return err
	}
	f.markFlushed(f.end(write))
	return nil
}

// keep drops every entry from the n-th on, in memory and on disk. The
// caller holds the log's syncMu, or is alone with the log.
func (f *entryFile[E]) keep(n int) error {
	if err := f.unspill(); err != nil {
		return err
	}
	if n == len(f.entries) {
		return nil
	}
	f.entries = f.entries[:n]
	f.flushed = min(f.flushed, n)
	if f.written <= n {
		return nil // entries [written, n) stay pending
	}
	f.written = n
	return f.file.Truncate(int64(n) * f.entryBytes)
}

// reset empties the index, in memory and on disk. The caller is alone with
// the log (recovery).
func (f *entryFile[E]) reset() error {
	f.entries, f.spilled, f.count = f.entries[:0], false, 0
	f.flushed, f.written = 0, 0
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
	// load fills entries with exactly the file's, or fails and the
	// caller resets the index.
	f.entries, f.spilled, f.count = f.entries[:0], false, 0
	f.flushed, f.written = int(size/f.entryBytes), int(size/f.entryBytes)
	return data, nil
}
