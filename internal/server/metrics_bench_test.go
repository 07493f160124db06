package server

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/group"
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

// BenchmarkEmitGroupLag is what the consumer group families cost a scrape
// at the default limit, off the node loop: 1000 groups of 10 partitions,
// 10000 group partitions, made into series.
func BenchmarkEmitGroupLag(b *testing.B) {
	var groups frontend.ViewGroups
	for g := range 1000 {
		group := frontend.ViewGroup{Overview: group.Overview{ID: fmt.Sprintf("group-%d", g), Members: make([]group.MemberOverview, 3)}}
		for p := range int32(10) {
			group.Partitions = append(group.Partitions, frontend.ViewGroupPartition{Topic: "orders", Partition: p, Committed: 40, EndOffset: 100, Lag: 60})
		}
		groups.Groups = append(groups.Groups, group)
	}
	b.ReportAllocs()
	for b.Loop() {
		out := make(chan prometheus.Metric, 1<<16)
		emitGroups(out, groups)
		close(out)
		for range out {
		}
	}
}
