package wire

import (
	"bytes"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
	"github.com/tidelog/tide/internal/replica"
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

// Kafka's ProduceRequest.validateRecords, per partition: exactly one batch
// of magic 2, and zstd only from v7 (KIP-110). A refused partition never
// reaches the Backend; the others of the request are served.
func TestProduceChecksThePartitionsBatches(t *testing.T) {
	magicOne := testBatch(1, "m")
	magicOne[record.MagicPosition] = 1
	for _, c := range []struct {
		name    string
		version int16
		records []byte
		code    int16
	}{
		{"the issue 11 request: 200 batches", 7, bytes.Repeat(hostileBatch(), 200), kerr.InvalidRecord.Code},
		{"two batches", 9, append(testBatch(1, "a"), testBatch(1, "b")...), kerr.InvalidRecord.Code},
		{"a batch and a few stray bytes", 9, append(testBatch(1, "a"), 0, 0, 0), kerr.InvalidRecord.Code},
		{"no batch", 9, []byte{}, kerr.InvalidRecord.Code},
		{"magic 1", 9, magicOne, kerr.InvalidRecord.Code},
		{"zstd at v6", 6, recordtest.CompressBatch(testBatch(2, "z"), record.CompressionZstd), kerr.UnsupportedCompressionType.Code},
		{"zstd at v3", 3, recordtest.CompressBatch(testBatch(2, "z"), record.CompressionZstd), kerr.UnsupportedCompressionType.Code},
	} {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 3)
		h := newTestHandler(t, backend)
		request := produceRequest(c.version, replica.AcksLeader, map[string][][]byte{"orders": {c.records, testBatch(1, "ok")}})
		response := roundTrip(t, h, request).(*kmsg.ProduceResponse)
		refused, served := response.Topics[0].Partitions[0], response.Topics[0].Partitions[1]
		if refused.ErrorCode != c.code {
			t.Fatalf("%s: partition 0 got %s, want %s", c.name, kerr.ErrorForCode(refused.ErrorCode), kerr.ErrorForCode(c.code))
		}
		if served.ErrorCode != 0 || len(backend.produces) != 1 {
			t.Fatalf("%s: partition 1 got %+v; %d produces reached the backend, want 1", c.name, served, len(backend.produces))
		}
	}
}

// zstd from v7 on reaches the replica.
func TestProduceAcceptsZstdFromV7(t *testing.T) {
	for _, version := range []int16{7, 8, 9} {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 3)
		h := newTestHandler(t, backend)
		request := produceRequest(version, replica.AcksLeader, map[string][][]byte{"orders": {recordtest.CompressBatch(testBatch(2, "z"), record.CompressionZstd)}})
		response := roundTrip(t, h, request).(*kmsg.ProduceResponse)
		if code := response.Topics[0].Partitions[0].ErrorCode; code != 0 || len(backend.produces) != 1 {
			t.Fatalf("v%d: zstd got %s", version, kerr.ErrorForCode(code))
		}
	}
}

// A transactional batch without a transactional id is what Kafka's
// handleProduceRequest answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, for
// the whole request; nothing reaches the Backend.
func TestProduceRefusesATransactionalBatchWithoutAnID(t *testing.T) {
	transactional := record.Build(record.BuildOptions{Transactional: true, LeaderEpoch: record.NoLeaderEpoch,
		Producer: &record.ProducerState{ProducerID: 7, BaseSequence: 0}, Records: []record.Record{{Value: []byte("t")}}})
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 3)
	h := newTestHandler(t, backend)
	request := produceRequest(9, replica.AcksLeader, map[string][][]byte{"orders": {testBatch(1, "plain"), transactional}})
	response := roundTrip(t, h, request).(*kmsg.ProduceResponse)
	for _, partition := range response.Topics[0].Partitions {
		if partition.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("partition %d got %s", partition.Partition, kerr.ErrorForCode(partition.ErrorCode))
		}
	}
	if len(backend.produces) != 0 {
		t.Fatalf("%d produces reached the backend", len(backend.produces))
	}
}

// Produce v8+ carries the record errors and message the replica gives a
// batch refused for one of its records (KIP-467); older versions have no
// room for them.
func TestProduceCarriesRecordErrors(t *testing.T) {
	for _, version := range testVersions(t, 0) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 3)
		backend.produceAnswer = &replica.ProduceAnswer{ErrorCode: kerr.InvalidRecord.Code, BaseOffset: -1, LogStartOffset: -1,
			ErrorMessage: "a record of the batch was refused", RecordErrors: []replica.RecordError{{BatchIndex: 3, Message: "record 3: missing"}}}
		h := newTestHandler(t, backend)
		response := roundTrip(t, h, produceRequest(version, replica.AcksLeader, map[string][][]byte{"orders": {testBatch(1, "a")}})).(*kmsg.ProduceResponse)
		got := response.Topics[0].Partitions[0]
		if got.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("v%d: %s", version, kerr.ErrorForCode(got.ErrorCode))
		}
		if version < 8 {
			continue
		}
		if got.ErrorMessage == nil || *got.ErrorMessage != "a record of the batch was refused" ||
			len(got.ErrorRecords) != 1 || got.ErrorRecords[0].RelativeOffset != 3 || *got.ErrorRecords[0].ErrorMessage != "record 3: missing" {
			t.Fatalf("v%d: %+v", version, got)
		}
	}
}
