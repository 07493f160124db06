package record

import (
	"fmt"
	"math"
)

// The log cleaner (internal/commitlog) is the one place tide re-encodes a
// stored batch: it keeps some of a batch's records and drops the rest.
// DecodeRecords opens a batch, RewriteBatch writes the kept records back
// with the batch's own header fields and codec, and EmptyBatch writes a
// batch with no records that still covers its offsets.

// attributeDeleteHorizon is attributes bit 6 (KIP-534): the batch's base
// timestamp is the delete horizon, the time after which the cleaner may drop
// its tombstones, and not a record timestamp. Only the cleaner sets it.
const attributeDeleteHorizon = 0x40

// HasDeleteHorizon reports whether the cleaner has stamped the batch with a
// delete horizon (KIP-534); DeleteHorizonMs is then its base timestamp.
func (h Header) HasDeleteHorizon() bool { return h.Attributes&attributeDeleteHorizon != 0 }

// DeleteHorizonMs is the time in milliseconds after which the cleaner may
// drop the batch's tombstones, or -1 when no horizon is set.
func (h Header) DeleteHorizonMs() int64 {
	if !h.HasDeleteHorizon() {
		return -1
	}
	return h.BaseTimestampMs
}

// StoredRecord is one record of a stored batch, with its absolute timestamp
// and its offset delta, which the cleaner keeps (offsets never change).
// Key and Value are nil when null; a record with a key and a null value is a
// tombstone.
type StoredRecord struct {
	OffsetDelta int32
	TimestampMs int64
	Key         []byte
	Value       []byte
	Headers     []RecordHeader
}

// IsTombstone reports whether the record deletes its key.
func (r StoredRecord) IsTombstone() bool { return r.Key != nil && r.Value == nil }

// DecodeRecords validates batch (one whole v2 batch, compressed ones opened
// within maxDecompressedBytes) and returns its header and records. The
// records alias batch, or the decompressed buffer.
func DecodeRecords(batch []byte, maxBatchBytes, maxDecompressedBytes int) (Header, []StoredRecord, error) {
	limits := Limits{MaxBatchBytes: maxBatchBytes, MaxDecompressedBatchBytes: maxDecompressedBytes}
	header, err := Validate(batch, limits)
	if err != nil {
		return Header{}, nil, err
	}
	records, start := batch, HeaderSize
	if header.Compression() != CompressionNone {
		decompressed, err := decompress(header.Compression(), batch[HeaderSize:], maxDecompressedBytes)
		if err != nil {
			return Header{}, nil, err
		}
		records, start = decompressed, 0
	}
	decoded := make([]StoredRecord, 0, header.RecordCount)
	walk := cursor{buffer: records, position: start}
	for range header.RecordCount {
		record, ok := walk.readStoredRecord(header.BaseTimestampMs)
		if !ok {
			// Validate walked these records already; only a bug gets here.
			return Header{}, nil, newError(ErrKindInvalid, 0, HeaderSize, "records do not decode after validating")
		}
		decoded = append(decoded, record)
	}
	return header, decoded, nil
}

// readStoredRecord reads one record that walkRecords has accepted.
func (c *cursor) readStoredRecord(baseTimestampMs int64) (StoredRecord, bool) {
	length, ok := c.readVarint()
	if !ok || int(length) > c.remaining() {
		return StoredRecord{}, false
	}
	body := cursor{buffer: c.buffer[:c.position+int(length)], position: c.position}
	c.position += int(length)
	var record StoredRecord
	body.skip(1) // attributes
	timestampDeltaMs, ok1 := body.readVarlong()
	offsetDelta, ok2 := body.readVarint()
	key, ok3 := body.readNullableBytes()
	value, ok4 := body.readNullableBytes()
	count, ok5 := body.readVarint()
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || count < 0 {
		return StoredRecord{}, false
	}
	record.TimestampMs, record.OffsetDelta, record.Key, record.Value = baseTimestampMs+timestampDeltaMs, offsetDelta, key, value
	for range count {
		headerKey, okKey := body.readNullableBytes()
		headerValue, okValue := body.readNullableBytes()
		if !okKey || !okValue || headerKey == nil {
			return StoredRecord{}, false
		}
		record.Headers = append(record.Headers, RecordHeader{Key: string(headerKey), Value: headerValue})
	}
	return record, true
}

