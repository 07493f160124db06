package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/replica"
)

// laggingBackend answers fetches with a high watermark behind the log end,
// as a replica with records not yet committed does.
type laggingBackend struct{ *fakeBackend }

func (b laggingBackend) Fetch(request FetchRequest, done func([]replica.FetchResponse)) {
	b.fakeBackend.Fetch(request, func(answers []replica.FetchResponse) {
		for i := range answers {
			if answers[i].ErrorCode == 0 {
				answers[i].HighWatermark--
			}
		}
		done(answers)
	})
}

// logEndOffsets returns each partition's LogEndOffsetTag value, or -1 for
// a partition without one.
func logEndOffsets(response *kmsg.FetchResponse) []int64 {
	var ends []int64
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			end := int64(-1)
			partition.UnknownTags.Each(func(key uint32, value []byte) {
				if key == LogEndOffsetTag {
					reader := kbin.Reader{Src: value}
					end = reader.Varlong()
				}
			})
			ends = append(ends, end)
		}
	}
	return ends
}

// A flexible debugging fetch carrying LogEndOffsetTag gets each
// partition's log end offset in that tag, from the same answer as its high
// watermark; a consumer's fetch, a fetch without the tag and a fetch below
// v12 get none, so ordinary clients never see it.
func TestFetchDebugLogEndOffset(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 5)
	backend.topics["orders"].partitions[0].end = 8
	h := newTestHandler(t, laggingBackend{backend})
	for _, version := range []int16{11, 12, 15} {
		for _, replicaID := range []int32{-1, -2} {
			for _, asked := range []bool{false, true} {
				request := kmsg.NewPtrFetchRequest()
				request.Version, request.ReplicaID, request.ReplicaState.ID = version, replicaID, replicaID
				request.SessionEpoch, request.MaxBytes = -1, 1
				topic := kmsg.NewFetchRequestTopic()
				topic.Topic, topic.TopicID = "orders", backend.topics["orders"].id
				part := kmsg.NewFetchRequestTopicPartition()
				part.FetchOffset, part.PartitionMaxBytes, part.CurrentLeaderEpoch = 8, 1, -1
				topic.Partitions = append(topic.Partitions, part)
				request.Topics = append(request.Topics, topic)
				if asked {
					request.UnknownTags.Set(LogEndOffsetTag, nil)
				}
				response := roundTrip(t, h, request).(*kmsg.FetchResponse)
				got := logEndOffsets(response)
				want := int64(-1)
				if asked && version >= 12 && replicaID == -2 {
					want = 8
				}
				if len(got) != 1 || got[0] != want {
					t.Errorf("v%d, replica %d, tag asked %t: log end offsets %v, want [%d]", version, replicaID, asked, got, want)
				}
				if len(got) == 1 && response.Topics[0].Partitions[0].HighWatermark != 7 {
					t.Errorf("v%d: high watermark %d, want 7", version, response.Topics[0].Partitions[0].HighWatermark)
				}
			}
		}
	}
}
