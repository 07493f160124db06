package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// A live min.insync.replicas change holds at once: raised above the ISR,
// acks=all is NOT_ENOUGH_REPLICAS and the high watermark stops; lowered
// again, the high watermark moves on and the waiting produce is answered.
func TestSetTopicConfigAppliesMinInsyncReplicasAtOnce(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 1
	r := leaderReplica(t, config, 0, 1)
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 2})
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all under a raised min.insync.replicas: %+v", answers)
	}
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 1})
	r.HandleProduce(ProduceRequest{ID: 2, Batches: producerBatch(1), Acks: AcksLeader, TimeoutTicks: 100})
	r.HandleProduce(ProduceRequest{ID: 3, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	answers := produceAnswers(r.Ready())
	if len(answers) != 2 || answers[1].ErrorCode != 0 || r.HighWatermark() != 2 {
		t.Fatalf("after lowering it again: %+v, high watermark %d", answers, r.HighWatermark())
	}
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 2})
	r.HandleProduce(ProduceRequest{ID: 4, Batches: producerBatch(1), Acks: AcksLeader, TimeoutTicks: 100})
	r.Ready()
	if r.HighWatermark() != 2 {
		t.Fatalf("the high watermark moved to %d with an ISR below min.insync.replicas", r.HighWatermark())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("min.insync.replicas 0 did not panic")
		}
	}()
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 0})
}

// A topic's max.message.bytes below the broker's bound refuses a larger
// produced batch with MESSAGE_TOO_LARGE, appending nothing; changed live,
// the next batch sees the new bound.
func TestMaxMessageBytesBoundsProducedBatches(t *testing.T) {
	config := testConfig(false, nil)
	batch := producerBatch(3)
	config.MaxMessageBytes = len(batch) - 1
	r := leaderReplica(t, config, 0, 1)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: batch, Acks: AcksLeader, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != kerr.MessageTooLarge.Code || r.LogEndOffset() != 0 {
		t.Fatalf("a batch above max.message.bytes: %+v, log end %d", answers, r.LogEndOffset())
	}
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 1, MaxMessageBytes: len(batch)})
	r.HandleProduce(ProduceRequest{ID: 2, Batches: batch, Acks: AcksLeader, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != 0 {
		t.Fatalf("a batch of exactly max.message.bytes: %+v", answers)
	}
}

// On a compacted topic a record without a key is INVALID_RECORD, with a
// record error for each such record and Kafka's messages; keyed records
// are taken.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	config := testConfig(false, nil)
	config.Compacted = true
	r := leaderReplica(t, config, 0, 1)
	mixed := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch,
		Records: []record.Record{{Key: []byte("k"), Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}})
	r.HandleProduce(ProduceRequest{ID: 1, Batches: mixed, Acks: AcksLeader, TimeoutTicks: 100})
	answers := produceAnswers(r.Ready())
	message := "Compacted topic cannot accept message without key in topic partition t-0"
	want := "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: " +
		"[RecordError(batchIndex=1, message='" + message + "'), RecordError(batchIndex=2, message='" + message + "')]"
	if len(answers) != 1 || answers[0].ErrorCode != kerr.InvalidRecord.Code || len(answers[0].RecordErrors) != 2 ||
		answers[0].RecordErrors[0] != (RecordError{BatchIndex: 1, Message: message}) || answers[0].ErrorMessage != want || r.LogEndOffset() != 0 {
		t.Fatalf("keyless records on a compacted topic: %+v", answers)
	}
	keyed := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, Records: []record.Record{{Key: []byte("k"), Value: []byte("a")}}})
	r.HandleProduce(ProduceRequest{ID: 2, Batches: keyed, Acks: AcksLeader, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != 0 {
		t.Fatalf("a keyed record on a compacted topic: %+v", answers)
	}
}

// compression.type naming a codec: the leader recompresses a produced
// batch in another codec before it stamps and appends it, the CRC
// recomputed (with LogAppendTime too), every other field the producer's;
// producer (Recompress false) keeps the producer's bytes.
func TestLeaderRecompressesToTheTopicCodec(t *testing.T) {
	config := testConfig(false, nil)
	config.Recompress, config.Codec, config.LogAppendTime = true, record.CompressionZstd, true
	r := leaderReplica(t, config, 0, 1)
	produced := producerBatch(3)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: produced, Acks: AcksLeader, TimeoutTicks: 100, AppendTimeMs: 5000})
	appended := appendedBatches(r.Ready())
	header, err := record.Validate(appended, record.Limits{MaxBatchBytes: 1 << 20, MaxDecompressedBatchBytes: 1 << 20})
	if err != nil {
		t.Fatalf("the recompressed batch does not validate: %v", err)
	}
	if header.Compression() != record.CompressionZstd || header.RecordCount != 3 || header.BaseOffset != 0 ||
		header.PartitionLeaderEpoch != 5 || !header.IsLogAppendTime() || header.MaxTimestampMs != 5000 {
		t.Fatalf("appended %+v", header)
	}
	r.SetTopicConfig(TopicConfig{MinInsyncReplicas: 1})
	second := producerBatch(2)
	r.HandleProduce(ProduceRequest{ID: 2, Batches: second, Acks: AcksLeader, TimeoutTicks: 100})
	if header, err := record.Validate(appendedBatches(r.Ready()), record.DefaultLimits()); err != nil || header.Compression() != record.CompressionNone {
		t.Fatalf("with compression.type=producer: %+v %v", header, err)
	}
}

// appendedBatches is the bytes of the Ready's one Append.
func appendedBatches(ready Ready) []byte {
	for _, op := range ready.Log {
		if op.Kind == Append {
			return op.Batches
		}
	}
	return nil
}
