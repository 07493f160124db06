package server

import (
	"encoding/binary"
	"testing"

	"github.com/tidelog/tide/internal/wire"
)

// BenchmarkObserveRequest is what metrics add to each Kafka request when
// they are served: a label lookup, counters, two clock reads and the
// histogram, on the request's way in and its answer's way out.
func BenchmarkObserveRequest(b *testing.B) {
	m := newNodeMetrics(&Server{})
	request := make([]byte, 1024)
	binary.BigEndian.PutUint16(request, 0) // Produce
	response := wire.Response{Bytes: make([]byte, 64)}
	answer := func(wire.Response, error) {}
	b.ReportAllocs()
	for b.Loop() {
		m.observeRequest(request, answer)(response, nil)
	}
}
