package raftlog

import (
	"encoding/binary"
	"fmt"
	"path"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// segment is one file of the entry log: a header frame, then the frames of
// entries header.base, header.base+1, ... in order, with no gaps. Only the
// last segment is ever appended to or truncated; a segment is synced before
// the next one is created, so every segment but the last is wholly durable.
type segment struct {
	header segmentHeader
	// name is the file's path.
	name string
	file disk.File
	// size is the file's size in bytes, durable or not.
	size int64
	// ends[k] is the byte position just past the frame of entry
	// header.base+k, so entry i's frame is [positionOf(i), ends[i-base]).
	ends []int64
	// lastTerm is the term of the segment's last entry, or
	// header.termBefore when it has none.
	lastTerm uint64
}

// lastIndex is the index of the segment's last entry, base-1 when empty.
func (s *segment) lastIndex() uint64 { return s.header.base + uint64(len(s.ends)) - 1 }

// positionOf returns where the frame of entry index starts, for index in
// [base, lastIndex()+1].
func (s *segment) positionOf(index uint64) int64 {
	if index == s.header.base {
		return segmentHeaderBytes
	}
	return s.ends[index-s.header.base-1]
}

// createSegment creates a segment holding only its header. Neither the file
// nor its directory entry is synced: the caller syncs both before it
// reports anything written to the segment as durable.
func createSegment(fs disk.FS, dir string, header segmentHeader) (*segment, error) {
	name := path.Join(dir, segmentFileName(header.base))
	file, err := fs.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := file.Write(header.marshal()); err != nil {
		file.Close()
		return nil, err
	}
	return &segment{header: header, name: name, file: file, size: segmentHeaderBytes, lastTerm: header.termBefore}, nil
}

// encodeEntry returns the frame of one entry, refusing one above
// maxEntryBytes.
func encodeEntry(dst []byte, entry *pb.Entry, maxEntryBytes int) ([]byte, error) {
	payload, err := proto.Marshal(entry)
	if err != nil {
		return nil, err
	}
	if len(payload) > maxEntryBytes {
		return nil, fmt.Errorf("%w: entry %d is %d bytes, the limit is %d", ErrInvalidWrite, entry.GetIndex(), len(payload), maxEntryBytes)
	}
	return appendFrame(dst, kindEntry, payload), nil
}

// scanResult is what scanSegment found in a segment's bytes.
type scanResult struct {
	entries []*pb.Entry
	ends    []int64
	// damage is why scanning stopped before the end of the bytes, nil if
	// it did not; damagedAt is the position of the first byte not kept.
	damage    error
	damagedAt int64
}

// scanSegment decodes the entries that follow the header of a segment
// whose bytes are data, checking that their indexes follow one another from
// header.base and that their terms never decrease from header.termBefore.
// It stops at the first damaged frame. It never panics, whatever the bytes.
func scanSegment(data []byte, header segmentHeader, maxEntryBytes int) scanResult {
	result := scanResult{damagedAt: int64(len(data))}
	expected, term := header.base, header.termBefore
	for position := int64(segmentHeaderBytes); position < int64(len(data)); {
		entry, size, err := decodeEntry(data[position:], maxEntryBytes)
		if err == nil && entry.GetIndex() != expected {
			err = fmt.Errorf("%w: entry %d where %d was expected", ErrDamaged, entry.GetIndex(), expected)
		}
		if err == nil && entry.GetTerm() < term {
			err = fmt.Errorf("%w: entry %d has term %d after term %d", ErrDamaged, expected, entry.GetTerm(), term)
		}
		if err != nil {
			result.damage, result.damagedAt = err, position
			return result
		}
		position += int64(size)
		result.entries = append(result.entries, entry)
		result.ends = append(result.ends, position)
		expected, term = expected+1, entry.GetTerm()
	}
	return result
}

// decodeEntry decodes the entry frame at the start of data.
func decodeEntry(data []byte, maxEntryBytes int) (*pb.Entry, int, error) {
	kind, payload, size, err := decodeFrame(data, maxEntryBytes)
	if err != nil {
		return nil, 0, err
	}
	if kind != kindEntry {
		return nil, 0, fmt.Errorf("%w: frame of kind %d in the entry log", ErrDamaged, kind)
	}
	entry := &pb.Entry{}
	if err := proto.Unmarshal(payload, entry); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return entry, size, nil
}

// tailScanBytesMax bounds the bytes hasEntryAfter checksums, so that a
// damaged last segment whose bytes happen to look like many long frames
// cannot make Open take time quadratic in the segment's size.
const tailScanBytesMax = 64 << 20

// hasEntryAfter reports whether a valid entry frame starts anywhere in
// data after position from. A crash tears only the end of the last write,
// so a valid entry after damaged bytes means the damage is not a torn tail
// but corruption of bytes that had been written before. Candidates are
// filtered by kind and length before their checksum is computed. If the
// scan exceeds tailScanBytesMax it answers true: damage that cannot be
// shown to be a torn tail is treated as corruption, never cut.
func hasEntryAfter(data []byte, from int64, maxEntryBytes int) bool {
	scanned := 0
	for position := from + 1; position+frameHeaderBytes <= int64(len(data)); position++ {
		if recordKind(data[position+8]) != kindEntry {
			continue
		}
		length := int(binary.LittleEndian.Uint32(data[position : position+4]))
		if length > maxEntryBytes || position+int64(frameHeaderBytes+length) > int64(len(data)) {
			continue
		}
		if scanned += length; scanned > tailScanBytesMax {
			return true
		}
		if _, _, err := decodeEntry(data[position:], maxEntryBytes); err == nil {
			return true
		}
	}
	return false
}
