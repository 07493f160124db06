package frontend

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/wire"
)

// A fetch response stays within the fetch's MaxBytes, except that the
// first partition with records keeps them whatever their size (KIP-74);
// records in memory and records left in files count alike.
func TestLimitFetchBytes(t *testing.T) {
	answers := func(sizes ...int) ([]replica.FetchResponse, [][]wire.FileRange) {
		list, files := make([]replica.FetchResponse, len(sizes)), make([][]wire.FileRange, len(sizes))
		for i, size := range sizes {
			switch {
			case size > 0 && i%2 == 0:
				list[i].Records = make([]byte, size)
			case size > 0:
				files[i] = []wire.FileRange{{Size: int64(size) / 2}, {Size: int64(size) - int64(size)/2}}
			}
		}
		return list, files
	}
	for _, test := range []struct {
		sizes    []int
		maxBytes int32
		want     []int
	}{
		{[]int{10, 10, 10}, 25, []int{10, 10, 0}},
		{[]int{0, 50, 10}, 25, []int{0, 50, 0}},
		{[]int{5, 30, 5}, 25, []int{5, 0, 5}},
		{[]int{10, 10}, 0, []int{10, 0}},
	} {
		got, files := answers(test.sizes...)
		limitFetchBytes(got, files, test.maxBytes)
		for i, answer := range got {
			if kept := recordsSize(answer, files[i]); kept != int64(test.want[i]) {
				t.Errorf("sizes %v, max %d: partition %d keeps %d bytes, want %d", test.sizes, test.maxBytes, i, kept, test.want[i])
			}
		}
	}
}

// A parked follower fetch completes once the leader's high watermark has
// moved past the one last sent to that follower, and not before; a
// consumer's never completes for that alone.
func TestFollowerFetchCompletesOnHighWatermark(t *testing.T) {
	b := &backend{followerHW: map[followerPartition]record.Offset{}}
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	fetch := func(replicaID metadata.BrokerID, highWatermark record.Offset) *waitingFetch {
		return &waitingFetch{
			request: wire.FetchRequest{ReplicaID: replicaID, Partitions: []wire.FetchPartition{{TopicPartition: tp}}},
			answers: []replica.FetchResponse{{HighWatermark: highWatermark}},
		}
	}
	if !b.followerBehind(fetch(2, 5)) {
		t.Fatal("a follower never sent a high watermark is not behind")
	}
	b.noteFollowerHW(fetch(2, 5))
	if b.followerBehind(fetch(2, 5)) {
		t.Fatal("a follower that has the high watermark is behind")
	}
	if !b.followerBehind(fetch(2, 6)) || b.followerBehind(fetch(3, -1)) {
		t.Fatal("a moved high watermark does not complete the fetch, or an unknown one does")
	}
	if b.followerBehind(fetch(replica.ConsumerReplicaID, 6)) {
		t.Fatal("a consumer's fetch completes on the high watermark alone")
	}
}
