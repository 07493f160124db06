package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/replica"
)

// BenchmarkHandleProduce measures the wire's cost of one acks=all produce
// of one 100-record batch: decoding, the Backend call and encoding (the
// fake's validation included).
func BenchmarkHandleProduce(b *testing.B) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(b, backend)
	raw := encodeRequest(produceRequest(9, replica.AcksAll, map[string][][]byte{"orders": {testBatch(100, "value-0123456789")}}), 1)
	request := make([]byte, len(raw))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		copy(request, raw)
		h.Handle(request, func([]byte, error) {})
		p := backend.topics["orders"].partitions[0]
		p.batches, p.end = p.batches[:0], 0 // keep the log from growing
	}
}

// BenchmarkHandleFetch measures one consumer fetch of two partitions
// returning 100 stored batches: the records are copied once, into the
// response.
func BenchmarkHandleFetch(b *testing.B) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	for range 100 {
		backend.Produce(tp("orders", 0), replica.ProduceRequest{Batches: testBatch(10, "value"), Acks: replica.AcksAll}, func(replica.ProduceAnswer) {})
	}
	h := newTestHandler(b, backend)
	request := testFetchRequest(12, 0, -1)
	request.Topics = request.Topics[:1]
	raw := encodeRequest(request, 1)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		h.Handle(raw, func(response []byte, _ error) { size = len(response) })
	}
	b.SetBytes(int64(size))
}
