package record

import (
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKmsgDecodesBuild checks Build against kmsg, the decoder franz-go
// clients use: every header field, the CRC and every record.
func TestKmsgDecodesBuild(t *testing.T) {
	for seed := range uint64(50) {
		opts := randomBuildOptions(newRandom(seed), 50)
		batch := Build(opts)
		var decoded kmsg.RecordBatch
		if err := decoded.ReadFrom(batch); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if uint32(decoded.CRC) != crc32.Checksum(batch[AttributesPosition:], crc32.MakeTable(crc32.Castagnoli)) ||
			decoded.Magic != Magic || int(decoded.Length) != len(batch)-LogOverheadSize ||
			decoded.FirstOffset != int64(opts.BaseOffset) ||
			decoded.PartitionLeaderEpoch != int32(opts.LeaderEpoch) ||
			decoded.LastOffsetDelta != int32(len(opts.Records)-1) || decoded.NumRecords != int32(len(opts.Records)) ||
			decoded.FirstTimestamp != opts.BaseTimestampMs {
			t.Fatalf("seed %d: kmsg decoded %+v", seed, decoded)
		}
		checkRecordsMatch(t, kmsgReadRecords(t, decoded.Records, len(opts.Records)), opts.Records)
	}
}

// TestValidateAcceptsKmsgBatches encodes random records with kmsg, as a
// franz-go producer would, and checks Validate accepts them and reads the
// header kmsg wrote.
func TestValidateAcceptsKmsgBatches(t *testing.T) {
	for seed := range uint64(50) {
		random := newRandom(seed)
		opts := randomBuildOptions(random, 50)
		records := make([]kmsg.Record, len(opts.Records))
		maxTimestampMs := opts.BaseTimestampMs + opts.Records[0].TimestampDeltaMs
		for index, record := range opts.Records {
			maxTimestampMs = max(maxTimestampMs, opts.BaseTimestampMs+record.TimestampDeltaMs)
			records[index] = kmsg.Record{
				TimestampDelta64: record.TimestampDeltaMs, OffsetDelta: int32(index),
				Key: record.Key, Value: record.Value,
			}
			for _, header := range record.Headers {
				records[index].Headers = append(records[index].Headers, kmsg.Header{Key: header.Key, Value: header.Value})
			}
		}
		template := kmsg.RecordBatch{
			FirstOffset: 0, PartitionLeaderEpoch: -1, Attributes: 0x10, LastOffsetDelta: int32(len(records) - 1),
			FirstTimestamp: opts.BaseTimestampMs, MaxTimestamp: maxTimestampMs,
			ProducerID: 9, ProducerEpoch: 1, FirstSequence: 77,
		}
		batch := kmsgEncodeBatch(template, records)
		header, err := Validate(batch, DefaultLimits())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if header.RecordCount != int32(len(records)) || !header.IsTransactional() || header.ProducerID != 9 ||
			header.BaseSequence != 77 || header.PartitionLeaderEpoch != NoLeaderEpoch || header.Size() != len(batch) {
			t.Fatalf("seed %d: header %+v", seed, header)
		}
	}
}
