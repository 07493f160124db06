package frontend

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
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

// A parked consumer fetch is answered in the very pass in which its
// partition's high watermark passes its fetch offset: not at the next
// tick, not at MaxWait. A record appended but not yet synced (above the
// high watermark with flush=always) wakes the fetch for a read that finds
// nothing to serve, and it parks again; the sync that moves the high
// watermark answers it with the record. Every millisecond a parked fetch
// waits here is added to a consumer's end-to-end latency
// (tide bench e2e).
func TestParkedFetchAnswersWhenHighWatermarkPasses(t *testing.T) {
	w := newGroupHostWorld(t, rules.Rules{})
	partition := w.serving("app")
	tp := offsetsPartition(partition)
	r, _, _ := w.fe.Node().Replica(tp)
	offset := r.HighWatermark()
	var answered []replica.FetchResponse
	(*backend)(w.fe).Fetch(wire.FetchRequest{ReplicaID: replica.ConsumerReplicaID, ReplicaEpoch: metadata.NoBrokerEpoch,
		MaxWaitTicks: 1000, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []wire.FetchPartition{{TopicPartition: tp, FetchRequest: replica.FetchRequest{ReplicaID: replica.ConsumerReplicaID,
			ReplicaEpoch: metadata.NoBrokerEpoch, CurrentLeaderEpoch: -1, FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: -1,
			MaxBytes: 1 << 20}}}},
		func(answers []replica.FetchResponse) { answered = answers })
	w.fe.Flush()
	if answered != nil {
		t.Fatalf("a fetch at the high watermark %d answered at once: %+v", offset, answered)
	}
	w.sync = false
	w.appendUncommitted(partition, simpleCommit("app", 7))
	w.fe.Flush()
	if answered != nil {
		t.Fatalf("a fetch answered before the high watermark moved: %+v", answered)
	}
	w.fe.Node().SyncDirty() // no tick: the same pass
	w.fe.Flush()
	if answered == nil {
		t.Fatalf("the high watermark moved to %d past the fetch offset %d and the parked fetch still waits", r.HighWatermark(), offset)
	}
	if answered[0].ErrorCode != 0 || len(answered[0].Records) == 0 || answered[0].HighWatermark <= offset {
		t.Fatalf("woken fetch answered %+v", answered[0])
	}
}
