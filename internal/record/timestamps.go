package record

import "fmt"

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
