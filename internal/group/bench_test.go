package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
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

// BenchmarkOffsetCommit measures one committed OffsetCommit of ten
// partitions, from the request to its answer.
func BenchmarkOffsetCommit(b *testing.B) {
	h := newHarness(b, DefaultConfig())
	offsets := map[int32]int64{}
	for partition := int32(0); partition < 10; partition++ {
		offsets[partition] = int64(partition)
	}
	request := commitRequest(8, "g", -1, "", "orders", offsets)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.send(request)
	}
	_ = kmsg.OffsetCommitResponse{}
}
