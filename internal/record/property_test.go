package record

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRandomBatchesAreValid builds random batches (up to 200 records, null and
// empty keys and values, values up to 4 KiB, headers) and checks that
// Validate accepts each, that the header describes it, and that kmsg, an
// independent decoder, reads back the same records.
func TestRandomBatchesAreValid(t *testing.T) {
	for seed := range uint64(200) {
		random := newRandom(seed)
		opts := randomBuildOptions(random, 200)
		batch := Build(opts)
		header, err := Validate(batch, DefaultLimits())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkHeaderDescribes(t, header, opts, len(batch))
		var decoded kmsg.RecordBatch
		if err := decoded.ReadFrom(batch); err != nil {
			t.Fatalf("seed %d: kmsg: %v", seed, err)
		}
		checkRecordsMatch(t, kmsgReadRecords(t, decoded.Records, len(opts.Records)), opts.Records)
	}
}

func checkHeaderDescribes(t *testing.T, header Header, opts BuildOptions, size int) {
	t.Helper()
	count := len(opts.Records)
	if header.BaseOffset != opts.BaseOffset || header.PartitionLeaderEpoch != opts.LeaderEpoch ||
		header.Size() != size || int(header.RecordCount) != count ||
		header.NextOffset() != opts.BaseOffset+Offset(count) || header.LastOffset() != header.NextOffset()-1 ||
		header.BaseTimestampMs != opts.BaseTimestampMs || header.IsTransactional() != opts.Transactional ||
		header.IsControl() || header.Compression() != CompressionNone {
		t.Fatalf("header %+v does not describe %d records of %+v", header, count, opts)
	}
	producer := ProducerState{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if opts.Producer != nil {
		producer = *opts.Producer
	}
	if header.ProducerID != producer.ProducerID || header.ProducerEpoch != producer.ProducerEpoch ||
		header.BaseSequence != producer.BaseSequence {
		t.Fatalf("header %+v, producer %+v", header, producer)
	}
}

// checkRecordsMatch compares kmsg's decoding with the records built,
// including the difference between null and empty.
func checkRecordsMatch(t *testing.T, decoded []kmsg.Record, records []Record) {
	t.Helper()
	for index, record := range records {
		got := decoded[index]
		if got.OffsetDelta != int32(index) || got.TimestampDelta64 != record.TimestampDeltaMs ||
			!sameNullableBytes(got.Key, record.Key) || !sameNullableBytes(got.Value, record.Value) ||
			len(got.Headers) != len(record.Headers) {
			t.Fatalf("record %d: kmsg decoded %+v, built %+v", index, got, record)
		}
		for headerIndex, header := range record.Headers {
			gotHeader := got.Headers[headerIndex]
			if gotHeader.Key != header.Key || !sameNullableBytes(gotHeader.Value, header.Value) {
				t.Fatalf("record %d header %d: kmsg decoded %+v, built %+v", index, headerIndex, gotHeader, header)
			}
		}
	}
}

func sameNullableBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// TestEveryBitFlipIsDetected flips, one at a time, every bit from the CRC
// field to the end of random batches (sampling 4096 bits of larger ones) and
// checks each is reported as corruption. CRC-32C detects every single-bit
// error, so a miss means the CRC covers the wrong bytes.
func TestEveryBitFlipIsDetected(t *testing.T) {
	for seed := range uint64(40) {
		random := newRandom(seed)
		batch := Build(randomBuildOptions(random, 20))
		bits := (len(batch) - CRCPosition) * 8
		flips := min(bits, 4096)
		for flip := range flips {
			bit := flip
			if flips < bits {
				bit = random.IntN(bits)
			}
			position := CRCPosition + bit/8
			batch[position] ^= 1 << (bit % 8)
			_, err := Validate(batch, DefaultLimits())
			if err == nil || asError(t, err).Kind != ErrKindCorrupt {
				t.Fatalf("seed %d: flipping bit %d of byte %d: %v", seed, bit%8, position, err)
			}
			batch[position] ^= 1 << (bit % 8)
		}
		if _, err := Validate(batch, DefaultLimits()); err != nil {
			t.Fatalf("seed %d: batch no longer valid after restoring flips: %v", seed, err)
		}
	}
}

// TestCompactedBatches models compaction against the simple rule it follows:
// drop any subset of a batch's records, keep each survivor's offsetDelta and
// the batch's lastOffsetDelta. The result must pass without dense offsets,
// and fail with them unless nothing was dropped.
func TestCompactedBatches(t *testing.T) {
	for seed := range uint64(200) {
		random := newRandom(seed)
		opts := randomBuildOptions(random, 30)
		var template kmsg.RecordBatch
		if err := template.ReadFrom(Build(opts)); err != nil {
			t.Fatal(err)
		}
		records := kmsgReadRecords(t, template.Records, int(template.NumRecords))
		var kept []kmsg.Record
		for _, record := range records {
			if random.IntN(3) != 0 {
				kept = append(kept, record)
			}
		}
		compacted := kmsgEncodeBatch(template, kept)
		header, err := Validate(compacted, sparseLimits)
		if err != nil || header.LastOffset() != opts.BaseOffset+Offset(len(records)-1) {
			t.Fatalf("seed %d: kept %d of %d records: %+v, %v", seed, len(kept), len(records), header, err)
		}
		_, err = Validate(compacted, DefaultLimits())
		if (err == nil) != (len(kept) == len(records)) {
			t.Fatalf("seed %d: kept %d of %d records, dense validation: %v", seed, len(kept), len(records), err)
		}
	}
}
