package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// indexEntryBytes is the size of one index entry on disk: the offset relative
// to the segment's base offset and the byte position of the batch that starts
// at it, both big-endian uint32, as in Kafka's .index files.
const indexEntryBytes = 8

// indexEntry maps the base offset of a batch to its position in the segment.
type indexEntry struct {
	relativeOffset uint32
	position       uint32
}

// offsetIndex is a segment's sparse offset index: one entry every
// IndexIntervalBytes of segment data, appended to a file and, for the
// active segment, kept in memory (entryFile).
// It is derived data: recovery rebuilds it from the segment whenever it
// disagrees with the segment, so it is synced only at roll, truncation
// and close, never by a sync job of the active segment; a job writes its
// entries after the segment's bytes (entryFile).
//
// Invariant: relative offsets and positions strictly increase.
type offsetIndex struct {
	entryFile[indexEntry]
}

// lookup returns the position of the last indexed batch whose base offset is
// at or below relative, or 0.
func (x *offsetIndex) lookup(relative uint32) int64 {
	i, ok := x.search(func(entry indexEntry) bool { return entry.relativeOffset > relative })
	if !ok || i == 0 {
		return 0
	}
	entry, ok := x.at(i - 1)
	if !ok {
		return 0
	}
	return int64(entry.position)
}

// decodeIndexEntry reads an entry as the file holds it.
func decodeIndexEntry(b []byte) indexEntry {
	return indexEntry{relativeOffset: binary.BigEndian.Uint32(b[0:4]), position: binary.BigEndian.Uint32(b[4:8])}
}

// encodeIndexEntry appends an entry as the file holds it.
func encodeIndexEntry(b []byte, entry indexEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, entry.relativeOffset)
	return binary.BigEndian.AppendUint32(b, entry.position)
}

// newOffsetIndex is the offset index kept in file.
func newOffsetIndex(file disk.File) offsetIndex {
	return offsetIndex{newEntryFile(file, indexEntryBytes, decodeIndexEntry, encodeIndexEntry)}
}

// append adds an entry; it must come after every existing entry.
func (x *offsetIndex) append(entry indexEntry) error {
	if last, ok := x.last(); ok {
		if entry.relativeOffset <= last.relativeOffset || entry.position <= last.position {
			panic(fmt.Sprintf("commitlog: index entry %+v after %+v", entry, last))
		}
	}
	return x.add(entry)
}

// truncateToPosition drops the entries at or after position, the start of
// the first batch a segment truncation removes.
func (x *offsetIndex) truncateToPosition(position int64) error {
	if err := x.unspill(); err != nil {
		return err
	}
	n := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].position) >= position })
	return x.keep(n)
}

// errIndexInconsistent marks an index file that recovery must rebuild.
var errIndexInconsistent = errors.New("index inconsistent with its segment")

// load reads the index file and checks it against the segment: entries
// strictly increasing, inside the segment, and each naming the position of a
// batch header with that base offset. Any disagreement returns an error
// wrapping errIndexInconsistent, and the caller rebuilds.
func (x *offsetIndex) load(segment *segment) error {
	data, err := x.readWhole()
	if err != nil {
		return err
	}
	for i := 0; i < len(data); i += indexEntryBytes {
		entry := decodeIndexEntry(data[i : i+indexEntryBytes])
		if err := x.checkEntry(segment, entry); err != nil {
			return err
		}
		x.entries = append(x.entries, entry)
	}
	return nil
}

func (x *offsetIndex) checkEntry(segment *segment, entry indexEntry) error {
	if n := len(x.entries); n > 0 {
		last := x.entries[n-1]
		if entry.relativeOffset <= last.relativeOffset || entry.position <= last.position {
			return fmt.Errorf("%w: entry %+v after %+v", errIndexInconsistent, entry, last)
		}
	}
	if int64(entry.position) >= segment.size {
		return fmt.Errorf("%w: position %d beyond segment size %d", errIndexInconsistent, entry.position, segment.size)
	}
	header, err := segment.readHeader(int64(entry.position))
	if err != nil {
		return fmt.Errorf("%w: %v", errIndexInconsistent, err)
	}
	if header.BaseOffset != segment.baseOffset+record.Offset(entry.relativeOffset) {
		return fmt.Errorf("%w: entry %+v points at batch %d", errIndexInconsistent, entry, header.BaseOffset)
	}
	return nil
}
