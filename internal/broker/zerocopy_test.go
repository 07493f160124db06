package broker

import (
	"bytes"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// With ZeroCopyReads on real files, a fetch whose records all lie below the
// high watermark is answered with the log's chunks, not bytes; records
// above it (a follower's fetch of the tail, which a truncation may still
// change) are read into the answer.
func TestZeroCopyReadsOnlyBelowTheHighWatermark(t *testing.T) {
	node := newZeroCopyNode(t, true)
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	stored := append([]byte(nil), batch...)
	node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: replica.AcksLeader}})
	pass(node)

	fetch := func(client ClientID, replicaID int) ClientAnswer {
		t.Helper()
		request := &replica.FetchRequest{ID: 1, ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: 0, FetchOffset: 0,
			LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 16}
		if replicaID > 0 {
			request.ReplicaID, request.ReplicaEpoch = 2, 7
		}
		node.HandleClient(ClientRequest{Client: client, Partition: orders, Fetch: request})
		answers := pass(node).Clients
		if len(answers) != 1 || answers[0].Fetch == nil || answers[0].Fetch.ErrorCode != 0 {
			t.Fatalf("fetch answered %+v", answers)
		}
		return answers[0]
	}
	// The follower's fetch at 0 reads the tail, above the high watermark
	// (0), into memory; its next fetch, at 2, commits the batch.
	tail := fetch(1, 2)
	if len(tail.FetchChunks) != 0 || !bytes.Equal(tail.Fetch.Records, stored) {
		t.Fatalf("records above the high watermark: %d chunks, %d bytes in memory", len(tail.FetchChunks), len(tail.Fetch.Records))
	}
	node.HandleClient(ClientRequest{Client: 2, Partition: orders, Fetch: &replica.FetchRequest{ID: 2, ReplicaID: 2, ReplicaEpoch: 7,
		FetchOffset: 2, LastFetchedEpoch: 0, MaxBytes: 1 << 16}})
	pass(node)
	if r, _, _ := node.Replica(orders); r.HighWatermark() != 2 {
		t.Fatalf("high watermark %d, want 2", r.HighWatermark())
	}
	committed := fetch(3, 0)
	if len(committed.Fetch.Records) != 0 || len(committed.FetchChunks) != 1 {
		t.Fatalf("committed records: %d chunks, %d bytes in memory", len(committed.FetchChunks), len(committed.Fetch.Records))
	}
	result := make([]byte, committed.FetchChunks[0].Size)
	if _, err := committed.FetchChunks[0].File.ReadAt(result, committed.FetchChunks[0].Position); err != nil || !bytes.Equal(result, stored) {
		t.Fatalf("the chunk holds %x (%v), want the stored batch", result, err)
	}
}

// newZeroCopyNode is a one-broker node on real files with ZeroCopyReads
// on, leading partition orders (metadataFor), closed when the test ends.
func newZeroCopyNode(t *testing.T, flushAlways bool) *Node {
	t.Helper()
	node := New(Config{
		ID: 1, FS: disk.OS(), Dir: t.TempDir(), FlushAlways: flushAlways, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100, ZeroCopyReads: true,
	}, 7)
	t.Cleanup(func() { node.Close() })
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	return node
}
