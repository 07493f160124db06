package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// With flush=never the high watermark does not wait for a sync, so a
// consumer may read committed records that no sync job has written yet:
// they are in the log's memory (commitlog.Chunk), and the answer copies
// them into Records instead of handing sendfile a chunk with no file.
// Once a job has written them, the same read goes out as file chunks.
func TestZeroCopyReadsCopyUnwrittenRecords(t *testing.T) {
	node := newZeroCopyNode(t, false)
	node.TakeOutbox()
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	stored := append([]byte(nil), batch...)
	node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: replica.AcksLeader}})
	// The follower fetches past the batch: the high watermark reaches 2,
	// and no pass has run the sync jobs.
	node.HandleClient(ClientRequest{Client: 2, Partition: orders, Fetch: &replica.FetchRequest{ID: 2, ReplicaID: 2, ReplicaEpoch: 7,
		FetchOffset: 2, LastFetchedEpoch: 0, MaxBytes: 1 << 16}})
	node.TakeOutbox()
	r, log, _ := node.Replica(orders)
	if r.HighWatermark() != 2 || log.PendingBytes() == 0 {
		t.Fatalf("high watermark %d with %d bytes unwritten, want 2 and some", r.HighWatermark(), log.PendingBytes())
	}
	fetch := func(client ClientID) ClientAnswer {
		t.Helper()
		node.HandleClient(ClientRequest{Client: client, Partition: orders, Fetch: &replica.FetchRequest{ID: 1, ReplicaID: replica.ConsumerReplicaID,
			FetchOffset: 0, LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 16}})
		answers := node.TakeOutbox().Clients
		if len(answers) != 1 || answers[0].Fetch == nil || answers[0].Fetch.ErrorCode != 0 {
			t.Fatalf("fetch answered %+v", answers)
		}
		return answers[0]
	}
	unwritten := fetch(3)
	if len(unwritten.FetchChunks) != 0 || !bytes.Equal(unwritten.Fetch.Records, stored) {
		t.Fatalf("unwritten committed records: %d chunks, %d bytes copied", len(unwritten.FetchChunks), len(unwritten.Fetch.Records))
	}
	pass(node)
	written := fetch(4)
	if len(written.Fetch.Records) != 0 || len(written.FetchChunks) != 1 || written.FetchChunks[0].File == nil {
		t.Fatalf("written records: %d chunks, %d bytes copied", len(written.FetchChunks), len(written.Fetch.Records))
	}
}

// A produce that the log's write backlog has no room for is answered
// REQUEST_TIMED_OUT, which producers retry, and appends nothing; once a
// sync job has written the backlog, the next produce goes in. The
// partition stays online.
func TestProduceWaitsForTheWriteBacklog(t *testing.T) {
	batch := func() []byte {
		return record.Build(record.BuildOptions{Records: []record.Record{{Value: bytes.Repeat([]byte("v"), 500)}}})
	}
	node := New(Config{
		ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16, PendingBytesMax: 1024,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}, 7)
	defer node.Close()
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	node.TakeOutbox()
	produce := func(id uint64) []ClientAnswer {
		node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: id, Batches: batch(), Acks: replica.AcksLeader}})
		return node.TakeOutbox().Clients
	}
	if answers := produce(1); len(answers) != 0 {
		t.Fatalf("the first produce was answered before its sync: %+v", answers)
	}
	refused := produce(2)
	if len(refused) != 1 || refused[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("a produce past the write backlog was answered %+v, want REQUEST_TIMED_OUT", refused)
	}
	_, log, _ := node.Replica(orders)
	if log.LogEndOffset() != 1 {
		t.Fatalf("the refused produce appended: log ends at %d", log.LogEndOffset())
	}
	pass(node)
	if answers := produce(3); len(answers) != 0 {
		t.Fatalf("a produce after the backlog was written was answered %+v", answers)
	}
	if log.LogEndOffset() != 2 {
		t.Fatalf("log ends at %d after the backlog was written, want 2", log.LogEndOffset())
	}
}

// A follower whose log's write backlog is full takes a fetch response as a
// retriable error: it appends nothing, stays online and fetches the same
// offset again after its retry backoff, when the backlog is written.
func TestFollowerRefetchesPastAFullWriteBacklog(t *testing.T) {
	node := New(Config{
		ID: 2, FS: disk.NewMem(), Dir: "data", FlushAlways: false, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16, PendingBytesMax: 1024,
		ReplicaLagTicks: 100, FetchRetryTicks: 3, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}, 7)
	defer node.Close()
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	batchAt := func(offset record.Offset) []byte {
		return record.Build(record.BuildOptions{BaseOffset: offset, LeaderEpoch: 0, Records: []record.Record{{Value: bytes.Repeat([]byte("v"), 700)}}})
	}
	nextFetch := func(outbox Outbox) *replica.FetchRequest {
		t.Helper()
		for _, peer := range outbox.Peers {
			if peer.Message.Fetch != nil {
				return peer.Message.Fetch
			}
		}
		t.Fatalf("no fetch in %+v", outbox.Peers)
		return nil
	}
	fetch := nextFetch(node.TakeOutbox())
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: batchAt(0)}})
	fetch = nextFetch(node.TakeOutbox())
	if fetch.FetchOffset != 1 {
		t.Fatalf("fetching at %d after the first batch, want 1", fetch.FetchOffset)
	}
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: batchAt(1)}})
	_, log, _ := node.Replica(orders)
	if log.LogEndOffset() != 1 {
		t.Fatalf("the follower appended past its write backlog: log ends at %d", log.LogEndOffset())
	}
	pass(node) // the sync job writes the backlog
	for range 5 {
		node.Tick()
	}
	fetch = nextFetch(pass(node))
	if fetch.FetchOffset != 1 {
		t.Fatalf("refetching at %d, want 1", fetch.FetchOffset)
	}
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: batchAt(1)}})
	if log.LogEndOffset() != 2 {
		t.Fatalf("log ends at %d after the refetch, want 2", log.LogEndOffset())
	}
}
