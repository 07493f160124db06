package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// compactedLeader is broker 1 leading a compacted orders-0 with small
// segments, holding ten records of one key (offsets 0..9, three to a
// segment), committed up to offset 5 by the follower's fetch. The node's
// cleaner configs compact orders.
func compactedLeader(t *testing.T, ruleSet rules.Rules) *Node {
	t.Helper()
	return compactedLeaderOf(t, ruleSet, map[string]commitlog.CleanerConfig{"orders": commitlog.DefaultCleanerConfig()}, metadataFor(1))
}

// compactedLeaderOf is compactedLeader with the node's cleaner configs and
// metadata log given.
func compactedLeaderOf(t *testing.T, ruleSet rules.Rules, configs map[string]commitlog.CleanerConfig, entries []metadata.Entry) *Node {
	t.Helper()
	n := New(Config{
		ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1024, MaxBatchBytes: 1024,
		ReplicaLagTicks: 1000, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
		CleanerConfigs: configs, CleanerIntervalTicks: 5, Rules: ruleSet,
	}, 7)
	if err := n.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		batch := record.Build(record.BuildOptions{Records: []record.Record{{Key: []byte("k"), Value: []byte(strings.Repeat(string(rune('a'+i)), 200))}}})
		n.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: uint64(i), Batches: batch, Acks: replica.AcksLeader, TimeoutTicks: 100}})
		pass(n)
	}
	n.HandlePeer(2, PeerMessage{Partition: orders, Fetch: &replica.FetchRequest{ID: 1, ReplicaID: 2, ReplicaEpoch: 7, CurrentLeaderEpoch: 0, FetchOffset: 5, LastFetchedEpoch: 0, MaxBytes: 1 << 16}})
	pass(n)
	if r, _, _ := n.Replica(orders); r.HighWatermark() != 5 {
		t.Fatalf("high watermark %d, want 5", r.HighWatermark())
	}
	return n
}

// cleanOnce ticks the node until its Tick runs a cleaning pass that
// cleans, and returns the offsets of the records left in the log.
func cleanOnce(t *testing.T, n *Node) []record.Offset {
	t.Helper()
	cleaned := false
	n.ObserveCleaner(func(report CleanReport) { cleaned = cleaned || report.Partition == orders })
	n.SetClock(1_000_000)
	for range 10 {
		n.Tick()
		pass(n)
		if cleaned {
			break
		}
	}
	if !cleaned {
		t.Fatal("no cleaning pass ran")
	}
	_, log, _ := n.Replica(orders)
	result, err := log.Read(log.LogStartOffset(), 1<<20, log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []record.Offset
	it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 20})
	for it.Next() {
		header, records, err := record.DecodeRecords(it.Batch(), 1<<20, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range records {
			offsets = append(offsets, header.BaseOffset+record.Offset(r.OffsetDelta))
		}
	}
	return offsets
}

// TestNodeCleansCompactedPartitionsBelowTheHighWatermark: the pass cleans
// only segments wholly below the high watermark (5), so the key's latest
// committed record, offset 4, stays; records above it are untouched.
func TestNodeCleansCompactedPartitionsBelowTheHighWatermark(t *testing.T) {
	offsets := cleanOnce(t, compactedLeader(t, rules.Rules{}))
	want := "[2 3 4 5 6 7 8 9]"
	if got := fmtOffsets(offsets); got != want {
		t.Fatalf("records left at %s, want %s", got, want)
	}
}

// TestLegacyCleanerRemovesTheLatestCommittedValue is the failure
// CleanBelowHighWatermark prevents: cleaning up to the active segment lets
// the uncommitted record at 8 supersede the committed one at 4, which is
// gone, though it is the key's latest committed value.
func TestLegacyCleanerRemovesTheLatestCommittedValue(t *testing.T) {
	offsets := cleanOnce(t, compactedLeader(t, rules.Rules{}.Without(rules.CleanBelowHighWatermark)))
	if got, want := fmtOffsets(offsets), "[8 9]"; got != want {
		t.Fatalf("records left at %s, want %s", got, want)
	}
}

// TestNodeDoesNotCleanTopicsWithoutCompact: a topic absent from the
// cleaner configs keeps every record.
func TestNodeDoesNotCleanTopicsWithoutCompact(t *testing.T) {
	n := compactedLeader(t, rules.Rules{})
	n.config.CleanerConfigs = nil
	n.ObserveCleaner(func(report CleanReport) { t.Fatalf("a topic without compact was cleaned: %+v", report) })
	n.SetClock(1_000_000)
	for range 20 {
		n.Tick()
	}
}

// A topic compacted through its cleanup.policy in the metadata log, with
// no cleaner config of the node's, is cleaned by the node's Tick, as the
// simulator and tide serve run it. Before, the runtimes called the
// cleaner themselves, and the simulator only for the seeds whose workload
// topic it compacted through the node's configs.
func TestTickCleansATopicCompactedByItsConfig(t *testing.T) {
	n := compactedLeaderOf(t, rules.Rules{}, nil, withConfigs(ordersConfig("cleanup.policy", "compact")))
	if got, want := fmtOffsets(cleanOnce(t, n)), "[2 3 4 5 6 7 8 9]"; got != want {
		t.Fatalf("records left at %s, want %s", got, want)
	}
}

// The cleaner's work per tick is bounded: each pass cleans at most
// cleanerLogsPerPass partitions, the compacted ones taken in turn.
func TestCleanerCleansOneLogPerPass(t *testing.T) {
	other := metadata.TopicPartition{Topic: "orders", Partition: 1}
	entries := metadataFor(1)
	create := entries[len(entries)-1].Record.(metadata.CreateTopic)
	create.Partitions = append(create.Partitions, metadata.PartitionState{TopicPartition: other,
		Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1}, Leader: 1})
	entries[len(entries)-1].Record = create
	n := compactedLeaderOf(t, rules.Rules{}, map[string]commitlog.CleanerConfig{"orders": commitlog.DefaultCleanerConfig()}, entries)
	for i := range 10 {
		batch := record.Build(record.BuildOptions{Records: []record.Record{{Key: []byte("k"), Value: []byte(strings.Repeat(string(rune('a'+i)), 200))}}})
		n.HandleClient(ClientRequest{Client: 9, Partition: other, Produce: &replica.ProduceRequest{ID: uint64(100 + i), Batches: batch, Acks: replica.AcksLeader, TimeoutTicks: 100}})
		pass(n)
	}
	var cleaned []metadata.TopicPartition
	n.ObserveCleaner(func(report CleanReport) { cleaned = append(cleaned, report.Partition) })
	n.SetClock(1_000_000)
	for range 5 {
		n.Tick()
		pass(n)
	}
	if len(cleaned) != cleanerLogsPerPass {
		t.Fatalf("one pass cleaned %v, want %d partition", cleaned, cleanerLogsPerPass)
	}
	for range 5 {
		n.Tick()
		pass(n)
	}
	if len(cleaned) != 2 || cleaned[0] == cleaned[1] {
		t.Fatalf("two passes cleaned %v, want both partitions in turn", cleaned)
	}
}

func fmtOffsets(offsets []record.Offset) string { return fmt.Sprint(offsets) }
