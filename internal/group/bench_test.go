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

// BenchmarkConsumerHeartbeat measures a steady heartbeat (nothing to
// change) of one member of a consumer group of members members, subscribed
// to a topic of 1,000 partitions, from Handle to its answer.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	for _, members := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			coordinator := NewCoordinator(DefaultConfig(), 0)
			coordinator.SetTopics(map[string]TopicInfo{"t": {ID: [16]byte{1}, Partitions: 1000}})
			coordinator.FinishLoad(0)
			settle := func(request *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
				coordinator.Handle(0, 0, request)
				for {
					ready := coordinator.Ready()
					for _, write := range ready.Appends {
						coordinator.AppendDone(write.ID, 0)
					}
					if len(ready.Answers) > 0 {
						return ready.Answers[0].Response.(*kmsg.ConsumerGroupHeartbeatResponse)
					}
				}
			}
			for i := 0; i < members; i++ {
				settle(consumerJoin("g", fmt.Sprintf("m%d", i), "t"))
			}
			// Every member reconciles to the last epoch.
			for round := 0; round < 3; round++ {
				for i := 0; i < members; i++ {
					member := coordinator.consumerGroups["g"].members[fmt.Sprintf("m%d", i)]
					settle(consumerBeat("g", member.id, member.current.MemberEpoch, member.current.Assigned["t"]))
				}
			}
			member := coordinator.consumerGroups["g"].members["m0"]
			request := consumerBeat("g", member.id, member.current.MemberEpoch, member.current.Assigned["t"])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if answer := settle(request); answer.ErrorCode != 0 {
					b.Fatalf("error %d", answer.ErrorCode)
				}
			}
		})
	}
}
