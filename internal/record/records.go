package record

import (
	"fmt"
	"math"
)

// walkRecords checks the records of one batch whose header has passed
// checkHeaderFields: records holds them from start to its end (the batch
// itself when uncompressed, from HeaderSize; the decompressed records, from
// 0). It walks every field of every record, without copying, so that a
// record the consumer cannot parse never reaches the log: the producer's CRC
// proves only that the bytes are the ones it sent, not that they make sense.
// Positions in its errors are in records.
func walkRecords(records []byte, start int, header Header, limits Limits) *Error {
	walk := cursor{buffer: records, position: start}
	previousOffsetDelta := int32(-1)
	maxTimestampMs := int64(math.MinInt64)
	for index := int32(0); index < header.RecordCount; index++ {
		recordPosition := walk.position
		if walk.remaining() == 0 {
			return newRecordError(ErrKindInvalid, 0, recordPosition, int(index),
				fmt.Sprintf("recordCount is %d but the batch ends after %d records", header.RecordCount, index))
		}
		length, ok := walk.readVarint()
		if !ok || length < 0 || int(length) > walk.remaining() {
			return newRecordError(ErrKindInvalid, 0, recordPosition, int(index),
				fmt.Sprintf("record %d: length is malformed or exceeds the %d bytes left in the batch",
					index, walk.remaining()))
		}
		bodyEnd := walk.position + int(length)
		body := cursor{buffer: records[:bodyEnd], position: walk.position}
		fields, reason := checkRecordBody(&body)
		if reason != "" {
			return newRecordError(ErrKindInvalid, 0, body.position, int(index), fmt.Sprintf("record %d: %s", index, reason))
		}
		reason = checkOffsetDelta(index, fields.offsetDelta, previousOffsetDelta, header, limits)
		if reason != "" {
			return newRecordError(ErrKindInvalid, 0, recordPosition, int(index), fmt.Sprintf("record %d: %s", index, reason))
		}
		previousOffsetDelta = fields.offsetDelta
		maxTimestampMs = max(maxTimestampMs, header.BaseTimestampMs+fields.timestampDeltaMs)
		walk.position = bodyEnd
	}
	if walk.remaining() != 0 {
		return newError(ErrKindInvalid, 0, walk.position,
			fmt.Sprintf("%d bytes after the last of %d records", walk.remaining(), header.RecordCount))
	}
	return checkMaxTimestamp(header, maxTimestampMs, limits)
}

// checkMaxTimestamp checks, with limits.RequireExactMaxTimestamp, that the
// header's maxTimestamp is the largest record timestamp, as every producer
// writes it. Kafka's leader recomputes the field and rewrites the batch;
// tide never re-encodes a batch, and retention and time lookups read the
// field, so a batch whose header lies about it is refused instead.
func checkMaxTimestamp(header Header, maxTimestampMs int64, limits Limits) *Error {
	if !limits.RequireExactMaxTimestamp || header.RecordCount == 0 || header.IsLogAppendTime() || header.MaxTimestampMs == maxTimestampMs {
		return nil
	}
	return newError(ErrKindInvalid, 0, MaxTimestampPosition,
		fmt.Sprintf("maxTimestamp %d, the records' largest timestamp is %d", header.MaxTimestampMs, maxTimestampMs)).
		withCode(kafkaCodeInvalidTimestamp)
}

// recordFields are the fields of a record the batch checks need.
type recordFields struct {
	timestampDeltaMs int64
	offsetDelta      int32
}

// checkRecordBody reads the fields of one record, which fill
// body.buffer[body.position:] exactly, and returns its timestamp and offset
// deltas, or a reason it is malformed. On failure body.position is where the
// offending field starts.
func checkRecordBody(body *cursor) (recordFields, string) {
	var fields recordFields
	if !body.skip(1) { // attributes: unused by any Kafka version so far.
		return fields, "ends before attributes"
	}
	var ok bool
	if fields.timestampDeltaMs, ok = body.readVarlong(); !ok {
		return fields, "malformed timestampDelta"
	}
	if fields.offsetDelta, ok = body.readVarint(); !ok {
		return fields, "malformed offsetDelta"
	}
	if !body.skipNullableBytes() {
		return fields, "malformed key"
	}
	if !body.skipNullableBytes() {
		return fields, "malformed value"
	}
	headerCountPosition := body.position
	headerCount, ok := body.readVarint()
	if !ok || headerCount < 0 {
		body.position = headerCountPosition
		return fields, "malformed header count"
	}
	// Each header takes at least two bytes, so this loop ends within the
	// record's bytes whatever headerCount claims.
	for range headerCount {
		keyPosition := body.position
		keyLength, ok := body.readVarint()
		// A header key is a non-null string (Kafka: "Invalid negative
		// header key size").
		if !ok || keyLength < 0 || !body.skip(int(keyLength)) {
			body.position = keyPosition
			return fields, "malformed header key"
		}
		if !body.skipNullableBytes() {
			return fields, "malformed header value"
		}
	}
	if body.remaining() != 0 {
		return fields, fmt.Sprintf("%d bytes after the last header", body.remaining())
	}
	return fields, ""
}

