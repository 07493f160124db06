package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionEpochs returns each partition's PartitionEpochTag value, or -1
// for a partition without one.
func partitionEpochs(response *kmsg.MetadataResponse) []int32 {
	var epochs []int32
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			epoch := int32(-1)
			partition.UnknownTags.Each(func(key uint32, value []byte) {
				if key == PartitionEpochTag {
					reader := kbin.Reader{Src: value}
					epoch = reader.Varint()
				}
			})
			epochs = append(epochs, epoch)
		}
	}
	return epochs
}

// A flexible Metadata request carrying PartitionEpochTag gets each
// partition's partition epoch in that tag; one without it, and every
// request below v9, gets none, so ordinary clients never see the tag.
func TestMetadataPartitionEpochs(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 5)
	backend.topics["orders"].partitions[1].state.PartitionEpoch = 7
	h := newTestHandler(t, backend)
	for _, version := range []int16{8, 9, 12} {
		for _, asked := range []bool{false, true} {
			request := kmsg.NewPtrMetadataRequest()
			request.Version = version
			if asked {
				request.UnknownTags.Set(PartitionEpochTag, nil)
			}
			response := roundTrip(t, h, request).(*kmsg.MetadataResponse)
			got := partitionEpochs(response)
			want := []int32{-1, -1}
			if asked && version >= 9 {
				want = []int32{0, 7}
			}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("v%d, tag asked %t: partition epochs %v, want %v", version, asked, got, want)
			}
		}
	}
}
