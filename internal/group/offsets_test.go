package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitRequest(version int16, group string, generation int32, member string, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation, request.MemberID = version, group, generation, member
	entry := kmsg.OffsetCommitRequestTopic{Topic: topic}
	for partition := int32(0); partition < int32(len(offsets)); partition++ {
		entry.Partitions = append(entry.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: partition, Offset: offsets[partition], LeaderEpoch: 3})
	}
	request.Topics = []kmsg.OffsetCommitRequestTopic{entry}
	return request
}

func fetchRequest(version int16, group string, topic string, partitions ...int32) *kmsg.OffsetFetchRequest {
	request := kmsg.NewPtrOffsetFetchRequest()
	request.Version = version
	if version >= 8 {
		request.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}}}
	} else {
		request.Group = group
		request.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: partitions}}
	}
	return request
}

// TestSimpleCommitIsAnsweredOnlyWhenCommitted: a commit with generation -1
// creates a simple group; its answer waits for AppendDone, and OffsetFetch
// sees the offset only once it is committed.
func TestSimpleCommitIsAnsweredOnlyWhenCommitted(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.autoCommit = false
	commit := h.send(commitRequest(8, "simple", -1, "", "orders", map[int32]int64{0: 10, 1: 20}))
	if h.answered(commit) {
		t.Fatal("commit answered before its record was committed")
	}
	fetch := h.answer(h.send(fetchRequest(7, "simple", "orders", 0, 1))).(*kmsg.OffsetFetchResponse)
	if got := fetch.Topics[0].Partitions[0].Offset; got != -1 {
		t.Fatalf("fetch saw uncommitted offset %d", got)
	}
	stable := h.send(&kmsg.OffsetFetchRequest{Version: 7, Group: "simple", RequireStable: true, Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{1}}}})
	if h.answered(stable) {
		t.Fatal("require-stable fetch answered with a commit in flight")
	}
	h.commitAll()
	response := h.answer(commit).(*kmsg.OffsetCommitResponse)
	for _, partition := range response.Topics[0].Partitions {
		if partition.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", partition.Partition, partition.ErrorCode)
		}
	}
	stableResponse := h.answer(stable).(*kmsg.OffsetFetchResponse)
	if got := stableResponse.Topics[0].Partitions[0]; got.Offset != 20 || got.LeaderEpoch != 3 {
		t.Fatalf("require-stable fetch: %+v", got)
	}
	fetched := h.answer(h.send(fetchRequest(8, "simple", "orders", 0, 1, 2))).(*kmsg.OffsetFetchResponse)
	partitions := fetched.Groups[0].Topics[0].Partitions
	if partitions[0].Offset != 10 || partitions[1].Offset != 20 || partitions[2].Offset != -1 || partitions[2].LeaderEpoch != -1 {
		t.Fatalf("fetch v8: %+v", partitions)
	}
	if replayed := describeDurable(h.replay(false)); replayed != describeDurable(h.coordinator) {
		t.Fatalf("replay differs:\n%s\nlive:\n%s", replayed, describeDurable(h.coordinator))
	}
}

// TestFailedCommitIsAnsweredWithTheMappedError: an append that fails is
// answered with Kafka's mapping of the produce error, and leaves no trace.
func TestFailedCommitIsAnsweredWithTheMappedError(t *testing.T) {
	for _, test := range []struct{ produce, answer int16 }{
		{kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.MessageTooLarge.Code, kerr.UnknownServerError.Code},
	} {
		h := newHarness(t, DefaultConfig())
		h.autoCommit = false
		commit := h.send(commitRequest(8, "simple", -1, "", "orders", map[int32]int64{0: 10}))
		h.failAll(test.produce)
		if got := h.answer(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != test.answer {
			t.Errorf("produce error %d answered %d, want %d", test.produce, got, test.answer)
		}
		if len(h.coordinator.groups) != 0 || describeDurable(h.coordinator) != "" {
			t.Errorf("a failed simple commit left %s%s", describeLive(h.coordinator), describeDurable(h.coordinator))
		}
	}
}

// TestOffsetCommitValidation covers the group-level checks of a commit.
func TestOffsetCommitValidation(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	check := func(name string, request *kmsg.OffsetCommitRequest, want int16) {
		t.Helper()
		if got := h.answer(h.send(request)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("%s: error %d, want %d", name, got, want)
		}
	}
	check("unknown group, generation 1, v8", commitRequest(8, "nobody", 1, "m", "t", map[int32]int64{0: 1}), kerr.IllegalGeneration.Code)
	check("unknown group, generation 1, v9", commitRequest(9, "nobody", 1, "m", "t", map[int32]int64{0: 1}), kerr.GroupIDNotFound.Code)
	check("empty group id is allowed", commitRequest(8, "", -1, "", "t", map[int32]int64{0: 1}), 0)
	check("simple group, unknown member", commitRequest(8, "", 2, "who", "t", map[int32]int64{0: 1}), kerr.UnknownMemberID.Code)
	large := commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 1})
	metadata := string(make([]byte, 4097))
	large.Topics[0].Partitions[0].Metadata = &metadata
	check("metadata too large", large, kerr.OffsetMetadataTooLarge.Code)
}

