package commitlog

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// timeIndexEntryBytes is the size of one time index entry on disk, as in
// Kafka's .timeindex files (KIP-33): a big-endian int64 timestamp in
// milliseconds, then the big-endian uint32 offset relative to the
// segment's base offset of the batch that carried it (its last offset).
const timeIndexEntryBytes = 12

// timeIndexEntry says that the segment's records up to and including the
// batch ending at relativeOffset have timestamps of at most timestampMs,
// and one of them has exactly timestampMs.
type timeIndexEntry struct {
	timestampMs    int64
	relativeOffset uint32
}

// timeIndex is a segment's sparse time index: an entry beside each offset
// index entry when the segment's largest timestamp has grown since the
// last one, and a final entry when the segment rolls, so that an inactive
// segment's last entry is its largest timestamp. Like the offset index it
// is derived data: recovery rebuilds it from the batch headers when it
// disagrees with its segment or is missing (a directory written before
// tide kept one).
//
// Invariant: timestamps strictly increase and relative offsets do not
// decrease (Kafka's TimeIndex.maybeAppend rule).
type timeIndex struct {
	entryFile[timeIndexEntry]
}

// lookup returns the relative offset of the last entry whose timestamp is
// below timestampMs, or 0 when there is none. Every record up to that
// offset is older than timestampMs, so the first record at or after it
// lies in the batch holding that offset or later. (Kafka searches from
// the last entry at or below the target; taking it strictly below never
// skips a record whose timestamp equals the target.)
func (x *timeIndex) lookup(timestampMs int64) uint32 {
	i, ok := x.search(func(entry timeIndexEntry) bool { return entry.timestampMs >= timestampMs })
	if !ok || i == 0 {
		return 0
	}
	entry, ok := x.at(i - 1)
	if !ok {
		return 0
	}
	return entry.relativeOffset
}

// decodeTimeIndexEntry reads an entry as the file holds it.
func decodeTimeIndexEntry(b []byte) timeIndexEntry {
	return timeIndexEntry{timestampMs: int64(binary.BigEndian.Uint64(b[0:8])), relativeOffset: binary.BigEndian.Uint32(b[8:12])}
}

// encodeTimeIndexEntry appends an entry as the file holds it.
func encodeTimeIndexEntry(b []byte, entry timeIndexEntry) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(entry.timestampMs))
	return binary.BigEndian.AppendUint32(b, entry.relativeOffset)
}

// newTimeIndex is the time index kept in file.
func newTimeIndex(file disk.File) timeIndex {
	return timeIndex{newEntryFile(file, timeIndexEntryBytes, decodeTimeIndexEntry, encodeTimeIndexEntry)}
}

// maybeAppend adds an entry when its timestamp is above the last one's;
// the index only ever grows in time. An entry with an older offset than
// the last is a programmer error.
func (x *timeIndex) maybeAppend(entry timeIndexEntry) error {
	if last, ok := x.last(); ok {
		if entry.timestampMs <= last.timestampMs {
			return nil
		}
		if entry.relativeOffset < last.relativeOffset {
			panic(fmt.Sprintf("commitlog: time index entry %+v after %+v", entry, last))
		}
	}
	return x.add(entry)
}

// truncateToOffset drops the entries naming a relative offset at or above
// relative, the first offset a segment truncation removes.
func (x *timeIndex) truncateToOffset(relative uint32) error {
	if err := x.unspill(); err != nil {
		return err
	}
	n := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].relativeOffset >= relative })
	return x.keep(n)
}

// load reads the index file of a trusted segment (whose next offset is
// known and whose offset index is loaded) and checks it: whole entries,
// timestamps strictly increasing, offsets not decreasing and inside the
// segment, each naming the last offset of a batch with that max
// timestamp. (A file cut at an entry boundary, losing the last entries,
// passes: the segment's largest timestamp would then be too small, as in
// Kafka, whose check is weaker still.) A disagreement, or an
// empty index beside a non-empty segment (written before tide kept time
// indexes, or lost), returns an error wrapping errIndexInconsistent, and
// the caller rebuilds.
func (x *timeIndex) load(segment *segment) error {
	data, err := x.readWhole()
	if err != nil {
		return err
	}
	if len(data) == 0 && segment.size > 0 {
		return fmt.Errorf("%w: no time index for a segment of %d bytes", errIndexInconsistent, segment.size)
	}
	span := segment.nextOffset - segment.baseOffset
	for i := 0; i < len(data); i += timeIndexEntryBytes {
		entry := decodeTimeIndexEntry(data[i : i+timeIndexEntryBytes])
		last, ok := x.last()
		if ok && (entry.timestampMs <= last.timestampMs || entry.relativeOffset < last.relativeOffset) {
			return fmt.Errorf("%w: time index entry %+v after %+v", errIndexInconsistent, entry, last)
		}
		if record.Offset(entry.relativeOffset) >= span {
			return fmt.Errorf("%w: time index entry %+v past the segment's %d offsets", errIndexInconsistent, entry, span)
		}
		if err := checkTimeIndexEntry(segment, entry); err != nil {
			return err
		}
		x.entries = append(x.entries, entry)
	}
	return nil
}

// checkTimeIndexEntry checks that an entry names the last offset of a batch
// whose max timestamp is the entry's, as every entry written does: damage
// that keeps the entries in order is caught too. It reads one header, found
// through the offset index, which the caller loaded first.
func checkTimeIndexEntry(segment *segment, entry timeIndexEntry) error {
	offset := segment.baseOffset + record.Offset(entry.relativeOffset)
	found, ok, err := segment.find(offset)
	if err != nil {
		return fmt.Errorf("%w: %v", errIndexInconsistent, err)
	}
	if !ok || found.header.LastOffset() != offset || found.header.MaxTimestampMs != entry.timestampMs {
		return fmt.Errorf("%w: time index entry (%d, %d) names no batch ending there with that timestamp", errIndexInconsistent, entry.timestampMs, offset)
	}
	return nil
}
