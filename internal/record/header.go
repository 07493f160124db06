package record

import (
	"encoding/binary"
	"fmt"
)

// Positions of the batch header fields, in bytes from the start of the batch.
// They match the field order of kmsg.RecordBatch and Kafka's DefaultRecordBatch.
const (
	BaseOffsetPosition           = 0
	BatchLengthPosition          = 8
	PartitionLeaderEpochPosition = 12
	MagicPosition                = 16
	CRCPosition                  = 17
	// AttributesPosition is also where the CRC-covered region starts: the
	// CRC covers [AttributesPosition, Size()).
	AttributesPosition      = 21
	LastOffsetDeltaPosition = 23
	BaseTimestampPosition   = 27
	MaxTimestampPosition    = 35
	ProducerIDPosition      = 43
	ProducerEpochPosition   = 51
	BaseSequencePosition    = 53
	RecordCountPosition     = 57
)

const (
	// HeaderSize is the size of the v2 batch header in bytes; records start here.
	HeaderSize = 61
	// LogOverheadSize is the number of bytes batchLength does not count:
	// baseOffset and batchLength itself. A batch's size is
	// LogOverheadSize + batchLength.
	LogOverheadSize = 12
	// MinBatchLength is the smallest possible batchLength: a header with no
	// record bytes.
	MinBatchLength = HeaderSize - LogOverheadSize
	// Magic is the only batch format version tide accepts. Versions 0 and 1
	// (pre-0.11 message sets) have a different layout and no producer state.
	Magic = 2
)

// Attribute bits, from Kafka's DefaultRecordBatch. Bit 6 (KIP-534, "delete
// horizon set") is written only by the log cleaner (attributeDeleteHorizon,
// rewrite.go).
const (
	attributeCompressionMask = 0x07
	attributeLogAppendTime   = 0x08
	attributeTransactional   = 0x10
	attributeControl         = 0x20
)

// Compression is the codec of a batch's records, attributes bits 0-2.
type Compression int8

// The codecs Kafka defines. Values 5 to 7 are unassigned and rejected.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// String returns the codec's name as Kafka's compression.type spells it.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// Header is the decoded 61-byte header of a v2 batch. It is a copy: changing
// it does not change the batch bytes (use SetBaseOffset and
// SetPartitionLeaderEpoch for that).
//
// A Header returned by ParseHeader has Magic == 2 and
// BatchLength >= MinBatchLength; one returned by Validate, ValidateAll or an
// Iterator has passed every check listed on Validate.
type Header struct {
	BaseOffset           Offset
	BatchLength          int32 // bytes after the batchLength field
	PartitionLeaderEpoch LeaderEpoch
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestampMs      int64
	MaxTimestampMs       int64
	ProducerID           int64 // -1 when the producer is not idempotent
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// ParseHeader decodes the header at the start of b. It needs only the first
// HeaderSize bytes, so it can read a header without the rest of the batch (to
// rebuild an index, or to skip a batch). It checks only what the header alone
// can show: that b holds a whole header, the magic byte, and that batchLength
// is not below the header's own size, so Size() is safe for skipping. It does
// not check the CRC or anything past the header; Validate does.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, newError(ErrKindTruncated, 0, len(b),
			fmt.Sprintf("%d bytes, a batch header needs %d", len(b), HeaderSize))
	}
	header := decodeHeader(b)
	if header.BatchLength < MinBatchLength {
		return Header{}, newError(ErrKindCorrupt, 0, BatchLengthPosition,
			fmt.Sprintf("batchLength %d is below the minimum %d", header.BatchLength, MinBatchLength))
	}
	if header.Magic != Magic {
		return Header{}, newError(ErrKindInvalid, 0, MagicPosition,
			fmt.Sprintf("magic %d, only %d is supported", header.Magic, Magic))
	}
	return header, nil
}

// decodeHeader reads the header fields without checking them. b must hold at
// least HeaderSize bytes.
func decodeHeader(b []byte) Header {
	_ = b[HeaderSize-1] // One bounds check for all the reads below.
	return Header{
		BaseOffset:           Offset(binary.BigEndian.Uint64(b[BaseOffsetPosition:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[BatchLengthPosition:])),
		PartitionLeaderEpoch: LeaderEpoch(binary.BigEndian.Uint32(b[PartitionLeaderEpochPosition:])),
		Magic:                int8(b[MagicPosition]),
		CRC:                  binary.BigEndian.Uint32(b[CRCPosition:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[AttributesPosition:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[LastOffsetDeltaPosition:])),
		BaseTimestampMs:      int64(binary.BigEndian.Uint64(b[BaseTimestampPosition:])),
		MaxTimestampMs:       int64(binary.BigEndian.Uint64(b[MaxTimestampPosition:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[ProducerIDPosition:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[ProducerEpochPosition:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[BaseSequencePosition:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[RecordCountPosition:])),
	}
}

// LastOffset is the offset of the batch's last record: the batch covers
// offsets [BaseOffset, LastOffset()] inclusive, even when compaction has
// removed some records.
func (h Header) LastOffset() Offset { return h.BaseOffset + Offset(h.LastOffsetDelta) }

// NextOffset is the offset after the batch: the log end offset once this batch
// is the last one appended. The batch covers [BaseOffset, NextOffset()).
func (h Header) NextOffset() Offset { return h.LastOffset() + 1 }

// Size is the batch's total size in bytes, header included.
func (h Header) Size() int { return LogOverheadSize + int(h.BatchLength) }

// Compression is the codec of the records. Validate rejects values above
// CompressionZstd.
func (h Header) Compression() Compression {
	return Compression(h.Attributes & attributeCompressionMask)
}

// IsControl reports whether the batch holds control records (transaction
// commit or abort markers) rather than user data. Only the broker writes
// these; clients must not produce them.
func (h Header) IsControl() bool { return h.Attributes&attributeControl != 0 }

// IsTransactional reports whether the batch was written inside a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&attributeTransactional != 0 }

// IsLogAppendTime reports whether the batch's timestamps are the broker's
// append time rather than the producer's create time.
func (h Header) IsLogAppendTime() bool { return h.Attributes&attributeLogAppendTime != 0 }
