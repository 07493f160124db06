package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// compactedLeader is broker 1 leading a compacted orders-0 with small
// segments, holding ten records of one key (offsets 0..9, three to a
// segment), committed up to offset 5 by the follower's fetch.
func compactedLeader(t *testing.T, ruleSet rules.Rules) *Node {
	t.Helper()
	config := commitlog.DefaultCleanerConfig()
	n := New(Config{
		ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1024, MaxBatchBytes: 1024,
		ReplicaLagTicks: 1000, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
		CleanerConfigs: map[string]commitlog.CleanerConfig{"orders": config}, CleanerIntervalTicks: 5, Rules: ruleSet,
	}, 7)
	if err := n.ApplyMetadata(metadataFor(1)); err != nil {
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

// cleanOnce ticks the node until CleanLogs runs a pass, and returns the
// offsets of the records left in the log.
func cleanOnce(t *testing.T, n *Node) []record.Offset {
	t.Helper()
	cleaned := false
	for range 10 {
		n.Tick()
		pass(n)
		if _, _, ok := n.CleanLogs(1_000_000); ok {
			cleaned = true
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
	for range 20 {
		n.Tick()
		if _, _, ok := n.CleanLogs(1_000_000); ok {
			t.Fatal("a topic without compact was cleaned")
		}
	}
}

func fmtOffsets(offsets []record.Offset) string { return fmt.Sprint(offsets) }
