package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

var orders = metadata.TopicPartition{Topic: "orders", Partition: 0}

func newTestNode(t *testing.T, id metadata.BrokerID) *Node {
	t.Helper()
	return New(Config{
		ID: id, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}, 7)
}

// pass ends a pass of the node loop as a runtime does: the logs synced
// (group commit), then what the node has for others taken.
func pass(n *Node) Outbox {
	n.SyncDirty()
	return n.TakeOutbox()
}

// metadataFor is a metadata log creating brokers 1 and 2 and the topic
// orders with one partition on both, led by leader in epoch 0.
func metadataFor(leader metadata.BrokerID) []metadata.Entry {
	records := []metadata.Record{
		metadata.RegisterBroker{ID: 1, Epoch: 7, Incarnation: "one"},
		metadata.RegisterBroker{ID: 2, Epoch: 7, Incarnation: "two"},
		metadata.UnfenceBroker{ID: 1, Epoch: 7},
		metadata.UnfenceBroker{ID: 2, Epoch: 7},
		metadata.CreateTopic{Name: "orders", Config: metadata.TopicConfig{ReplicationFactor: 2, MinInsyncReplicas: 1},
			Partitions: []metadata.PartitionState{{TopicPartition: orders, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2},
				Leader: leader, LeaderEpoch: 0, PartitionEpoch: 0}}},
	}
	entries := make([]metadata.Entry, len(records))
	for i, rec := range records {
		entries[i] = metadata.Entry{Offset: int64(i), Record: rec}
	}
	return entries
}

func TestNodeServesProduceAndFollowerFetch(t *testing.T) {
	leader := newTestNode(t, 1)
	if err := leader.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	r, log, ok := leader.Replica(orders)
	if !ok || r.Role() != replica.Leader {
		t.Fatalf("broker 1 should lead orders-0")
	}
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	leader.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 42, Batches: batch, Acks: replica.AcksAll, TimeoutTicks: 100}})
	if got := log.LogEndOffset(); got != 2 {
		t.Fatalf("log end %d after producing two records", got)
	}
	pass(leader)

	// The follower fetches at 0: it gets the batch, read from the log.
	leader.HandlePeer(2, PeerMessage{Partition: orders, Fetch: &replica.FetchRequest{ID: 1, ReplicaID: 2, ReplicaEpoch: 7, CurrentLeaderEpoch: 0, FetchOffset: 0, LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 16}})
	outbox := pass(leader)
	if len(outbox.Peers) != 1 || outbox.Peers[0].To != 2 || len(outbox.Peers[0].Message.FetchResponse.Records) == 0 {
		t.Fatalf("fetch answer: %+v", outbox.Peers)
	}
	// Its next fetch at 2 commits the batch and answers the producer, under
	// the producer's own request id.
	leader.HandlePeer(2, PeerMessage{Partition: orders, Fetch: &replica.FetchRequest{ID: 2, ReplicaID: 2, ReplicaEpoch: 7, CurrentLeaderEpoch: 0, FetchOffset: 2, LastFetchedEpoch: 0, MaxBytes: 1 << 16}})
	outbox = pass(leader)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Client != 9 || outbox.Clients[0].Produce.ID != 42 || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("produce answer: %+v", outbox.Clients)
	}
}

func TestNodeAnswersUnknownPartition(t *testing.T) {
	node := newTestNode(t, 1)
	node.HandleClient(ClientRequest{Client: 3, Partition: orders, ListOffsets: &replica.ListOffsetsRequest{Timestamp: replica.LatestTimestamp}})
	outbox := pass(node)
	if len(outbox.Clients) != 1 || outbox.Clients[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("answer for an unknown partition: %+v", outbox.Clients)
	}
}

// A broker catching up on the metadata log hands its replicas only the
// state the batch leaves: it must not re-live a leadership of its past.
func TestNodePublishesOnlyTheFinalState(t *testing.T) {
	node := newTestNode(t, 1)
	entries := metadataFor(1)
	entries = append(entries, metadata.Entry{Offset: int64(len(entries)), Record: metadata.PartitionChange{
		TopicPartition: orders, Leader: 2, ISR: []metadata.BrokerID{2, 1}, LeaderEpoch: 1, PartitionEpoch: 1,
	}})
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
	r, log, _ := node.Replica(orders)
	if r.Role() != replica.Follower || r.State().LeaderEpoch != 1 {
		t.Fatalf("role %s in epoch %d, want a follower in epoch 1", r.Role(), r.State().LeaderEpoch)
	}
	if epochs := log.Epochs(); len(epochs) != 0 {
		t.Fatalf("the broker led epoch 0 on its way to epoch 1: epochs %v", epochs)
	}
	if node.MetadataOffset() != int64(len(entries)-1) {
		t.Fatalf("metadata offset %d", node.MetadataOffset())
	}
	// Entries already applied are skipped when sent again.
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
}

