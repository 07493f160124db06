package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A frame is how every record is stored, in segments and in the hard-state
// and snapshot files:
//
//	length  uint32 little-endian: the payload's length in bytes
//	crc     uint32 little-endian: CRC-32C (Castagnoli) of length, kind and payload
//	kind    uint8: what the payload is (recordKind)
//	payload length bytes
//
// The checksum covers the length too, so a damaged length is caught before
// it is trusted to find the next frame.
const frameHeaderBytes = 9

// recordKind says what a frame's payload holds. A frame of an unexpected
// kind where another is due is damage.
type recordKind uint8

const (
	// kindSegmentHeader opens every segment: segmentHeader's fixed layout.
	kindSegmentHeader recordKind = 1
	// kindEntry is one raftpb.Entry in protobuf encoding.
	kindEntry recordKind = 2
	// kindHardState is the hard-state file's one raftpb.HardState.
	kindHardState recordKind = 3
	// kindSnapshot is the snapshot file's one raftpb.Snapshot.
	kindSnapshot recordKind = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends the frame of payload to dst.
func appendFrame(dst []byte, kind recordKind, payload []byte) []byte {
	var header [frameHeaderBytes]byte
	binary.LittleEndian.PutUint32(header[0:4], uint32(len(payload)))
	header[8] = byte(kind)
	crc := crc32.Update(0, castagnoli, header[0:4])
	crc = crc32.Update(crc, castagnoli, header[8:9])
	crc = crc32.Update(crc, castagnoli, payload)
	binary.LittleEndian.PutUint32(header[4:8], crc)
	dst = append(dst, header[:]...)
	return append(dst, payload...)
}

// decodeFrame decodes the frame at the start of data, refusing a payload
// longer than maxPayload before looking at its bytes. It returns the frame's
// kind, its payload (aliasing data) and its total size. Every error wraps
// ErrDamaged.
func decodeFrame(data []byte, maxPayload int) (recordKind, []byte, int, error) {
	if len(data) < frameHeaderBytes {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes left, a frame header needs %d", ErrDamaged, len(data), frameHeaderBytes)
	}
	length := binary.LittleEndian.Uint32(data[0:4])
	if uint64(length) > uint64(maxPayload) {
		return 0, nil, 0, fmt.Errorf("%w: frame length %d above the limit %d", ErrDamaged, length, maxPayload)
	}
	size := frameHeaderBytes + int(length)
	if size > len(data) {
		return 0, nil, 0, fmt.Errorf("%w: frame of %d bytes, only %d left", ErrDamaged, size, len(data))
	}
	crc := crc32.Update(0, castagnoli, data[0:4])
	crc = crc32.Update(crc, castagnoli, data[8:size])
	if stored := binary.LittleEndian.Uint32(data[4:8]); stored != crc {
		return 0, nil, 0, fmt.Errorf("%w: checksum %08x, computed %08x", ErrDamaged, stored, crc)
	}
	return recordKind(data[8]), data[frameHeaderBytes:size], size, nil
}

// segmentHeader is the payload of a segment's first frame. It makes every
// segment self-describing, so that recovery can check that segments follow
// one another and that the first one, after compaction has removed its
// predecessors, still knows the term of the entry before it (raft's
// Storage.Term(FirstIndex()-1)).
type segmentHeader struct {
	// base is the index of the segment's first entry, also in its name.
	base uint64
	// termBefore is the term of entry base-1 (zero when base is 1).
	termBefore uint64
}

const (
	segmentFormatVersion = 1
	// segmentHeaderPayloadBytes is version, base and termBefore.
	segmentHeaderPayloadBytes = 4 + 8 + 8
	// segmentHeaderBytes is the whole header frame.
	segmentHeaderBytes = frameHeaderBytes + segmentHeaderPayloadBytes
)

func (h segmentHeader) marshal() []byte {
	payload := make([]byte, segmentHeaderPayloadBytes)
	binary.LittleEndian.PutUint32(payload[0:4], segmentFormatVersion)
	binary.LittleEndian.PutUint64(payload[4:12], h.base)
	binary.LittleEndian.PutUint64(payload[12:20], h.termBefore)
	return appendFrame(nil, kindSegmentHeader, payload)
}

// decodeSegmentHeader decodes the header frame at the start of a segment.
func decodeSegmentHeader(data []byte) (segmentHeader, error) {
	kind, payload, _, err := decodeFrame(data, segmentHeaderPayloadBytes)
	if err != nil {
		return segmentHeader{}, err
	}
	if kind != kindSegmentHeader || len(payload) != segmentHeaderPayloadBytes {
		return segmentHeader{}, fmt.Errorf("%w: a segment header has kind %d and %d bytes, found kind %d and %d bytes", ErrDamaged, kindSegmentHeader, segmentHeaderPayloadBytes, kind, len(payload))
	}
	if version := binary.LittleEndian.Uint32(payload[0:4]); version != segmentFormatVersion {
		return segmentHeader{}, fmt.Errorf("%w: segment format version %d, this code reads %d", ErrDamaged, version, segmentFormatVersion)
	}
	h := segmentHeader{base: binary.LittleEndian.Uint64(payload[4:12]), termBefore: binary.LittleEndian.Uint64(payload[12:20])}
	if h.base == 0 {
		return segmentHeader{}, fmt.Errorf("%w: segment header says base index 0", ErrDamaged)
	}
	return h, nil
}
