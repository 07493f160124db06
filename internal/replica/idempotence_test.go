package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// idempotentBatch is a batch of records from producer 7 in epoch 0.
func idempotentBatch(sequence int32, records int) []byte {
	list := make([]record.Record, records)
	for i := range list {
		list[i] = record.Record{Value: []byte("v")}
	}
	return record.Build(record.BuildOptions{Records: list, LeaderEpoch: record.NoLeaderEpoch,
		Producer: &record.ProducerState{ProducerID: 7, ProducerEpoch: 0, BaseSequence: sequence}})
}

// A retry of a batch the log holds is answered with the original's offset,
// only once the original is committed, and appends nothing: the duplicate a
// lost answer would otherwise cause (KIP-98).
func TestLeaderAnswersARetryWithTheOriginalOffset(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 2
	r := leaderReplica(t, config, 0, 1, 2)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(2), Acks: AcksAll, TimeoutTicks: 100})
	r.HandleProduce(ProduceRequest{ID: 2, Batches: idempotentBatch(0, 3), Acks: AcksAll, TimeoutTicks: 100})
	r.Ready()
	r.HandleProduce(ProduceRequest{ID: 3, Batches: idempotentBatch(0, 3), Acks: AcksAll, TimeoutTicks: 100})
	if ready := r.Ready(); len(ready.Log) != 0 || len(produceAnswers(ready)) != 0 {
		t.Fatalf("a retry of an uncommitted batch: %s, answers %+v; want nothing appended and no answer yet", ready, produceAnswers(ready))
	}
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 5, LastFetchedEpoch: 5})
	answers := produceAnswers(r.Ready())
	if len(answers) != 3 || answers[1].BaseOffset != 2 || answers[2].BaseOffset != 2 || answers[2].ErrorCode != 0 {
		t.Fatalf("once committed, the original and its retry: %+v; want both at offset 2", answers)
	}
	if r.LogEndOffset() != 5 {
		t.Fatalf("log end offset %d, want 5: the retry was appended", r.LogEndOffset())
	}
	r.HandleProduce(ProduceRequest{ID: 4, Batches: idempotentBatch(0, 3), Acks: AcksLeader})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].BaseOffset != 2 {
		t.Fatalf("a retry of a committed batch: %+v", answers)
	}
}

func TestLeaderRefusesBatchesOutOfSequence(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 0, 1)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: idempotentBatch(0, 1), Acks: AcksLeader})
	r.HandleProduce(ProduceRequest{ID: 2, Batches: idempotentBatch(2, 1), Acks: AcksLeader})
	old := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("v")}}, LeaderEpoch: record.NoLeaderEpoch,
		Producer: &record.ProducerState{ProducerID: 7, ProducerEpoch: -1, BaseSequence: 1}})
	r.HandleProduce(ProduceRequest{ID: 3, Batches: old, Acks: AcksLeader})
	answers := produceAnswers(r.Ready())
	if len(answers) != 3 || answers[0].ErrorCode != 0 || answers[1].ErrorCode != kerr.OutOfOrderSequenceNumber.Code || answers[2].ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("answers %+v; want success, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH", answers)
	}
	if r.LogEndOffset() != 1 {
		t.Fatalf("refused batches were appended: log end offset %d", r.LogEndOffset())
	}
}

// followerWithIdempotentLog is broker 2 following broker 1, having
// replicated producer 7's batches of 2 records at sequences 0, 2, 4, 6
// (offsets 0..7), in epoch 0.
func followerWithIdempotentLog(t *testing.T) *Replica {
	t.Helper()
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	r, err := New(config, LogState{})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0})
	fetch := r.Ready().Messages[0].Fetch
	var records []byte
	for i := 0; i < 4; i++ {
		records = record.AppendBatch(records, record.BuildOptions{BaseOffset: record.Offset(2 * i), LeaderEpoch: 0,
			Records:  []record.Record{{Value: []byte("a")}, {Value: []byte("b")}},
			Producer: &record.ProducerState{ProducerID: 7, BaseSequence: int32(2 * i)}})
	}
	r.HandleFetchResponse(FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: records})
	r.Ready()
	return r
}

func TestFollowerTracksReplicatedProducerBatches(t *testing.T) {
	r := followerWithIdempotentLog(t)
	entries, ok := r.ProducerState()
	if !ok || len(entries) != 1 || entries[0].LastSequence() != 7 || entries[0].LastBatch().LastOffset != 7 {
		t.Fatalf("follower producer state %v", entries)
	}
}

// A truncation that removes a producer's batches asks for a rebuild, and
// the replica refuses to be used until it gets one: with its old state, a
// new leader would answer a retry of a truncated batch as a duplicate.
func TestTruncationAsksForARebuild(t *testing.T) {
	r := followerWithIdempotentLog(t)
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	fetch := r.Ready().Messages[0].Fetch
	r.HandleFetchResponse(FetchResponse{ID: fetch.ID, DivergingEpoch: &EpochEndOffset{Epoch: 0, EndOffset: 4}, HighWatermark: 0})
	ready := r.Ready()
	if !ready.RebuildProducerState || r.LogEndOffset() != 4 {
		t.Fatalf("after truncating to 4: %s", ready)
	}
	if _, ok := r.ProducerState(); ok {
		t.Fatal("the producer state is usable before the rebuild")
	}
	headers, _ := record.ValidateAll(idempotentHeadersForTest(), record.Limits{MaxBatchBytes: 1 << 20})
	if err := r.RebuildProducerState(headers); err == nil {
		t.Fatal("a rebuild from batches beyond the log end offset was accepted")
	}
	if err := r.RebuildProducerState(headers[:2]); err != nil {
		t.Fatal(err)
	}
	if entries, _ := r.ProducerState(); len(entries) != 1 || entries[0].LastSequence() != 3 {
		t.Fatalf("rebuilt state %v, want producer 7 ending at sequence 3", entries)
	}
}

func idempotentHeadersForTest() []byte {
	var records []byte
	for i := 0; i < 4; i++ {
		records = record.AppendBatch(records, record.BuildOptions{BaseOffset: record.Offset(2 * i), LeaderEpoch: 0,
			Records:  []record.Record{{Value: []byte("a")}, {Value: []byte("b")}},
			Producer: &record.ProducerState{ProducerID: 7, BaseSequence: int32(2 * i)}})
	}
	return records
}

// A replica created from a log rebuilds its producer state from the log's
// batch headers: a retry of a batch written before a restart is still a
// duplicate.
func TestNewReplicaRebuildsProducerState(t *testing.T) {
	headers, err := record.ValidateAll(idempotentHeadersForTest(), record.Limits{MaxBatchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	config := testConfig(false, nil)
	config.Broker, config.Partition = 1, testPartition
	r, err := New(config, LogState{LogEndOffset: 8, DurableEndOffset: 8, HighWatermark: 8, ProducerBatches: headers})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	r.Ready()
	retry := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}},
		Producer: &record.ProducerState{ProducerID: 7, BaseSequence: 4}})
	r.HandleProduce(ProduceRequest{ID: 1, Batches: retry, Acks: AcksLeader})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].BaseOffset != 4 || r.LogEndOffset() != 8 {
		t.Fatalf("a retry after a restart: %+v, log end offset %d", answers, r.LogEndOffset())
	}
	if _, err := New(config, LogState{LogEndOffset: 6, ProducerBatches: headers}); err == nil {
		t.Fatal("producer batches beyond the log end offset were accepted")
	}
}