func TestNodeRefusesOutOfOrderMetadata(t *testing.T) {
	node := newTestNode(t, 1)
	entries := metadataFor(1)
	if err := node.ApplyMetadata(entries[2:]); err == nil {
		t.Fatal("metadata with a gap was applied")
	}
}

// A broker restarted on its log rebuilds the producer state from it: a
// producer retrying a batch whose answer the crash lost gets the original
// offset back, and the records are not written twice.
func TestRestartedNodeRecognisesARetry(t *testing.T) {
	fs := disk.NewMem()
	config := Config{
		ID: 1, FS: fs, Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}
	batch := func() []byte {
		return record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}},
			Producer: &record.ProducerState{ProducerID: 3000, ProducerEpoch: 0, BaseSequence: 0}})
	}
	node := New(config, 7)
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch(), Acks: replica.AcksLeader, TimeoutTicks: 100}})
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := New(config, 8)
	if err := restarted.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	restarted.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 2, Batches: batch(), Acks: replica.AcksLeader, TimeoutTicks: 100}})
	outbox := pass(restarted)
	_, log, _ := restarted.Replica(orders)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ErrorCode != 0 || outbox.Clients[0].Produce.BaseOffset != 0 || log.LogEndOffset() != 2 {
		t.Fatalf("retry after a restart: %+v, log end offset %d; want offset 0 and nothing appended", outbox.Clients, log.LogEndOffset())
	}
}

// A follower that truncates a producer's batches rebuilds the producer
// state from its log before anything else reaches the replica.
func TestFollowerRebuildsProducerStateAfterTruncation(t *testing.T) {
	node := newTestNode(t, 2)
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	fetch := pass(node).Peers[0].Message.Fetch
	var records []byte
	for i := 0; i < 4; i++ {
		records = record.AppendBatch(records, record.BuildOptions{BaseOffset: record.Offset(2 * i), LeaderEpoch: 0,
			Records:  []record.Record{{Value: []byte("a")}, {Value: []byte("b")}},
			Producer: &record.ProducerState{ProducerID: 3000, BaseSequence: int32(2 * i)}})
	}
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: records}})
	pass(node)
	entries := metadataFor(1)
	entries = append(entries, metadata.Entry{Offset: int64(len(entries)), Record: metadata.PartitionChange{
		TopicPartition: orders, Leader: 1, ISR: []metadata.BrokerID{1, 2}, LeaderEpoch: 1, PartitionEpoch: 1,
	}})
	if err := node.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
	outbox := pass(node)
	fetch = outbox.Peers[len(outbox.Peers)-1].Message.Fetch
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 0,
		DivergingEpoch: &replica.EpochEndOffset{Epoch: 0, EndOffset: 4}}})
	r, log, _ := node.Replica(orders)
	state, ok := r.ProducerState()
	if log.LogEndOffset() != 4 || !ok || len(state) != 1 || state[0].LastSequence() != 3 {
		t.Fatalf("after truncating to %d: producer state %v (usable %t), want producer 3000 ending at sequence 3", log.LogEndOffset(), state, ok)
	}
}

// A consumer validating its position after a leader change (KIP-320) asks
// the leader where an epoch ended, as a follower does; the answer goes back
// to the client, not to a broker.
func TestNodeAnswersClientOffsetsForLeaderEpoch(t *testing.T) {
	node := newTestNode(t, 1)
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	pass(node)
	node.HandleClient(ClientRequest{Client: 4, Partition: orders, OffsetsForLeaderEpoch: &replica.OffsetsForLeaderEpochRequest{
		ID: 8, ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: 0, LeaderEpoch: 0}})
	outbox := pass(node)
	if len(outbox.Clients) != 1 || len(outbox.Peers) != 0 {
		t.Fatalf("outbox: %+v", outbox)
	}
	answer := outbox.Clients[0]
	if answer.Client != 4 || answer.OffsetsForLeaderEpoch == nil || answer.OffsetsForLeaderEpoch.ID != 8 ||
		answer.OffsetsForLeaderEpoch.ErrorCode != 0 || answer.OffsetsForLeaderEpoch.LeaderEpoch != 0 || answer.OffsetsForLeaderEpoch.EndOffset != 0 {
		t.Fatalf("answer: %+v %+v", answer, answer.OffsetsForLeaderEpoch)
	}
}

