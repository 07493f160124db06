package replica

import (
	"bytes"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
)

// hostileBatch is the batch of issue 11: CRC-valid, the zstd attribute over
// garbage, lastOffsetDelta 2^31-2 and recordCount 2^31-1.
func hostileBatch() []byte {
	return record.EncodeBatch(record.Header{
		PartitionLeaderEpoch: record.NoLeaderEpoch, Attributes: int16(record.CompressionZstd),
		LastOffsetDelta: math.MaxInt32 - 1, RecordCount: math.MaxInt32,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, bytes.Repeat([]byte{0xab}, 40))
}

// refusedWith produces batches to a fresh leader and checks the answer
// carries code and nothing reached the log.
func refusedWith(t *testing.T, name string, config Config, batches []byte, code int16) ProduceAnswer {
	t.Helper()
	r := leaderReplica(t, config, 0, 1)
	r.Ready()
	r.HandleProduce(ProduceRequest{ID: 1, Batches: batches, Acks: AcksLeader})
	ready := r.Ready()
	answers := produceAnswers(ready)
	if len(answers) != 1 || answers[0].ErrorCode != code {
		t.Fatalf("%s: answers %+v, want %s", name, answers, kerr.ErrorForCode(code))
	}
	if len(ready.Log) != 0 || r.LogEndOffset() != 0 {
		t.Fatalf("%s: refused, yet the log got %s and ends at %d", name, ready, r.LogEndOffset())
	}
	return answers[0]
}

// The gateway check of issue 11: every produced batch is checked whole,
// compressed ones opened, before anything reaches the log. Before, the
// hostile batch was accepted and the log end offset jumped by 2^31 per
// batch.
func TestLeaderRefusesHostileBatches(t *testing.T) {
	config := testConfig(false, nil)
	small := config
	small.MaxDecompressedBatchBytes = 1 << 20
	lying, _ := record.ParseHeader(producerBatch(3))
	lying.RecordCount, lying.LastOffsetDelta = 5, 4
	lying.Attributes |= int16(record.CompressionGzip)
	lyingBatch := record.EncodeBatch(lying, recordtest.Compress(record.CompressionGzip, producerBatch(3)[record.HeaderSize:]))
	for _, c := range []struct {
		name    string
		config  Config
		batches []byte
		code    int16
	}{
		{"the issue 11 batch", config, hostileBatch(), kerr.CorruptMessage.Code},
		{"200 issue 11 batches", config, bytes.Repeat(hostileBatch(), 200), kerr.CorruptMessage.Code},
		{"a zstd bomb", small, recordtest.Bomb(record.CompressionZstd, 16<<20, 1), kerr.InvalidRecord.Code},
		{"a gzip bomb", small, recordtest.Bomb(record.CompressionGzip, 16<<20, 1), kerr.InvalidRecord.Code},
		{"gzip over garbage", config, record.EncodeBatch(record.Header{Attributes: int16(record.CompressionGzip), ProducerID: -1, RecordCount: 1,
			BaseSequence: -1, PartitionLeaderEpoch: -1}, []byte("garbage, not gzip")), kerr.CorruptMessage.Code},
		{"a lying record count", config, lyingBatch, kerr.InvalidRecord.Code},
		{"a control batch", config, record.Build(record.BuildOptions{Control: true, LeaderEpoch: -1, Records: []record.Record{{Value: []byte("v")}}}),
			kerr.InvalidRecord.Code},
		{"a transactional batch", config, record.Build(record.BuildOptions{Transactional: true, LeaderEpoch: -1,
			Producer: &record.ProducerState{ProducerID: 7, BaseSequence: 0}, Records: []record.Record{{Value: []byte("v")}}}),
			kerr.TransactionalIDAuthorizationFailed.Code},
		{"a producer id with a negative sequence", config, record.Build(record.BuildOptions{LeaderEpoch: -1,
			Producer: &record.ProducerState{ProducerID: 7, BaseSequence: -1}, Records: []record.Record{{Value: []byte("v")}}}),
			kerr.InvalidRecord.Code},
	} {
		refusedWith(t, c.name, c.config, c.batches, c.code)
	}
}

// A batch refused for one of its records says which, for Produce v8+
// (KIP-467); one refused as a whole carries only its code, as in Kafka.
func TestLeaderNamesTheRecordAtFault(t *testing.T) {
	lying, _ := record.ParseHeader(producerBatch(3))
	lying.RecordCount, lying.LastOffsetDelta = 5, 4
	lying.Attributes |= int16(record.CompressionZstd)
	batch := record.EncodeBatch(lying, recordtest.Compress(record.CompressionZstd, producerBatch(3)[record.HeaderSize:]))
	answer := refusedWith(t, "a lying record count", testConfig(false, nil), batch, kerr.InvalidRecord.Code)
	if len(answer.RecordErrors) != 1 || answer.RecordErrors[0].BatchIndex != 3 || answer.ErrorMessage == "" {
		t.Fatalf("answer %+v, want record 3 named and a message", answer)
	}
	answer = refusedWith(t, "the issue 11 batch", testConfig(false, nil), hostileBatch(), kerr.CorruptMessage.Code)
	if len(answer.RecordErrors) != 0 || answer.ErrorMessage != "" {
		t.Fatalf("a batch refused whole: %+v, want no record errors", answer)
	}
}

// Compressed batches from producers, opened and checked, are appended as
// they came: never re-encoded.
func TestLeaderAppendsCompressedBatchesAsSent(t *testing.T) {
	for _, codec := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		r := leaderReplica(t, testConfig(false, nil), 0, 1)
		r.Ready()
		batch := recordtest.CompressBatch(producerBatch(4), codec)
		sent := bytes.Clone(batch)
		r.HandleProduce(ProduceRequest{ID: 1, Batches: batch, Acks: AcksLeader})
		ready := r.Ready()
		if len(ready.Log) != 1 || r.LogEndOffset() != 4 {
			t.Fatalf("%s: %s, log end %d", codec, ready, r.LogEndOffset())
		}
		if !bytes.Equal(batch[record.AttributesPosition:], sent[record.AttributesPosition:]) {
			t.Fatalf("%s: the batch was changed past its stamped fields", codec)
		}
	}
}

func TestConfigRefusesABadDecompressedLimit(t *testing.T) {
	config := testConfig(false, nil)
	config.MaxDecompressedBatchBytes = -1
	if config.Validate() == nil {
		t.Fatal("a negative decompressed-size limit was accepted")
	}
	config.MaxDecompressedBatchBytes = record.MaxDecompressedBatchBytesMax + 1
	if config.Validate() == nil {
		t.Fatal("a decompressed-size limit above the maximum was accepted")
	}
}
