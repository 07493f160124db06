package frontend

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// groupHostWorld is one broker's front end beside its own one-voter
// metadata quorum, driven as a runtime drives them; sync says whether a
// pass syncs the node's logs (with flush=always, an unsynced record stays
// above the high watermark).
type groupHostWorld struct {
	t       *testing.T
	quorum  *quorum.Quorum
	storage *raft.MemoryStorage
	fe      *FrontEnd
	now     int64
	sync    bool
	// cutOff drops the broker's requests to the controller, as a network
	// partition between them would.
	cutOff bool
}

// groupHostSessionTicks is the world's broker session; a step is 10 ms on
// the front end's monotonic clock.
const groupHostSessionTicks = 50

func newGroupHostWorld(t *testing.T, groupRules rules.Rules) *groupHostWorld {
	t.Helper()
	return newGroupHostWorldWithBacklog(t, groupRules, 0)
}

// newGroupHostWorldWithBacklog is a groupHostWorld whose logs take at most
// pendingBytesMax bytes not yet written (broker.Config.PendingBytesMax;
// zero leaves it unbounded).
func newGroupHostWorldWithBacklog(t *testing.T, groupRules rules.Rules, pendingBytesMax int64) *groupHostWorld {
	t.Helper()
	storage := raft.NewMemoryStorage()
	q, err := quorum.New(quorum.Config{ID: 1, Voters: []metadata.BrokerID{1}, Storage: storage, ElectionTicks: 10, HeartbeatTicks: 1,
		Random: rand.NewChaCha8([32]byte{'g'}), SessionTimeoutTicks: groupHostSessionTicks, SnapshotEntries: 1000, MaxHistoryEntries: 1000,
		MaxWaitingAnswers: 100, MaxEntryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	lifecycle, err := broker.NewLifecycle(broker.LifecycleConfig{ID: 1, Incarnation: "b1-1",
		SessionLeaseMs: broker.SessionLease(groupHostSessionTicks*10, 10), PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 2, RequestTimeoutTicks: 20, MaxEntries: 100,
		NewNode: func(epoch metadata.BrokerEpoch) *broker.Node {
			return broker.New(broker.Config{ID: 1, FS: disk.NewMem(), Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20,
				MaxBatchBytes: 1 << 16, ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100,
				PendingBytesMax: pendingBytesMax}, epoch)
		}})
	if err != nil {
		t.Fatal(err)
	}
	wireConfig := wire.DefaultConfig()
	wireConfig.Random = rand.NewChaCha8([32]byte{'f'})
	groups := group.DefaultConfig()
	groups.InitialRebalanceDelayMs, groups.Rules = 0, groupRules
	fe, err := New(Config{ID: 1, ClusterID: "c", Advertised: "127.0.0.1:9092", DefaultPartitions: 1, DefaultReplicationFactor: 1,
		MaxWaitingFetches: 10, Wire: wireConfig, Groups: &groups, OffsetsTopicPartitions: 3,
		Fetcher: fetcher.Config{Broker: 1, MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 1 << 20, FetchTimeoutTicks: 100,
			RequestTimeoutTicks: 50, MaxResponseBytes: 2 << 20}}, lifecycle)
	if err != nil {
		t.Fatal(err)
	}
	fe.SetControllerHint(1)
	return &groupHostWorld{t: t, quorum: q, storage: storage, fe: fe, sync: true}
}

// step is one pass of a runtime's loop.
func (w *groupHostWorld) step() {
	w.now++
	w.quorum.Tick()
	w.fe.SetClock(1_000_000 + w.now*10)
	w.fe.SetMonotonicClock(w.now * 10)
	w.fe.Tick()
	if node := w.fe.Node(); node != nil && w.sync {
		node.SyncDirty()
	}
	for _, out := range w.fe.Flush().Controller {
		if w.cutOff {
			continue
		}
		if err := w.quorum.HandleRequest(out.Request); err != nil {
			w.t.Fatal(err)
		}
	}
	for w.quorum.HasReady() {
		ready := w.quorum.Ready()
		if err := ready.Persist(w.storage); err != nil {
			w.t.Fatal(err)
		}
		for _, answer := range ready.Answers {
			if err := w.fe.HandleControllerAnswer(answer); err != nil {
				w.t.Fatal(err)
			}
		}
		if err := w.quorum.Advance(); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *groupHostWorld) stepUntil(what string, condition func() bool) {
	w.t.Helper()
	for range 1000 {
		if condition() {
			return
		}
		w.step()
	}
	w.t.Fatalf("never: %s", what)
}

// serving waits until this broker coordinates groupID with a loaded
// coordinator, and returns its partition.
func (w *groupHostWorld) serving(groupID string) int32 {
	w.t.Helper()
	b := (*backend)(w.fe)
	w.stepUntil("the broker coordinates "+groupID, func() bool {
		id, code := b.GroupCoordinator(groupID)
		return code == 0 && id == 1
	})
	partition := b.GroupPartition(groupID)
	w.stepUntil("the coordinator loaded", func() bool {
		hosted, ok := w.fe.groups.coordinators[partition]
		return ok && !hosted.loading
	})
	return partition
}

// call hands one group request to the backend and steps until answered.
func (w *groupHostWorld) call(groupID string, request kmsg.Request) (kmsg.Response, int16) {
	w.t.Helper()
	var response kmsg.Response
	code, answered := int16(0), false
	(*backend)(w.fe).Group(groupID, wire.GroupClient{ID: "test"}, request, func(r kmsg.Response, c int16) { response, code, answered = r, c, true })
	w.stepUntil("an answer", func() bool { return answered })
	return response, code
}

// forget drops the coordinator of partition, as when the broker lost the
// leadership, and makes the next tick match coordinators to leaderships.
func (w *groupHostWorld) forget(partition int32) {
	delete(w.fe.groups.coordinators, partition)
	w.fe.groups.followedNode = nil
}

func simpleCommit(groupID string, offset int64) *kmsg.OffsetCommitRequest {
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation = 8, groupID, -1
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic = "orders"
	partition := kmsg.NewOffsetCommitRequestTopicPartition()
	partition.Partition, partition.Offset = 0, offset
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	return request
}

// fetchOffset is the group's committed offset of orders-0, or the code.
func (w *groupHostWorld) fetchOffset(groupID string) (int64, int16) {
	w.t.Helper()
	request := kmsg.NewPtrOffsetFetchRequest()
	request.Version, request.Group = 7, groupID
	request.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	response, code := w.call(groupID, request)
	if code != 0 {
		return -1, code
	}
	fetched := response.(*kmsg.OffsetFetchResponse)
	if fetched.ErrorCode != 0 {
		return -1, fetched.ErrorCode
	}
	return fetched.Topics[0].Partitions[0].Offset, fetched.Topics[0].Partitions[0].ErrorCode
}

// The host creates __consumer_offsets at the first FindCoordinator,
// loads a coordinator for each partition it leads, answers a commit once
// its record is committed, and a new coordinator of the partition (the
// leadership lost and won back) loads the commit from the log. A
// partition without a coordinator answers NOT_COORDINATOR.
func TestGroupHostCommitsAndLoads(t *testing.T) {
	w := newGroupHostWorld(t, rules.Rules{})
	partition := w.serving("app")
	if response, code := w.call("app", simpleCommit("app", 42)); code != 0 ||
		response.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: code %d, %+v", code, response)
	}
	w.forget(partition) // as if the leadership went and came back
	if _, code := w.fetchOffset("app"); code != kerr.NotCoordinator.Code {
		t.Fatalf("without a coordinator: code %d, want NOT_COORDINATOR", code)
	}
	w.serving("app")
	if offset, code := w.fetchOffset("app"); code != 0 || offset != 42 {
		t.Fatalf("the new coordinator answers offset %d, code %d; want 42", offset, code)
	}
}

// Rule load-committed-only: a commit record in the offsets partition's log
// above its high watermark (appended, not yet synced with flush=always, so
// not committed) keeps a new coordinator loading, and clients get
// COORDINATOR_LOAD_IN_PROGRESS, until the high watermark reaches the log
// end. Without the rule the coordinator loads the record at once and
// serves an offset the log may yet lose.
func TestGroupHostLoadsCommittedOnly(t *testing.T) {
	for _, on := range []bool{true, false} {
		groupRules := rules.Rules{}
		if !on {
			groupRules = groupRules.Without(rules.LoadCommittedOnly)
		}
		w := newGroupHostWorld(t, groupRules)
		partition := w.serving("app")
		w.forget(partition)
		w.sync = false
		w.appendUncommitted(partition, simpleCommit("app", 7))
		w.step()
		offset, code := w.fetchOffset("app")
		if on && code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("rule on: offset %d, code %d; want COORDINATOR_LOAD_IN_PROGRESS", offset, code)
		}
		if !on && (code != 0 || offset != 7) {
			t.Fatalf("rule off: offset %d, code %d; want the uncommitted 7", offset, code)
		}
		w.sync = true
		w.stepUntil("the coordinator loaded", func() bool { return !w.fe.groups.coordinators[partition].loading })
		if offset, code := w.fetchOffset("app"); code != 0 || offset != 7 {
			t.Fatalf("rule on %t, once committed: offset %d, code %d", on, offset, code)
		}
	}
}

// appendUncommitted writes the records a coordinator would write for
// request straight to the partition's leader replica, acks=1, leaving
// them unsynced.
func (w *groupHostWorld) appendUncommitted(partition int32, request kmsg.Request) {
	w.t.Helper()
	writer := group.NewCoordinator(group.DefaultConfig(), partition)
	writer.FinishLoad(0)
	writer.Handle(0, 1, request)
	ready := writer.Ready()
	if len(ready.Appends) != 1 {
		w.t.Fatalf("%d appends", len(ready.Appends))
	}
	records := ready.Appends[0].Records
	// Its answer waits for the sync, which this world holds back.
	(*backend)(w.fe).Produce(offsetsPartition(partition), replica.ProduceRequest{ID: 1, Batches: offsetsBatch(records, 0), Acks: replica.AcksLeader},
		func(replica.ProduceAnswer) {})
	w.fe.Flush()
	r, _, _ := w.fe.Node().Replica(offsetsPartition(partition))
	if r.HighWatermark() >= r.LogEndOffset() {
		w.t.Fatalf("the record is committed already: high watermark %d, log end %d", r.HighWatermark(), r.LogEndOffset())
	}
}
