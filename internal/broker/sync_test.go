package broker

import (
	"errors"
	"syscall"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

func produceAcksAll(n *Node, client ClientID, id uint64) {
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	n.HandleClient(ClientRequest{Client: client, Partition: orders, Produce: &replica.ProduceRequest{ID: id, Batches: batch, Acks: replica.AcksAll, TimeoutTicks: 100}})
}

// followerFetch is broker 2's fetch at offset, in epoch 0.
func followerFetch(n *Node, id uint64, offset record.Offset) {
	epoch := record.LeaderEpoch(0)
	if offset == 0 {
		epoch = record.NoLeaderEpoch
	}
	n.HandlePeer(2, PeerMessage{Partition: orders, Fetch: &replica.FetchRequest{ID: id, ReplicaID: 2, ReplicaEpoch: 7, CurrentLeaderEpoch: 0,
		FetchOffset: offset, LastFetchedEpoch: epoch, MaxBytes: 1 << 16}})
}

// The sync runs between TakeSyncs and Synced, off the loop: meanwhile the
// leader serves its unsynced tail to the follower, and only the job's
// completion lets the acks=all answer out, with the follower's fetch
// offset already past the records. A produce while the job is out gets no
// second job until the first completes, and then one for both.
func TestSyncJobsLetOutAcksOnlyAtCompletion(t *testing.T) {
	leader := newTestNode(t, 1)
	if err := leader.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	pass(leader)
	produceAcksAll(leader, 9, 42)
	jobs := leader.TakeSyncs(10)
	if len(jobs) != 1 || jobs[0].Partition != orders || leader.SyncsInFlight() != 1 {
		t.Fatalf("jobs %+v, %d in flight; want one for orders-0", jobs, leader.SyncsInFlight())
	}
	followerFetch(leader, 1, 0)
	outbox := leader.TakeOutbox()
	if len(outbox.Peers) != 1 || len(outbox.Peers[0].Message.FetchResponse.Records) == 0 {
		t.Fatalf("the follower's fetch before the leader's sync got %+v, want the unsynced tail", outbox.Peers)
	}
	followerFetch(leader, 2, 2) // the follower synced its copy
	if outbox := leader.TakeOutbox(); len(outbox.Clients) != 0 {
		t.Fatalf("answered before the leader's sync completed: %+v", outbox.Clients)
	}
	produceAcksAll(leader, 9, 43)
	if more := leader.TakeSyncs(10); len(more) != 0 || leader.Dirty() {
		t.Fatalf("a second job %+v while one is out (dirty %t)", more, leader.Dirty())
	}
	leader.Synced(jobs[0], jobs[0].Run())
	outbox = leader.TakeOutbox()
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ID != 42 || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("answers after the sync completed: %+v, want produce 42", outbox.Clients)
	}
	jobs = leader.TakeSyncs(10)
	if len(jobs) != 1 || leader.Dirty() {
		t.Fatalf("after completion: jobs %+v (dirty %t), want one covering produce 43", jobs, leader.Dirty())
	}
	followerFetch(leader, 3, 4)
	leader.Synced(jobs[0], jobs[0].Run())
	if outbox := leader.TakeOutbox(); len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ID != 43 {
		t.Fatalf("answers after the second sync: %+v, want produce 43", outbox.Clients)
	}
}

// A sync job that fails (EIO) takes its partition offline, as an inline
// sync did; the acks it held back are never let out.
func TestFailedSyncJobFailsThePartition(t *testing.T) {
	faulty := disk.NewFaulty(disk.NewMem(), disk.FaultConfig{Seed: 1})
	leader := New(Config{
		ID: 1, FS: faulty, Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
	}, 7)
	if err := leader.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	pass(leader)
	produceAcksAll(leader, 9, 42)
	jobs := leader.TakeSyncs(10)
	faulty.FailSyncAfter(0)
	runErr := jobs[0].Run()
	leader.Synced(jobs[0], runErr)
	if err := leader.Failed()[orders]; !errors.Is(err, syscall.EIO) {
		t.Fatalf("partition failure %v after a failed sync job, want EIO", err)
	}
	if _, _, ok := leader.Replica(orders); ok {
		t.Fatal("the partition is still hosted after its sync failed")
	}
	if outbox := leader.TakeOutbox(); len(outbox.Clients) != 0 {
		t.Fatalf("answers after a failed sync: %+v", outbox.Clients)
	}
}

// A node closed with a job out (shutdown): the job syncs nothing and its
// completion changes nothing.
func TestSyncJobAfterNodeClose(t *testing.T) {
	leader := newTestNode(t, 1)
	if err := leader.ApplyMetadata(metadataFor(1)); err != nil {
		t.Fatal(err)
	}
	pass(leader)
	produceAcksAll(leader, 9, 42)
	jobs := leader.TakeSyncs(10)
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	if err := jobs[0].Run(); err == nil {
		t.Fatal("a job of a closed log synced")
	}
	leader.Synced(jobs[0], nil) // no panic, no failure
	if len(leader.Failed()) != 0 {
		t.Fatalf("failed partitions after a completion on a closed log: %v", leader.Failed())
	}
}

// A topic deleted with a sync job out: the job syncs nothing (the log was
// closed, its directory set aside), its completion is dropped, and a
// topic of the same name created meanwhile gets jobs of its own.
func TestSyncJobOfADeletedTopic(t *testing.T) {
	leader := newTestNode(t, 1)
	entries := metadataFor(1)
	if err := leader.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
	pass(leader)
	produceAcksAll(leader, 9, 42)
	jobs := leader.TakeSyncs(10)
	next := int64(len(entries))
	deletion := metadata.Entry{Offset: next, Record: metadata.DeleteTopic{Name: "orders"}}
	again := metadataFor(1)[4]
	again.Offset = next + 1
	if err := leader.ApplyMetadata([]metadata.Entry{deletion, again}); err != nil {
		t.Fatal(err)
	}
	if err := jobs[0].Run(); err == nil {
		t.Fatal("a job of a deleted topic's log synced")
	}
	leader.Synced(jobs[0], nil)
	if len(leader.Failed()) != 0 {
		t.Fatalf("failed partitions after the job of a deleted log completed: %v", leader.Failed())
	}
	produceAcksAll(leader, 9, 43)
	fresh := leader.TakeSyncs(10)
	if len(fresh) != 1 {
		t.Fatalf("the re-created topic's log got %d jobs, want 1", len(fresh))
	}
	leader.Synced(fresh[0], fresh[0].Run())
	if _, log, _ := leader.Replica(orders); log.DurableEndOffset() != 2 {
		t.Fatalf("the re-created log is durable to %d, want 2", log.DurableEndOffset())
	}
}
