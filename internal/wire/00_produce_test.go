package wire

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBatch is a valid RecordBatch v2 of n records, as a producer sends it.
func testBatch(n int, value string) []byte {
	records := make([]record.Record, n)
	for i := range records {
		records[i] = record.Record{Key: []byte("k"), Value: []byte(value)}
	}
	return record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: 1_700_000_000_000, Records: records})
}

func produceRequest(version, acks int16, partitions map[string][][]byte) *kmsg.ProduceRequest {
	request := kmsg.NewPtrProduceRequest()
	request.Version, request.Acks, request.TimeoutMillis = version, acks, 1500
	for _, name := range []string{"orders", "missing"} {
		batches, ok := partitions[name]
		if !ok {
			continue
		}
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = name
		for p, batch := range batches {
			partition := kmsg.NewProduceRequestTopicPartition()
			partition.Partition, partition.Records = int32(p), batch
			topic.Partitions = append(topic.Partitions, partition)
		}
		request.Topics = append(request.Topics, topic)
	}
	return request
}

func TestProduce(t *testing.T) {
	for _, version := range testVersions(t, 0) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 3)
		h := newTestHandler(t, backend)
		first, second := testBatch(3, "a"), testBatch(2, "b")
		request := produceRequest(version, replica.AcksAll, map[string][][]byte{"orders": {first, second}, "missing": {testBatch(1, "c")}})
		roundTrip(t, h, request) // offsets 0..2 and 0..1
		response := roundTrip(t, h, request).(*kmsg.ProduceResponse)
		orders, missing := response.Topics[0], response.Topics[1]
		for p, want := range []int64{3, 2} {
			got := orders.Partitions[p]
			if got.ErrorCode != 0 || got.BaseOffset != want || got.LogAppendTime != -1 {
				t.Fatalf("v%d partition %d: %+v, want base offset %d", version, p, got, want)
			}
			if version >= 5 && got.LogStartOffset != 0 {
				t.Fatalf("v%d: log start offset %d", version, got.LogStartOffset)
			}
		}
		if missing.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: unknown partition error %d", version, missing.Partitions[0].ErrorCode)
		}
		if got := backend.produces[0]; got.Acks != replica.AcksAll || got.TimeoutTicks != 1500 {
			t.Fatalf("v%d: backend got acks %d timeout %d ticks", version, got.Acks, got.TimeoutTicks)
		}
	}
}

// TestProduceBatchesPassThrough checks the batches reach the Backend as the
// producer sent them, aliasing the request: no decoding, no copy.
func TestProduceBatchesPassThrough(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	batch := testBatch(2, "x")
	raw := encodeRequest(produceRequest(9, replica.AcksLeader, map[string][][]byte{"orders": {batch}}), 1)
	start := bytes.Index(raw, batch)
	if _, err := call(t, h, raw); err != nil {
		t.Fatal(err)
	}
	got := backend.produces[0].Batches
	if len(got) != len(batch) || unsafe.SliceData(got) != &raw[start] {
		t.Fatalf("batches were copied or resized: %d bytes, want the %d at offset %d of the request", len(got), len(batch), start)
	}
	// Only the fields the replica stamps (base offset, leader epoch) differ.
	if !bytes.Equal(got[16:], batch[16:]) || !bytes.Equal(got[8:12], batch[8:12]) {
		t.Fatalf("batch bytes changed beyond the stamped header fields")
	}
}

func TestProduceAcksNoneHasNoResponse(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	response, err := call(t, h, encodeRequest(produceRequest(7, replica.AcksNone, map[string][][]byte{"orders": {testBatch(1, "a")}}), 1))
	if response != nil || err != nil {
		t.Fatalf("acks=0 answered %d bytes, %v", len(response), err)
	}
	if len(backend.produces) != 1 || backend.topics["orders"].partitions[0].end != 1 {
		t.Fatalf("acks=0 produce did not reach the log")
	}
}

// TestProduceWaitsForEveryPartition checks the response is assembled only
// once the last partition answers, as an acks=all produce does.
func TestProduceWaitsForEveryPartition(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.holdProduce = true
	h := newTestHandler(t, backend)
	request := produceRequest(9, replica.AcksAll, map[string][][]byte{"orders": {testBatch(1, "a"), testBatch(1, "b")}})
	var raw []byte
	calls := 0
	h.Handle(encodeRequest(request, 5), func(r []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		raw = r
		calls++
	})
	if calls != 0 || len(backend.held) != 2 {
		t.Fatalf("answered before the partitions did: %d calls, %d held", calls, len(backend.held))
	}
	backend.releaseProduce()
	if calls != 1 {
		t.Fatalf("done called %d times after every partition answered", calls)
	}
	response := request.ResponseKind().(*kmsg.ProduceResponse)
	decodeResponse(t, raw, 5, response)
	if response.Topics[0].Partitions[1].ErrorCode != 0 || response.Topics[0].Partitions[1].BaseOffset != 0 {
		t.Fatalf("partition 1: %+v", response.Topics[0].Partitions[1])
	}
}

func TestProduceRefusals(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	transactional := produceRequest(9, replica.AcksAll, map[string][][]byte{"orders": {testBatch(1, "a")}})
	transactional.TransactionID = kmsg.StringPtr("txn")
	badAcks := produceRequest(3, 2, map[string][][]byte{"orders": {testBatch(1, "a")}})
	for _, c := range []struct {
		request *kmsg.ProduceRequest
		want    int16
	}{{transactional, kerr.TransactionalIDAuthorizationFailed.Code}, {badAcks, kerr.InvalidRequiredAcks.Code}} {
		response := roundTrip(t, h, c.request).(*kmsg.ProduceResponse)
		if got := response.Topics[0].Partitions[0].ErrorCode; got != c.want {
			t.Fatalf("error %d, want %d", got, c.want)
		}
	}
	if len(backend.produces) != 0 {
		t.Fatalf("a refused produce reached the Backend")
	}
}

// TestProduceRefusedAcksNoneHasNoResponse checks a refused acks=0 produce
// still sends nothing: the client reads no response to acks=0.
func TestProduceRefusedAcksNoneHasNoResponse(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	request := produceRequest(9, replica.AcksNone, map[string][][]byte{"orders": {testBatch(1, "a")}})
	request.TransactionID = kmsg.StringPtr("txn")
	if response, err := call(t, h, encodeRequest(request, 1)); response != nil || err != nil {
		t.Fatalf("answered %d bytes, %v", len(response), err)
	}
	if len(backend.produces) != 0 {
		t.Fatalf("a refused produce reached the Backend")
	}
}
