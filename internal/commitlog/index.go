package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

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
// IndexIntervalBytes of segment data, kept in memory and appended to a file.
// It is derived data: recovery rebuilds it from the segment whenever it
// disagrees with the segment, so it is synced only at roll and close.
//
// Invariant: relative offsets and positions strictly increase.
type offsetIndex struct {
	entryFile[indexEntry]
}

// lookup returns the position of the last indexed batch whose base offset is
// at or below relative, or 0.
func (x *offsetIndex) lookup(relative uint32) int64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].relativeOffset > relative })
	if i == 0 {
		return 0
	}
	return int64(x.entries[i-1].position)
}

// append adds an entry; it must come after every existing entry.
func (x *offsetIndex) append(entry indexEntry) error {
	if n := len(x.entries); n > 0 {
		last := x.entries[n-1]
		if entry.relativeOffset <= last.relativeOffset || entry.position <= last.position {
			panic(fmt.Sprintf("commitlog: index entry %+v after %+v", entry, last))
		}
	}
	var buf [indexEntryBytes]byte
	binary.BigEndian.PutUint32(buf[0:4], entry.relativeOffset)
	binary.BigEndian.PutUint32(buf[4:8], entry.position)
	return x.write(entry, buf[:])
}

// truncateToPosition drops the entries at or after position, the start of
// the first batch a segment truncation removes.
func (x *offsetIndex) truncateToPosition(position int64) error {
	n := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].position) >= position })
	return x.keep(n, indexEntryBytes)
}

// errIndexInconsistent marks an index file that recovery must rebuild.
var errIndexInconsistent = errors.New("index inconsistent with its segment")

// load reads the index file and checks it against the segment: entries
// strictly increasing, inside the segment, and each naming the position of a
// batch header with that base offset. Any disagreement returns an error
// wrapping errIndexInconsistent, and the caller rebuilds.
func (x *offsetIndex) load(segment *segment) error {
	data, err := x.readWhole(indexEntryBytes)
	if err != nil {
		return err
	}
	for i := 0; i < len(data); i += indexEntryBytes {
		entry := indexEntry{
			relativeOffset: binary.BigEndian.Uint32(data[i : i+4]),
			position:       binary.BigEndian.Uint32(data[i+4 : i+8]),
		}
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