// checkOffsetDelta checks record index's offsetDelta against the record
// before it and against the header; it returns a reason, or "" if it is fine.
func checkOffsetDelta(index, offsetDelta, previousOffsetDelta int32, header Header, limits Limits) string {
	if limits.RequireDenseOffsets && offsetDelta != index {
		return fmt.Sprintf("offsetDelta %d, dense offsets need %d", offsetDelta, index)
	}
	if offsetDelta <= previousOffsetDelta {
		return fmt.Sprintf("offsetDelta %d does not exceed the previous %d", offsetDelta, previousOffsetDelta)
	}
	if offsetDelta > header.LastOffsetDelta {
		return fmt.Sprintf("offsetDelta %d exceeds lastOffsetDelta %d", offsetDelta, header.LastOffsetDelta)
	}
	return ""
}

// cursor reads the fields of records from buffer[position:]. buffer ends
// where the region being read ends (the batch, or one record), so no read can
// go past it, and the compiler can drop most bounds checks. Positions count
// from the batch start, so they go straight into errors. A read that fails
// leaves position where the field starts and reports false.
type cursor struct {
	buffer   []byte
	position int
}

// remaining is the number of bytes left to read.
func (c *cursor) remaining() int { return len(c.buffer) - c.position }

// skip moves past n bytes, if there are n bytes left.
func (c *cursor) skip(n int) bool {
	if n < 0 || n > c.remaining() {
		return false
	}
	c.position += n
	return true
}

// skipNullableBytes moves past a varint length and that many bytes; length
// -1 means null and has no bytes. Kafka's reader treats any negative length as
// null, but no encoder writes anything but -1, so tide accepts only that.
func (c *cursor) skipNullableBytes() bool {
	start := c.position
	length, ok := c.readVarint()
	if ok && length == -1 {
		return true
	}
	if !ok || length < -1 || !c.skip(int(length)) {
		c.position = start
		return false
	}
	return true
}

// readVarint reads a zigzag varint holding an int32: at most 5 bytes, and
// no value bits beyond 32 (Kafka's ByteUtils.readVarint also stops at 5).
//
// Most fields are lengths and deltas under 64, which take one byte; this
// decodes those inline and leaves longer ones to readLongVarint.
func (c *cursor) readVarint() (int32, bool) {
	if c.position < len(c.buffer) && c.buffer[c.position] < 0x80 {
		first := c.buffer[c.position]
		c.position++
		return int32(first>>1) ^ -int32(first&1), true
	}
	return c.readLongVarint()
}

func (c *cursor) readLongVarint() (int32, bool) {
	unsigned, length := c.peekUvarint(5)
	if length == 0 || unsigned > math.MaxUint32 {
		return 0, false
	}
	c.position += length
	return int32(uint32(unsigned)>>1) ^ -int32(unsigned&1), true
}

// readVarlong reads a zigzag varint holding an int64: at most 10 bytes, the
// last of which may carry only bit 63. One-byte values are decoded inline.
func (c *cursor) readVarlong() (int64, bool) {
	if c.position < len(c.buffer) && c.buffer[c.position] < 0x80 {
		first := c.buffer[c.position]
		c.position++
		return int64(first>>1) ^ -int64(first&1), true
	}
	return c.readLongVarlong()
}

func (c *cursor) readLongVarlong() (int64, bool) {
	unsigned, length := c.peekUvarint(10)
	if length == 0 || (length == 10 && c.buffer[c.position+9] > 1) {
		return 0, false
	}
	c.position += length
	return int64(unsigned>>1) ^ -int64(unsigned&1), true
}

// peekUvarint decodes an unsigned base-128 varint of at most maxLength bytes
// at position, without moving. It returns length 0 if the varint is longer
// than maxLength or runs past the end of buffer.
func (c *cursor) peekUvarint(maxLength int) (value uint64, length int) {
	unread := c.buffer[c.position:]
	for index := range min(len(unread), maxLength) {
		next := unread[index]
		value |= uint64(next&0x7f) << (7 * index)
		if next < 0x80 {
			return value, index + 1
		}
	}
	return 0, 0
}