// TestLoadInProgressAndUnload: before FinishLoad every request gets
// COORDINATOR_LOAD_IN_PROGRESS, after Unload NOT_COORDINATOR, and a commit
// waiting on its append is answered NOT_COORDINATOR by Unload.
func TestLoadInProgressAndUnload(t *testing.T) {
	loading := NewCoordinator(DefaultConfig(), 3)
	loading.Handle(0, 1, commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 1}))
	loading.Handle(0, 2, &kmsg.JoinGroupRequest{Version: 5, Group: "g"})
	answers := loading.Ready().Answers
	if code := answers[0].Response.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("commit while loading: %d", code)
	}
	if code := answers[1].Response.(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("join while loading: %d", code)
	}
	h := newHarness(t, DefaultConfig())
	h.autoCommit = false
	commit := h.send(commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 1}))
	h.coordinator.Unload()
	h.drain()
	if code := h.answer(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("commit pending at Unload: %d", code)
	}
	if code := h.answer(h.send(&kmsg.HeartbeatRequest{Group: "g"})).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("heartbeat after Unload: %d", code)
	}
}

// TestAppendReportsAreTakenInOrder: a commit reported committed before an
// earlier append is held until the earlier one is reported, so the durable
// view applies records in log order whatever order the reports come in.
func TestAppendReportsAreTakenInOrder(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.autoCommit = false
	first := h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 1}))
	second := h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 2}))
	ids := h.inFlight
	h.coordinator.AppendDone(ids[1], 0)
	h.drain()
	if h.answered(second) {
		t.Fatal("the second commit was answered before the first was reported")
	}
	h.coordinator.AppendDone(ids[0], 0)
	h.drain()
	if !h.answered(first) || !h.answered(second) {
		t.Fatal("commits not answered once both were reported")
	}
	if got := h.coordinator.durable["g"].offsets[topicPartition{"orders", 0}].offset; got != 2 {
		t.Fatalf("offset %d, want the later commit's 2", got)
	}
}

// TestUncertainAppendErrorStopsTheCoordinator: a timeout leaves the record
// in the log, to be committed or truncated; the request is answered
// COORDINATOR_NOT_AVAILABLE and the coordinator stops serving until a new
// one loads the log. A refusal before the append does not stop it.
func TestUncertainAppendErrorStopsTheCoordinator(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.autoCommit = false
	refused := h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 1}))
	h.coordinator.AppendDone(h.inFlight[0], kerr.NotEnoughReplicas.Code)
	h.inFlight = h.inFlight[1:]
	h.drain()
	if got := h.answer(refused).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.CoordinatorNotAvailable.Code || h.coordinator.Unloaded() {
		t.Fatalf("refused append: error %d, unloaded %t", got, h.coordinator.Unloaded())
	}
	timedOut := h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 2}))
	held := h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 3}))
	h.coordinator.AppendDone(h.inFlight[0], kerr.RequestTimedOut.Code)
	h.drain()
	if got := h.answer(timedOut).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("timed-out append answered %d", got)
	}
	if got := h.answer(held).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.NotCoordinator.Code || !h.coordinator.Unloaded() {
		t.Fatalf("the next commit: error %d, unloaded %t", got, h.coordinator.Unloaded())
	}
}

// TestOffsetFetchAllTopics: from v2, no topics means every committed
// offset of the group, sorted; from v8 per group.
func TestOffsetFetchAllTopics(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.send(commitRequest(8, "g", -1, "", "orders", map[int32]int64{0: 4, 1: 5}))
	h.send(commitRequest(8, "g", -1, "", "audit", map[int32]int64{0: 9}))
	single := h.answer(h.send(&kmsg.OffsetFetchRequest{Version: 7, Group: "g"})).(*kmsg.OffsetFetchResponse)
	if len(single.Topics) != 2 || single.Topics[0].Topic != "audit" || len(single.Topics[1].Partitions) != 2 || single.Topics[1].Partitions[1].Offset != 5 {
		t.Fatalf("v7 all topics: %+v", single.Topics)
	}
	multiple := h.answer(h.send(&kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "none"}}})).(*kmsg.OffsetFetchResponse)
	if len(multiple.Groups) != 2 || len(multiple.Groups[0].Topics) != 2 || len(multiple.Groups[1].Topics) != 0 || multiple.Groups[1].ErrorCode != 0 {
		t.Fatalf("v8 all topics: %+v", multiple.Groups)
	}
	old := h.answer(h.send(&kmsg.OffsetFetchRequest{Version: 1, Group: "g"})).(*kmsg.OffsetFetchResponse)
	if len(old.Topics) != 0 {
		t.Fatalf("v1 has no all-topics form, yet answered %+v", old.Topics)
	}
}
