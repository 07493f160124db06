package broker

import (
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// singleReplicaTopic is a metadata log creating broker 1 and topic "logs"
// with partitions on it alone.
func singleReplicaTopic(partitions int) []metadata.Entry {
	var states []metadata.PartitionState
	for p := range partitions {
		states = append(states, metadata.PartitionState{TopicPartition: metadata.TopicPartition{Topic: "logs", Partition: int32(p)},
			Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1})
	}
	records := []metadata.Record{
		metadata.RegisterBroker{ID: 1, Epoch: 7, Incarnation: "one"},
		metadata.UnfenceBroker{ID: 1, Epoch: 7},
		metadata.CreateTopic{Name: "logs", Config: metadata.TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1}, Partitions: states},
	}
	entries := make([]metadata.Entry, len(records))
	for i, rec := range records {
		entries[i] = metadata.Entry{Offset: int64(i), Record: rec}
	}
	return entries
}

// Retention runs on the node's Tick by the clock the runtime gives it:
// the first pass one check interval after the node first has a clock, and
// then at most RetentionPartitionsPerTick partitions a tick, each log start
// moving through its replica.
func TestRetentionRunsOnTheTickWithABoundPerTick(t *testing.T) {
	n := New(Config{
		ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
		RetentionMs: 1000, RetentionCheckIntervalMs: 100, RetentionPartitionsPerTick: 1,
	}, 7)
	if err := n.ApplyMetadata(singleReplicaTopic(3)); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		batch := record.Build(record.BuildOptions{BaseTimestampMs: 5_000, LeaderEpoch: record.NoLeaderEpoch, Records: []record.Record{{Value: []byte("old")}}})
		n.HandleClient(ClientRequest{Client: 1, Partition: metadata.TopicPartition{Topic: "logs", Partition: p},
			Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: replica.AcksAll, TimeoutTicks: 100}})
	}
	pass(n)
	moved := func() int {
		count := 0
		for _, tp := range n.Partitions() {
			r, log, _ := n.Replica(tp)
			if log.LogStartOffset() == 1 && r.LogStartOffset() == 1 {
				count++
			}
		}
		return count
	}
	n.SetClock(10_000) // every record is 5 s old, past retention.ms
	n.Tick()
	if moved() != 0 {
		t.Fatalf("retention ran before its first interval")
	}
	for want := 1; want <= 3; want++ {
		n.SetClock(10_100)
		n.Tick()
		pass(n)
		if got := moved(); got != want {
			t.Fatalf("after %d ticks of the pass, %d partitions' log starts moved, want %d (one a tick)", want, got, want)
		}
	}
	for _, tp := range n.Partitions() {
		if _, log, _ := n.Replica(tp); log.Segments() != 1 || log.SizeBytes() != 0 || log.LogEndOffset() != 1 {
			t.Errorf("%s after retention: %s, %d bytes", tp, log, log.SizeBytes())
		}
	}
}
