package group

import (
	"fmt"
	"testing"
)

// BenchmarkTick measures a Tick with no timer due over 1,000 Stable groups
// of three members: the cost the host pays on every tick.
func BenchmarkTick(b *testing.B) {
	h := newHarness(b, DefaultConfig())
	for i := 0; i < 1000; i++ {
		group := fmt.Sprintf("group-%d", i)
		for j := 0; j < 3; j++ {
			h.send(joinRequestFor(3, group, ""))
		}
	}
	h.advance(3000)
	h.advance(3000)
	for i := 0; i < 1000; i++ {
		group := h.coordinator.groups[fmt.Sprintf("group-%d", i)]
		h.send(syncRequestFor(group.id, group.leader, group.generation, nil))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.coordinator.Tick(h.nowMs + int64(i%1000))
	}
}

// BenchmarkOffsetCommit measures one OffsetCommit of ten partitions from
// Handle to its answer: validation, ten records encoded, the append
// reported committed, the records applied to the durable view.
func BenchmarkOffsetCommit(b *testing.B) {
	coordinator := NewCoordinator(DefaultConfig(), 0)
	coordinator.FinishLoad(0)
	offsets := map[int32]int64{}
	for partition := int32(0); partition < 10; partition++ {
		offsets[partition] = int64(partition)
	}
	request := commitRequest(8, "g", -1, "", "orders", offsets)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		coordinator.Handle(int64(i), RequestID(i), request)
		ready := coordinator.Ready()
		coordinator.AppendDone(ready.Appends[0].ID, 0)
		if answers := coordinator.Ready().Answers; len(answers) != 1 {
			b.Fatalf("%d answers", len(answers))
		}
	}
}
