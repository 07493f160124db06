package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// BuildOptions describe a batch for Build. The builder is for tests, tools,
// benchmarks and the group coordinators' own records (one batch per
// append to __consumer_offsets): the broker never rebuilds a batch, it
// stores what producers send.
type BuildOptions struct {
	BaseOffset  Offset
	LeaderEpoch LeaderEpoch // written to partitionLeaderEpoch
	// BaseTimestampMs is the first record's timestamp, in milliseconds
	// since the Unix epoch; records carry deltas from it.
	BaseTimestampMs int64
	// Producer is the idempotent producer's state; nil writes producerId,
	// producerEpoch and baseSequence as -1, as a plain producer does.
	Producer      *ProducerState
	Transactional bool
	// Control marks the batch as holding control records. The builder does
	// not check that the records are well-formed control records.
	Control bool
	// Records must not be empty: producers never send an empty batch.
	Records []Record
}

// ProducerState identifies an idempotent producer's batch (KIP-98).
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// Record is one record for Build. A nil Key or Value is written as null; an
// empty non-nil one as zero bytes.
type Record struct {
	Key   []byte
	Value []byte
	// TimestampDeltaMs is the record's timestamp minus the batch's
	// BaseTimestampMs, in milliseconds.
	TimestampDeltaMs int64
	Headers          []RecordHeader
}

// RecordHeader is one header of a record. Kafka header keys are never null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Build returns a valid, uncompressed v2 batch holding opts.Records at dense
// offsets from opts.BaseOffset. It panics if there are no records or the
// batch would not fit batchLength's int32.
func Build(opts BuildOptions) []byte {
	return AppendBatch(nil, opts)
}

// AppendBatch appends the batch Build would return to dst, for building a
// buffer of concatenated batches without copying.
func AppendBatch(dst []byte, opts BuildOptions) []byte {
	if len(opts.Records) == 0 {
		panic("record: Build needs at least one record")
	}
	start := len(dst)
	dst = appendHeader(dst, opts)
	for index, record := range opts.Records {
		dst = appendRecord(dst, int32(index), record)
	}
	batch := dst[start:]
	if len(batch)-LogOverheadSize > math.MaxInt32 {
		panic(fmt.Sprintf("record: batch of %d bytes does not fit batchLength", len(batch)))
	}
	binary.BigEndian.PutUint32(batch[BatchLengthPosition:], uint32(len(batch)-LogOverheadSize))
	binary.BigEndian.PutUint32(batch[CRCPosition:], crc32.Checksum(batch[AttributesPosition:], castagnoli))
	return dst
}

// appendHeader appends a header with batchLength and crc left zero for
// AppendBatch to fill in once the records are written.
func appendHeader(dst []byte, opts BuildOptions) []byte {
	producer := ProducerState{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if opts.Producer != nil {
		producer = *opts.Producer
	}
	var attributes int16
	if opts.Transactional {
		attributes |= attributeTransactional
	}
	if opts.Control {
		attributes |= attributeControl
	}
	// The largest record timestamp, as producers write it and
	// RequireExactMaxTimestamp checks it.
	maxTimestampMs := opts.BaseTimestampMs + opts.Records[0].TimestampDeltaMs
	for _, record := range opts.Records {
		maxTimestampMs = max(maxTimestampMs, opts.BaseTimestampMs+record.TimestampDeltaMs)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(opts.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // batchLength
	dst = binary.BigEndian.AppendUint32(dst, uint32(opts.LeaderEpoch))
	dst = append(dst, Magic)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc
	dst = binary.BigEndian.AppendUint16(dst, uint16(attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(opts.Records)-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(opts.BaseTimestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTimestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(producer.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(producer.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(producer.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(opts.Records)))
	return dst
}

// appendRecord appends one record at offsetDelta. The record's length prefix
// comes first but counts the bytes after it, so the body is sized before it
// is written.
func appendRecord(dst []byte, offsetDelta int32, record Record) []byte {
	bodyLength := 1 + varlongSize(record.TimestampDeltaMs) + varlongSize(int64(offsetDelta)) +
		nullableBytesSize(record.Key) + nullableBytesSize(record.Value) +
		varlongSize(int64(len(record.Headers)))
	for _, header := range record.Headers {
		bodyLength += varlongSize(int64(len(header.Key))) + len(header.Key) + nullableBytesSize(header.Value)
	}
	dst = binary.AppendVarint(dst, int64(bodyLength))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, record.TimestampDeltaMs)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendNullableBytes(dst, record.Key)
	dst = appendNullableBytes(dst, record.Value)
	dst = binary.AppendVarint(dst, int64(len(record.Headers)))
	for _, header := range record.Headers {
		dst = binary.AppendVarint(dst, int64(len(header.Key)))
		dst = append(dst, header.Key...)
		dst = appendNullableBytes(dst, header.Value)
	}
	return dst
}

// appendNullableBytes writes a varint length (-1 for nil) and the bytes.
func appendNullableBytes(dst, value []byte) []byte {
	if value == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(value)))
	return append(dst, value...)
}

func nullableBytesSize(value []byte) int {
	if value == nil {
		return varlongSize(-1)
	}
	return varlongSize(int64(len(value))) + len(value)
}

// varlongSize is the encoded size of a zigzag varint. Zigzag encoding is the
// same for Kafka's varint and varlong, so binary.AppendVarint writes both.
func varlongSize(value int64) int {
	var scratch [binary.MaxVarintLen64]byte
	return binary.PutVarint(scratch[:], value)
}

// EncodeBatch returns a v2 batch with header's fields (batchLength, magic and
// crc aside) and records as its record bytes, verbatim: compressed or not,
// well formed or not. It sets batchLength from len(records), magic to 2, and
// a CRC that matches, so the batch reaches whatever checks come after the
// CRC. It is for tests and tools that need batches no producer would write,
// such as a hostile client's; Build is for ordinary batches.
func EncodeBatch(header Header, records []byte) []byte {
	if len(records) > math.MaxInt32-MinBatchLength {
		panic(fmt.Sprintf("record: %d record bytes do not fit batchLength", len(records)))
	}
	batch := make([]byte, HeaderSize, HeaderSize+len(records))
	binary.BigEndian.PutUint64(batch[BaseOffsetPosition:], uint64(header.BaseOffset))
	binary.BigEndian.PutUint32(batch[BatchLengthPosition:], uint32(MinBatchLength+len(records)))
	binary.BigEndian.PutUint32(batch[PartitionLeaderEpochPosition:], uint32(header.PartitionLeaderEpoch))
	batch[MagicPosition] = Magic
	binary.BigEndian.PutUint16(batch[AttributesPosition:], uint16(header.Attributes))
	binary.BigEndian.PutUint32(batch[LastOffsetDeltaPosition:], uint32(header.LastOffsetDelta))
	binary.BigEndian.PutUint64(batch[BaseTimestampPosition:], uint64(header.BaseTimestampMs))
	binary.BigEndian.PutUint64(batch[MaxTimestampPosition:], uint64(header.MaxTimestampMs))
	binary.BigEndian.PutUint64(batch[ProducerIDPosition:], uint64(header.ProducerID))
	binary.BigEndian.PutUint16(batch[ProducerEpochPosition:], uint16(header.ProducerEpoch))
	binary.BigEndian.PutUint32(batch[BaseSequencePosition:], uint32(header.BaseSequence))
	binary.BigEndian.PutUint32(batch[RecordCountPosition:], uint32(header.RecordCount))
	batch = append(batch, records...)
	binary.BigEndian.PutUint32(batch[CRCPosition:], crc32.Checksum(batch[AttributesPosition:], castagnoli))
	return batch
}
