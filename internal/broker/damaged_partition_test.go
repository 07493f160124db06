package broker

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path"
	"testing"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// writeUnindexableSegment leaves in dir what the issue 11 crash left: a
// synced segment of CRC-valid batches whose offsets run past what one
// segment can index, below the checkpointed recovery point, so recovery must
// refuse it rather than cut it.
func writeUnindexableSegment(t *testing.T, fs disk.FS, dir string) {
	t.Helper()
	var batches []byte
	base := record.Offset(0)
	for range 3 {
		header := record.Header{
			BaseOffset: base, Attributes: int16(record.CompressionZstd), LastOffsetDelta: math.MaxInt32 - 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: math.MaxInt32,
		}
		batches = append(batches, record.EncodeBatch(header, bytes.Repeat([]byte{0xab}, 100))...)
		base += math.MaxInt32
	}
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	file, err := fs.Create(path.Join(dir, fmt.Sprintf("%020d.log", 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(batches); err != nil {
		t.Fatal(err)
	}
	file.Sync()
	file.Close()
	checkpoint := fmt.Appendf(nil, "0\nhigh-watermark %d\nrecovery-point %d\nlog-start-offset 0\n", base, base)
	if err := disk.WriteFileAtomically(fs, dir, "offsets-checkpoint", checkpoint); err != nil {
		t.Fatal(err)
	}
}

// A node whose data directory holds one partition it cannot open starts
// anyway: that partition goes offline (Failed) and is answered as a failed
// partition, and every other partition is served. Before issue 11 the open
// error stopped ApplyMetadata, and so the node, until the directory was
// deleted by hand.
func TestNodeStartsWithADamagedPartition(t *testing.T) {
	fs := disk.NewMem()
	damaged := metadata.TopicPartition{Topic: "orders", Partition: 1}
	writeUnindexableSegment(t, fs, path.Join("data", damaged.String()))
	node := New(Config{
		ID: 1, FS: fs, Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}, 7)
	records := []metadata.Record{
		metadata.RegisterBroker{ID: 1, Epoch: 7, Incarnation: "one"},
		metadata.UnfenceBroker{ID: 1, Epoch: 7},
		metadata.CreateTopic{Name: "orders", Config: metadata.TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
			Partitions: []metadata.PartitionState{
				{TopicPartition: orders, Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1},
				{TopicPartition: damaged, Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1},
			}},
	}
	entries := make([]metadata.Entry, len(records))
	for i, rec := range records {
		entries[i] = metadata.Entry{Offset: int64(i), Record: rec}
	}
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatalf("one damaged partition stopped the node: %v", err)
	}
	var corruption *commitlog.CorruptionError
	if err := node.Failed()[damaged]; !errors.As(err, &corruption) {
		t.Fatalf("failed partitions %v, want %s with a CorruptionError", node.Failed(), damaged)
	}
	if _, _, hosted := node.Replica(damaged); hosted {
		t.Fatalf("the damaged partition is served")
	}
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}}})
	node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: replica.AcksLeader, TimeoutTicks: 100}})
	outbox := pass(node)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce == nil || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("produce to the healthy partition: %+v", outbox.Clients)
	}
	batch = record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("b")}}})
	node.HandleClient(ClientRequest{Client: 9, Partition: damaged, Produce: &replica.ProduceRequest{ID: 2, Batches: batch, Acks: replica.AcksLeader, TimeoutTicks: 100}})
	outbox = node.TakeOutbox()
	if len(outbox.Clients) != 1 || outbox.Clients[0].ErrorCode == 0 {
		t.Fatalf("produce to the damaged partition: %+v, want an error", outbox.Clients)
	}
	// Metadata applied again (a restart, a later batch) leaves it offline
	// and does not retry the open.
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
}

// A truncation whose offset falls inside a batch (a diverging epoch from
// the leader of another incarnation of the topic, which shares no history
// with this follower) cannot be carried out: the log cuts between batches
// only. It takes that partition offline on this broker, as a damaged
// directory does, and the broker serves its other partitions; before, the
// broker's assertion that the log ends where the replica believes stopped
// the whole process.
func TestTruncationInsideABatchFailsThePartition(t *testing.T) {
	node := newTestNode(t, 2)
	entries := metadataFor(1)
	other := metadata.TopicPartition{Topic: "orders", Partition: 1}
	create := entries[len(entries)-1].Record.(metadata.CreateTopic)
	create.Partitions = append(create.Partitions, metadata.PartitionState{TopicPartition: other,
		Replicas: []metadata.BrokerID{2, 1}, ISR: []metadata.BrokerID{2, 1}, Leader: 2})
	entries[len(entries)-1].Record = create
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
	var fetch *replica.FetchRequest
	for _, out := range pass(node).Peers {
		if out.Message.Partition == orders {
			fetch = out.Message.Fetch
		}
	}
	records := record.AppendBatch(nil, record.BuildOptions{BaseOffset: 0, LeaderEpoch: 0,
		Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}, {Value: []byte("d")}}})
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: records}})
	outbox := pass(node)
	fetch = outbox.Peers[len(outbox.Peers)-1].Message.Fetch
	if fetch.FetchOffset != 4 {
		t.Fatalf("the follower fetches at %d, want 4", fetch.FetchOffset)
	}
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0,
		DivergingEpoch: &replica.EpochEndOffset{Epoch: 0, EndOffset: 2}}})
	if err := node.Failed()[orders]; !errors.Is(err, ErrTruncationInsideBatch) {
		t.Fatalf("failed partitions %v, want %s with ErrTruncationInsideBatch", node.Failed(), orders)
	}
	if _, _, hosted := node.Replica(orders); hosted {
		t.Fatal("the failed partition is served")
	}
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("x")}}})
	node.HandleClient(ClientRequest{Client: 9, Partition: other, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: replica.AcksLeader, TimeoutTicks: 100}})
	outbox = pass(node)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce == nil || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("produce to the partition this broker leads: %+v", outbox.Clients)
	}
}
