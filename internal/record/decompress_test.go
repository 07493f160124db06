package record_test

import (
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
)

const (
	kafkaCorruptMessage   = 2
	kafkaInvalidTimestamp = 32
	kafkaInvalidRecord    = 87
)

var codecs = []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd}

func threeRecords() []byte {
	return record.Build(record.BuildOptions{BaseTimestampMs: 1_700_000_000_000, LeaderEpoch: record.NoLeaderEpoch, Records: []record.Record{
		{Key: []byte("a"), Value: []byte("one")},
		{Key: []byte("b"), Value: []byte("two"), TimestampDeltaMs: 7},
		{Value: []byte("three"), TimestampDeltaMs: 3, Headers: []record.RecordHeader{{Key: "h", Value: []byte("v")}}},
	}})
}

// asRecordError returns err as an *record.Error, failing the test if it is
// not one.
func asRecordError(t *testing.T, err error) *record.Error {
	t.Helper()
	var recordError *record.Error
	if !errors.As(err, &recordError) {
		t.Fatalf("error %v is not a *record.Error", err)
	}
	return recordError
}

// A producer's compressed batches are opened and their records checked
// like uncompressed ones: every codec Kafka defines, as producers frame it.
func TestValidateOpensCompressedBatches(t *testing.T) {
	for _, codec := range codecs {
		batch := recordtest.CompressBatch(threeRecords(), codec)
		header, err := record.Validate(batch, record.DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if header.Compression() != codec || header.RecordCount != 3 {
			t.Fatalf("%s: header %+v", codec, header)
		}
	}
}

// The issue 11 client claimed 2^31-1 records over garbage with the zstd
// attribute, and the log end offset jumped by billions. Garbage under any
// codec attribute is CORRUPT_MESSAGE now.
func TestValidateRefusesGarbageUnderACodec(t *testing.T) {
	for _, codec := range codecs {
		header := record.Header{Attributes: int16(codec), LastOffsetDelta: math.MaxInt32 - 1, RecordCount: math.MaxInt32,
			PartitionLeaderEpoch: record.NoLeaderEpoch, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		batch := record.EncodeBatch(header, []byte("this is not compressed data at all, whatever the attribute says"))
		_, err := record.Validate(batch, record.DefaultLimits())
		if !errors.Is(err, record.ErrCorrupt) || asRecordError(t, err).KafkaCode() != kafkaCorruptMessage {
			t.Fatalf("%s over garbage: %v, want CORRUPT_MESSAGE", codec, err)
		}
	}
}

// A decompression bomb (a few KB inflating to far past the limit) is
// refused with INVALID_RECORD as soon as the limit is passed: the memory it
// costs stays near the limit, never near what it inflates to.
func TestValidateRefusesDecompressionBombs(t *testing.T) {
	const limit = 1 << 20
	limits := record.DefaultLimits()
	limits.MaxDecompressedBatchBytes = limit
	for _, codec := range codecs {
		bomb := recordtest.Bomb(codec, 16<<20, 1)
		if len(bomb) > record.DefaultMaxBatchBytes {
			t.Fatalf("%s: a bomb of %d bytes does not fit a batch", codec, len(bomb))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := record.Validate(bomb, limits)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, record.ErrInvalid) || asRecordError(t, err).KafkaCode() != kafkaInvalidRecord {
			t.Fatalf("%s bomb of %d bytes: %v, want INVALID_RECORD", codec, len(bomb), err)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 16*limit {
			t.Fatalf("%s bomb: %d bytes allocated to refuse it, the limit is %d", codec, allocated, limit)
		}
	}
}

// The default limit refuses a zstd bomb like issue 11's (a few KB inflating
// to 2 GiB), without inflating it.
func TestValidateRefusesTheIssue11ZstdBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses and inflates 64 MiB; skipped with -short")
	}
	// 32 frames of 64 MiB of zeros each: zstd decoders read concatenated
	// frames as one stream.
	frame := recordtest.Compress(record.CompressionZstd, make([]byte, 64<<20))
	var records []byte
	for range 32 {
		records = append(records, frame...)
	}
	bomb := record.EncodeBatch(record.Header{Attributes: int16(record.CompressionZstd), PartitionLeaderEpoch: record.NoLeaderEpoch,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, records)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := record.Validate(bomb, record.DefaultLimits())
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4*record.DefaultMaxDecompressedBatchBytes {
		t.Fatalf("%d bytes allocated to refuse a bomb, the limit is %d", allocated, record.DefaultMaxDecompressedBatchBytes)
	}
	if !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("zstd bomb of %d bytes: %v, want invalid", len(bomb), err)
	}
}

// A compressed batch whose header claims more records than it holds is
// INVALID_RECORD naming the first missing record; one holding more than it
// claims is refused too.
func TestValidateRefusesALyingRecordCount(t *testing.T) {
	for _, codec := range codecs {
		for _, claimed := range []int32{5, 2, math.MaxInt32} {
			header, _ := record.ParseHeader(threeRecords())
			header.RecordCount, header.LastOffsetDelta = claimed, claimed-1
			header.Attributes |= int16(codec)
			batch := record.EncodeBatch(header, recordtest.Compress(codec, threeRecords()[record.HeaderSize:]))
			_, err := record.Validate(batch, record.DefaultLimits())
			recordError := asRecordError(t, err)
			if recordError.KafkaCode() != kafkaInvalidRecord {
				t.Fatalf("%s claiming %d of 3 records: %v, want INVALID_RECORD", codec, claimed, err)
			}
			if claimed > 3 && recordError.RecordIndex != 3 {
				t.Fatalf("%s claiming %d of 3 records: record index %d, want 3", codec, claimed, recordError.RecordIndex)
			}
		}
	}
}

// A header whose maxTimestamp is not its largest record timestamp is
// INVALID_TIMESTAMP: tide does not rewrite it as Kafka does, and retention
// reads it.
func TestValidateRefusesAWrongMaxTimestamp(t *testing.T) {
	for _, codec := range append([]record.Compression{record.CompressionNone}, codecs...) {
		header, _ := record.ParseHeader(threeRecords())
		header.MaxTimestampMs += 1000
		header.Attributes |= int16(codec)
		batch := record.EncodeBatch(header, recordtest.Compress(codec, threeRecords()[record.HeaderSize:]))
		_, err := record.Validate(batch, record.DefaultLimits())
		if err == nil || asRecordError(t, err).KafkaCode() != kafkaInvalidTimestamp {
			t.Fatalf("%s with maxTimestamp 1 s ahead: %v, want INVALID_TIMESTAMP", codec, err)
		}
	}
}

// Kafka's client-only rules: no control batch, no idempotent batch with a
// negative base sequence, no LogAppendTime.
func TestCheckFromProducer(t *testing.T) {
	plain, _ := record.ParseHeader(threeRecords())
	if err := record.CheckFromProducer(plain); err != nil {
		t.Fatalf("plain batch: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*record.Header)
		code   int16
	}{
		{"control", func(h *record.Header) { h.Attributes |= 0x20 }, kafkaInvalidRecord},
		{"negative sequence", func(h *record.Header) { h.ProducerID, h.ProducerEpoch, h.BaseSequence = 7, 0, -1 }, kafkaInvalidRecord},
		{"log append time", func(h *record.Header) { h.Attributes |= 0x08 }, kafkaInvalidTimestamp},
	} {
		header := plain
		c.change(&header)
		err := record.CheckFromProducer(header)
		if err == nil || asRecordError(t, err).KafkaCode() != c.code {
			t.Fatalf("%s: %v, want code %d", c.name, err, c.code)
		}
	}
}

// BenchmarkValidateCompressed measures the gateway check of a producer's
// compressed batch of about 64 KiB of records with each codec: what opening
// compressed batches costs the leader per batch.
func BenchmarkValidateCompressed(b *testing.B) {
	records := make([]record.Record, 500)
	for i := range records {
		records[i] = record.Record{Key: []byte("key"), Value: []byte("a value of some hundred bytes, repeated: 0123456789 0123456789 0123456789 0123456789 0123456789")}
	}
	plain := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, Records: records})
	for _, codec := range append([]record.Compression{record.CompressionNone}, codecs...) {
		batch := recordtest.CompressBatch(plain, codec)
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			for range b.N {
				if _, err := record.Validate(batch, record.DefaultLimits()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
