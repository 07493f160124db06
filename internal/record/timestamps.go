package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// FirstRecordAtOrAfter finds, in one batch that has passed Validate, the
// first record at or above offset fromOffset whose timestamp is at or
// after timestampMs (ListOffsets by
// timestamp, KIP-79; Kafka's LogSegment.findOffsetByTimestamp walks the
// records the same way). It returns that record's offset and timestamp,
// and false when no record of the batch is that recent. In a LogAppendTime
// batch every record's timestamp is the batch's max timestamp, as Kafka's
// readers take it. Compressed records are decompressed within
// limits.MaxDecompressedBatchBytes (a default applies when it is zero).
func FirstRecordAtOrAfter(batch []byte, fromOffset Offset, timestampMs int64, limits Limits) (Offset, int64, bool, error) {
	header, err := ParseHeader(batch)
	if err != nil {
		return 0, 0, false, err
	}
	if header.MaxTimestampMs < timestampMs || header.RecordCount == 0 || len(batch) < header.Size() {
		return 0, 0, false, nil
	}
	records, start := batch[:header.Size()], HeaderSize
	if header.Compression() != CompressionNone {
		limit := limits.MaxDecompressedBatchBytes
		if limit <= 0 {
			limit = DefaultMaxDecompressedBatchBytes
		}
		decompressed, err := decompress(header.Compression(), batch[HeaderSize:header.Size()], limit)
		if err != nil {
			return 0, 0, false, err
		}
		records, start = decompressed, 0
	}
	walk := cursor{buffer: records, position: start}
	for index := int32(0); index < header.RecordCount; index++ {
		length, ok := walk.readVarint()
		if !ok || length < 0 || int(length) > walk.remaining() {
			return 0, 0, false, fmt.Errorf("record %d of batch %d: bad length: %w", index, header.BaseOffset, ErrInvalid)
		}
		bodyEnd := walk.position + int(length)
		body := cursor{buffer: records[:bodyEnd], position: walk.position}
		fields, reason := checkRecordBody(&body)
		if reason != "" {
			return 0, 0, false, fmt.Errorf("record %d of batch %d: %s: %w", index, header.BaseOffset, reason, ErrInvalid)
		}
		recordTimestampMs := header.BaseTimestampMs + fields.timestampDeltaMs
		if header.IsLogAppendTime() {
			recordTimestampMs = header.MaxTimestampMs
		}
		if recordTimestampMs >= timestampMs && header.BaseOffset+Offset(fields.offsetDelta) >= fromOffset {
			return header.BaseOffset + Offset(fields.offsetDelta), recordTimestampMs, true, nil
		}
		walk.position = bodyEnd
	}
	return 0, 0, false, nil
}

// SetLogAppendTime turns a validated batch into a LogAppendTime batch with
// the broker's time, in place: the timestamp-type attribute bit set and
// maxTimestamp set to timestampMs, then the CRC recomputed, since both
// fields lie inside the CRC-covered region. The records are untouched;
// readers take every record's timestamp from maxTimestamp (Kafka's
// LogValidator, message.timestamp.type=LogAppendTime).
func SetLogAppendTime(b []byte, timestampMs int64) {
	assertBatchHeader(b)
	header := decodeHeader(b)
	if len(b) < header.Size() {
		panic(fmt.Sprintf("record: a batch of %d bytes in a buffer of %d", header.Size(), len(b)))
	}
	batch := b[:header.Size()]
	binary.BigEndian.PutUint16(batch[AttributesPosition:], uint16(header.Attributes|attributeLogAppendTime))
	binary.BigEndian.PutUint64(batch[MaxTimestampPosition:], uint64(timestampMs))
	binary.BigEndian.PutUint32(batch[CRCPosition:], crc32.Checksum(batch[AttributesPosition:], castagnoli))
}
