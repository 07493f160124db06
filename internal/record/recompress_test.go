package record

import (
	"bytes"
	"errors"
	"testing"
)

// Recompress changes only the codec: every codec to every other and back,
// the batch still validates (CRC recomputed), and its records and other
// header fields are the producer's.
func TestRecompressKeepsEverythingButTheCodec(t *testing.T) {
	records := []Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("value "), 50), Headers: []RecordHeader{{Key: "h", Value: []byte("1")}}},
		{Value: []byte("second"), TimestampDeltaMs: 7}}
	original := Build(BuildOptions{BaseOffset: 0, LeaderEpoch: NoLeaderEpoch, BaseTimestampMs: 1_700_000_000_000, Records: records,
		Producer: &ProducerState{ProducerID: 42, ProducerEpoch: 3, BaseSequence: 9}})
	limits := DefaultLimits()
	want, wantRecords, err := DecodeRecords(original, limits.MaxBatchBytes, limits.MaxDecompressedBatchBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		compressed, header, err := Recompress(original, codec, limits)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if header.Compression() != codec || header.ProducerID != 42 || header.ProducerEpoch != 3 || header.BaseSequence != 9 ||
			header.LastOffsetDelta != want.LastOffsetDelta || header.MaxTimestampMs != want.MaxTimestampMs || header.Size() != len(compressed) {
			t.Fatalf("%s: header %+v, was %+v", codec, header, want)
		}
		back, _, err := Recompress(compressed, CompressionNone, limits)
		if err != nil {
			t.Fatalf("%s back to none: %v", codec, err)
		}
		if _, got, err := DecodeRecords(back, limits.MaxBatchBytes, limits.MaxDecompressedBatchBytes); err != nil || len(got) != len(wantRecords) ||
			!bytes.Equal(got[0].Value, wantRecords[0].Value) || got[1].TimestampMs != wantRecords[1].TimestampMs || got[0].Headers[0].Key != "h" {
			t.Fatalf("%s and back: %v %+v", codec, err, got)
		}
		if !bytes.Equal(back, original) {
			t.Fatalf("%s and back to none is not the producer's batch", codec)
		}
	}
	if same, _, _ := Recompress(original, CompressionNone, limits); &same[0] != &original[0] {
		t.Fatal("a batch already in the codec was rewritten")
	}
	limits.MaxBatchBytes = len(original) - 1
	compressed, _, _ := Recompress(original, CompressionGzip, DefaultLimits())
	if _, _, err := Recompress(compressed, CompressionNone, limits); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a batch that grows past the bound: %v, want too large", err)
	}
}
