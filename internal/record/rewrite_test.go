package record

import (
	"bytes"
	"testing"
)

// TestRewriteBatchKeepsOffsetsAndCodec rewrites a batch of each codec down
// to some of its records: the result validates, keeps base offset,
// lastOffsetDelta, epoch, producer fields and codec, and decodes to exactly
// the kept records with their offsets and timestamps.
func TestRewriteBatchKeepsOffsetsAndCodec(t *testing.T) {
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			records := []StoredRecord{
				{OffsetDelta: 0, TimestampMs: 1000, Key: []byte("a"), Value: []byte("1")},
				{OffsetDelta: 1, TimestampMs: 1001, Key: []byte("b"), Value: nil},
				{OffsetDelta: 2, TimestampMs: 1002, Key: []byte("a"), Value: []byte("2"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}},
			}
			header := Header{BaseOffset: 40, PartitionLeaderEpoch: 3, LastOffsetDelta: 2, BaseTimestampMs: 1000, MaxTimestampMs: 1002,
				ProducerID: 7, ProducerEpoch: 1, BaseSequence: 10, Attributes: int16(codec), RecordCount: 3}
			original, err := RewriteBatch(header, records, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, decoded, err := DecodeRecords(original, DefaultMaxBatchBytes, DefaultMaxDecompressedBatchBytes)
			if err != nil || len(decoded) != 3 || got.Compression() != codec {
				t.Fatalf("original: %v, %d records, codec %s", err, len(decoded), got.Compression())
			}
			kept := []StoredRecord{decoded[1], decoded[2]}
			rewritten, err := RewriteBatch(got, kept, 5000)
			if err != nil {
				t.Fatal(err)
			}
			after, again, err := DecodeRecords(rewritten, DefaultMaxBatchBytes, DefaultMaxDecompressedBatchBytes)
			if err != nil {
				t.Fatalf("rewritten batch does not validate: %v", err)
			}
			if after.BaseOffset != 40 || after.LastOffsetDelta != 2 || after.RecordCount != 2 || after.PartitionLeaderEpoch != 3 ||
				after.ProducerID != 7 || after.BaseSequence != 10 || after.Compression() != codec || after.MaxTimestampMs != 1002 {
				t.Fatalf("header after rewrite: %+v", after)
			}
			if after.DeleteHorizonMs() != 5000 {
				t.Fatalf("delete horizon %d, want 5000", after.DeleteHorizonMs())
			}
			for i, record := range again {
				want := kept[i]
				if record.OffsetDelta != want.OffsetDelta || record.TimestampMs != want.TimestampMs ||
					!bytes.Equal(record.Key, want.Key) || !bytes.Equal(record.Value, want.Value) || (record.Value == nil) != (want.Value == nil) ||
					len(record.Headers) != len(want.Headers) {
					t.Fatalf("record %d: %+v, want %+v", i, record, want)
				}
			}
			// A horizon once stamped is kept by later rewrites.
			third, err := RewriteBatch(after, again[1:], 9000)
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := ParseHeader(third); h.DeleteHorizonMs() != 5000 {
				t.Fatalf("horizon moved to %d", h.DeleteHorizonMs())
			}
		})
	}
}

// TestEmptyBatchCoversItsOffsets: a batch with no records still covers its
// offsets and validates where stored batches are checked.
func TestEmptyBatchCoversItsOffsets(t *testing.T) {
	batch := EmptyBatch(10, 4, 2, 1234, &ProducerState{ProducerID: 5, ProducerEpoch: 0, BaseSequence: 3}, int16(CompressionZstd))
	header, err := Validate(batch, Limits{MaxBatchBytes: DefaultMaxBatchBytes})
	if err != nil {
		t.Fatal(err)
	}
	if header.BaseOffset != 10 || header.NextOffset() != 15 || header.RecordCount != 0 || header.Compression() != CompressionNone ||
		header.ProducerID != 5 || header.BaseSequence != 3 || header.PartitionLeaderEpoch != 2 {
		t.Fatalf("empty batch header %+v", header)
	}
}
