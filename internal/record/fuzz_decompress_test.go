package record_test

import (
	"errors"
	"testing"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
)

// fuzzDecompressedLimit keeps FuzzDecompressingValidate's bombs small.
const fuzzDecompressedLimit = 1 << 16

// FuzzDecompressingValidate checks the producer gateway's validator on
// compressed batches against its check of uncompressed ones: records
// compressed with any codec get exactly the verdict (accepted, or refused
// with the same kind, code and record index) that the same records get
// uncompressed, whatever the header claims; records inflating past the
// limit are refused as invalid; and arbitrary bytes under a codec
// attribute never panic, only fail with an *Error.
func FuzzDecompressingValidate(f *testing.F) {
	plain := threeRecords()
	header, _ := record.ParseHeader(plain)
	for codec := range uint8(4) {
		f.Add(codec, plain[record.HeaderSize:], true, header.RecordCount, header.LastOffsetDelta, header.MaxTimestampMs)
		f.Add(codec, plain[record.HeaderSize:], true, int32(5), int32(4), header.MaxTimestampMs)
		f.Add(codec, []byte("not compressed at all"), false, int32(1), int32(0), int64(0))
	}
	f.Add(uint8(3), make([]byte, 2*fuzzDecompressedLimit), true, int32(1), int32(0), int64(0))
	f.Fuzz(func(t *testing.T, codecChoice uint8, records []byte, compress bool, recordCount, lastOffsetDelta int32, maxTimestampMs int64) {
		codec := codecs[int(codecChoice)%len(codecs)]
		limits := record.DefaultLimits()
		limits.MaxDecompressedBatchBytes = fuzzDecompressedLimit
		claimed := header
		claimed.RecordCount, claimed.LastOffsetDelta, claimed.MaxTimestampMs = recordCount, lastOffsetDelta, maxTimestampMs
		claimed.Attributes = int16(codec)
		payload := records
		if compress {
			payload = recordtest.Compress(codec, records)
		}
		_, err := record.Validate(record.EncodeBatch(claimed, payload), limits)
		var compressedError *record.Error
		if err != nil && !errors.As(err, &compressedError) {
			t.Fatalf("error %v is not a *record.Error", err)
		}
		if !compress {
			return
		}
		if len(records) > fuzzDecompressedLimit {
			if !errors.Is(err, record.ErrInvalid) && !errors.Is(err, record.ErrTooLarge) {
				t.Fatalf("%d bytes of %s records, past the limit of %d: %v", len(records), codec, fuzzDecompressedLimit, err)
			}
			return
		}
		if errors.Is(err, record.ErrTooLarge) {
			return // the compressed batch alone exceeds MaxBatchBytes
		}
		uncompressed := claimed
		uncompressed.Attributes = int16(record.CompressionNone)
		_, plainErr := record.Validate(record.EncodeBatch(uncompressed, records), limits)
		var plainError *record.Error
		errors.As(plainErr, &plainError)
		if (compressedError == nil) != (plainError == nil) {
			t.Fatalf("%s: compressed %v, uncompressed %v", codec, err, plainErr)
		}
		if compressedError != nil && (compressedError.Kind != plainError.Kind || compressedError.KafkaCode() != plainError.KafkaCode() ||
			compressedError.RecordIndex != plainError.RecordIndex) {
			t.Fatalf("%s: compressed %v (record %d), uncompressed %v (record %d)", codec, err, compressedError.RecordIndex, plainErr, plainError.RecordIndex)
		}
	})
}