// An acks=0 produce gets no answer when it succeeds, so the node must not
// keep remembering who sent it: a producer at acks=0 would grow the node
// without bound.
func TestNodeForgetsAcksNoneProducers(t *testing.T) {
	node := newTestNode(t, 1)
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}}})
		node.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: uint64(i), Batches: batch, Acks: replica.AcksNone, TimeoutTicks: 100}})
	}
	if _, log, _ := node.Replica(orders); log.LogEndOffset() != 3 {
		t.Fatalf("log end %d after three acks=0 produces", log.LogEndOffset())
	}
	if len(node.producers) != 0 {
		t.Fatalf("the node still remembers %d acks=0 producers", len(node.producers))
	}
	// One refused (no such partition here) is answered at once.
	node.HandleClient(ClientRequest{Client: 9, Partition: metadata.TopicPartition{Topic: "orders", Partition: 5},
		Produce: &replica.ProduceRequest{ID: 7, Acks: replica.AcksNone}})
	if outbox := pass(node); len(outbox.Clients) != 1 || outbox.Clients[0].ErrorCode == 0 {
		t.Fatalf("a refused acks=0 produce: %+v", outbox.Clients)
	}
}

// A follower answers a debugging tool (replica id -2) itself: a fetch gets
// its own high watermark and the records below it, read from its log, and
// not the tail above it, which is not known to be committed; ListOffsets
// gets its log end offset. A consumer is still sent to the leader.
func TestFollowerAnswersDebugRequests(t *testing.T) {
	node := newTestNode(t, 2)
	if err := node.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	fetch := pass(node).Peers[0].Message.Fetch
	var records []byte
	for i := range 4 {
		records = record.AppendBatch(records, record.BuildOptions{BaseOffset: record.Offset(2 * i), LeaderEpoch: 0,
			Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	}
	node.HandlePeer(1, PeerMessage{Partition: orders, FetchResponse: &replica.FetchResponse{ID: fetch.ID, HighWatermark: 4, Records: records}})
	pass(node)
	node.HandleClient(ClientRequest{Client: 5, Partition: orders, Fetch: &replica.FetchRequest{ID: 1, ReplicaID: replica.DebugReplicaID,
		CurrentLeaderEpoch: 0, FetchOffset: 0, MaxBytes: 1 << 16}})
	node.HandleClient(ClientRequest{Client: 6, Partition: orders, ListOffsets: &replica.ListOffsetsRequest{ID: 2, ReplicaID: replica.DebugReplicaID,
		CurrentLeaderEpoch: 0, Timestamp: replica.LatestTimestamp}})
	node.HandleClient(ClientRequest{Client: 7, Partition: orders, Fetch: &replica.FetchRequest{ID: 3, ReplicaID: replica.ConsumerReplicaID,
		CurrentLeaderEpoch: 0, FetchOffset: 0, MaxBytes: 1 << 16}})
	outbox := pass(node)
	if len(outbox.Clients) != 3 || len(outbox.Peers) != 0 {
		t.Fatalf("outbox: %+v", outbox)
	}
	debug := outbox.Clients[0].Fetch
	headers, err := record.ValidateAll(debug.Records, record.Limits{MaxBatchBytes: 1 << 16})
	if err != nil || debug.ErrorCode != 0 || debug.HighWatermark != 4 || debug.LogEndOffset != 8 || len(headers) != 2 || headers[1].NextOffset() != 4 {
		t.Fatalf("debug fetch from a follower: %+v (%d batches, %v), want its high watermark 4 and the batches below it", debug, len(headers), err)
	}
	if latest := outbox.Clients[1].ListOffsets; latest.ErrorCode != 0 || latest.Offset != 8 {
		t.Fatalf("debug latest offset from a follower: %+v, want its log end offset 8", latest)
	}
	if code := outbox.Clients[2].Fetch.ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a consumer's fetch from a follower answered %d", code)
	}
}
