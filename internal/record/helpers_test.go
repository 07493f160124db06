package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newRandom returns a deterministic source for seed; tests log the seed so a
// failure names the one value that reproduces it.
func newRandom(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x7469646505))
}

// randomBytes returns nil (null) with probability nullPercent/100, else
// length bytes, often empty, occasionally large.
func randomBytes(random *rand.Rand, nullPercent, maxLength int) []byte {
	if random.IntN(100) < nullPercent {
		return nil
	}
	length := 0
	switch random.IntN(8) {
	case 0: // empty but not null
	case 1:
		length = random.IntN(maxLength + 1)
	default:
		length = random.IntN(min(maxLength, 64) + 1)
	}
	value := make([]byte, length)
	for index := range value {
		value[index] = byte(random.Uint32())
	}
	return value
}

// randomBuildOptions describes a random valid batch of 1 to maxRecords
// records.
func randomBuildOptions(random *rand.Rand, maxRecords int) BuildOptions {
	opts := BuildOptions{
		BaseOffset:      Offset(random.Int64N(1 << 40)),
		LeaderEpoch:     LeaderEpoch(random.Int32N(1000)) - 1,
		BaseTimestampMs: 1_700_000_000_000 + random.Int64N(1<<30),
		Transactional:   random.IntN(4) == 0,
		Records:         make([]Record, 1+random.IntN(maxRecords)),
	}
	if random.IntN(2) == 0 {
		opts.Producer = &ProducerState{
			ProducerID:    random.Int64N(1 << 40),
			ProducerEpoch: int16(random.IntN(100)),
			BaseSequence:  random.Int32N(1 << 20),
		}
	}
	for index := range opts.Records {
		record := &opts.Records[index]
		record.Key = randomBytes(random, 25, 64)
		record.Value = randomBytes(random, 5, 4096)
		record.TimestampDeltaMs = random.Int64N(1 << 20)
		for range random.IntN(3) {
			record.Headers = append(record.Headers, RecordHeader{
				Key:   fmt.Sprintf("header-%d", random.IntN(1000)),
				Value: randomBytes(random, 20, 32),
			})
		}
	}
	return opts
}

// encodeBatch writes header's fields followed by records, setting
// batchLength and the CRC to match, so a test can describe any batch, valid
// or not, field by field.
func encodeBatch(header Header, records []byte) []byte {
	batch := make([]byte, HeaderSize, HeaderSize+len(records))
	binary.BigEndian.PutUint64(batch[BaseOffsetPosition:], uint64(header.BaseOffset))
	binary.BigEndian.PutUint32(batch[PartitionLeaderEpochPosition:], uint32(header.PartitionLeaderEpoch))
	batch[MagicPosition] = byte(header.Magic)
	binary.BigEndian.PutUint16(batch[AttributesPosition:], uint16(header.Attributes))
	binary.BigEndian.PutUint32(batch[LastOffsetDeltaPosition:], uint32(header.LastOffsetDelta))
	binary.BigEndian.PutUint64(batch[BaseTimestampPosition:], uint64(header.BaseTimestampMs))
	binary.BigEndian.PutUint64(batch[MaxTimestampPosition:], uint64(header.MaxTimestampMs))
	binary.BigEndian.PutUint64(batch[ProducerIDPosition:], uint64(header.ProducerID))
	binary.BigEndian.PutUint16(batch[ProducerEpochPosition:], uint16(header.ProducerEpoch))
	binary.BigEndian.PutUint32(batch[BaseSequencePosition:], uint32(header.BaseSequence))
	binary.BigEndian.PutUint32(batch[RecordCountPosition:], uint32(header.RecordCount))
	batch = append(batch, records...)
	binary.BigEndian.PutUint32(batch[BatchLengthPosition:], uint32(len(batch)-LogOverheadSize))
	fixCRC(batch)
	return batch
}

// fixCRC recomputes the CRC of the batch filling b.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[CRCPosition:], crc32.Checksum(b[AttributesPosition:], castagnoli))
}

// editHeader decodes b's header, lets edit change it, and re-encodes the
// batch around the same records with a correct length and CRC.
func editHeader(b []byte, edit func(*Header)) []byte {
	header := decodeHeader(b)
	edit(&header)
	return encodeBatch(header, b[HeaderSize:])
}

// rawRecord encodes a record from its body fields, each already encoded,
// prefixed with the body's varint length.
func rawRecord(fields ...[]byte) []byte {
	var body []byte
	for _, field := range fields {
		body = append(body, field...)
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// varint encodes value as a zigzag varint.
func varint(value int64) []byte { return binary.AppendVarint(nil, value) }

// simpleRecord is a well-formed record with the given offsetDelta.
func simpleRecord(offsetDelta int64, key, value string) []byte {
	return rawRecord([]byte{0}, varint(0), varint(offsetDelta),
		varint(int64(len(key))), []byte(key), varint(int64(len(value))), []byte(value), varint(0))
}

// plainHeader is the header of an uncompressed batch of recordCount records
// and lastOffsetDelta; encodeBatch fills in the length and CRC.
func plainHeader(lastOffsetDelta, recordCount int32) Header {
	return Header{
		BaseOffset: 100, PartitionLeaderEpoch: 7, Magic: Magic,
		LastOffsetDelta: lastOffsetDelta, BaseTimestampMs: 1000, MaxTimestampMs: 1000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: recordCount,
	}
}

// kmsgEncodeBatch encodes records with kmsg, an encoder independent of Build,
// into a batch with template's header fields, computing every length and the
// CRC the way a client does.
func kmsgEncodeBatch(template kmsg.RecordBatch, records []kmsg.Record) []byte {
	var recordBytes []byte
	for _, record := range records {
		record.Length = 0
		body := record.AppendTo(nil)[1:] // A zero Length encodes as one byte.
		record.Length = int32(len(body))
		recordBytes = record.AppendTo(recordBytes)
	}
	template.Magic = Magic
	template.NumRecords = int32(len(records))
	template.Records = recordBytes
	template.Length = int32(MinBatchLength + len(recordBytes))
	template.CRC = 0
	batch := template.AppendTo(nil)
	fixCRC(batch)
	return batch
}

// kmsgReadRecords decodes count uncompressed records with kmsg, failing t if
// they do not fill records exactly.
func kmsgReadRecords(t testing.TB, records []byte, count int) []kmsg.Record {
	t.Helper()
	decoded := make([]kmsg.Record, 0, count)
	position := 0
	for range count {
		length, lengthSize := binary.Varint(records[position:])
		if lengthSize <= 0 || length < 0 || int(length) > len(records)-position-lengthSize {
			t.Fatalf("kmsg: record %d at byte %d has a bad length", len(decoded), position)
		}
		end := position + lengthSize + int(length)
		var record kmsg.Record
		if err := record.ReadFrom(records[position:end]); err != nil {
			t.Fatalf("kmsg: record %d at byte %d: %v", len(decoded), position, err)
		}
		decoded = append(decoded, record)
		position = end
	}
	if position != len(records) {
		t.Fatalf("kmsg: %d bytes after %d records", len(records)-position, count)
	}
	return decoded
}

// asError fails t unless err is a *Error, and returns it.
func asError(t testing.TB, err error) *Error {
	t.Helper()
	recordError, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %v (%T) is not a *record.Error", err, err)
	}
	return recordError
}