// readNullableBytes reads a varint length (-1 for null) and that many bytes.
func (c *cursor) readNullableBytes() ([]byte, bool) {
	length, ok := c.readVarint()
	if !ok || length < -1 || int(length) > c.remaining() {
		return nil, false
	}
	if length == -1 {
		return nil, true
	}
	value := c.buffer[c.position : c.position+int(length) : c.position+int(length)]
	c.position += int(length)
	return value, true
}

// RewriteBatch returns header's batch holding only records (a non-empty
// subset of its records, in order): the same base offset, lastOffsetDelta
// (so the batch still covers its offsets and the producer's last sequence
// stays valid), leader epoch, producer fields, attributes and codec, with
// the record count, lengths and CRC recomputed. A deleteHorizonMs of zero or
// more stamps the batch with that delete horizon (KIP-534): it becomes the
// base timestamp and the records' deltas are rewritten so that their
// timestamps do not change. A batch that already has a horizon keeps it.
func RewriteBatch(header Header, records []StoredRecord, deleteHorizonMs int64) ([]byte, error) {
	if len(records) == 0 {
		panic("record: RewriteBatch without records; use EmptyBatch")
	}
	if header.HasDeleteHorizon() {
		deleteHorizonMs = header.DeleteHorizonMs()
	}
	baseTimestampMs := records[0].TimestampMs
	if deleteHorizonMs >= 0 {
		baseTimestampMs = deleteHorizonMs
		header.Attributes |= attributeDeleteHorizon
	}
	maxTimestampMs := header.MaxTimestampMs
	if !header.IsLogAppendTime() {
		maxTimestampMs = math.MinInt64
		for _, record := range records {
			maxTimestampMs = max(maxTimestampMs, record.TimestampMs)
		}
	}
	var body []byte
	for _, record := range records {
		body = appendRecord(body, record.OffsetDelta, Record{
			Key: record.Key, Value: record.Value, Headers: record.Headers,
			TimestampDeltaMs: record.TimestampMs - baseTimestampMs,
		})
	}
	if header.Compression() != CompressionNone {
		compressed, err := compress(header.Compression(), body)
		if err != nil {
			return nil, fmt.Errorf("record: recompress with %s: %w", header.Compression(), err)
		}
		body = compressed
	}
	header.BaseTimestampMs, header.MaxTimestampMs = baseTimestampMs, maxTimestampMs
	header.RecordCount = int32(len(records))
	return EncodeBatch(header, body), nil
}

// EmptyBatch returns a batch with no records covering offsets
// [base, base+lastOffsetDelta]: what the cleaner writes where every record
// of a batch (or a run of batches) is gone, so that the log's batches stay
// contiguous, and what keeps an idempotent producer's last batch header
// (producer id, epoch, base sequence, last offset) when its records are
// gone, as Kafka's cleaner does (KIP-98). producer is nil for no producer.
// It is uncompressed, as Kafka writes empty batches.
func EmptyBatch(base Offset, lastOffsetDelta int32, epoch LeaderEpoch, timestampMs int64, producer *ProducerState, attributes int16) []byte {
	header := Header{
		BaseOffset: base, PartitionLeaderEpoch: epoch, LastOffsetDelta: lastOffsetDelta,
		BaseTimestampMs: timestampMs, MaxTimestampMs: timestampMs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Attributes: attributes &^ attributeCompressionMask,
	}
	if producer != nil {
		header.ProducerID, header.ProducerEpoch, header.BaseSequence = producer.ProducerID, producer.ProducerEpoch, producer.BaseSequence
	}
	return EncodeBatch(header, nil)
}
