package wire

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group"
)

// FindCoordinator answers this broker's endpoint for a group once
// __consumer_offsets exists and COORDINATOR_NOT_AVAILABLE with no node
// before; transaction keys are COORDINATOR_NOT_AVAILABLE and share or
// unknown key types INVALID_REQUEST, at every version, batched from v4.
func TestFindCoordinator(t *testing.T) {
	for _, version := range testVersions(t, 10) {
		for _, exists := range []bool{false, true} {
			backend := newFakeBackend()
			if exists {
				backend.groupPartitions = 3
			}
			h := newTestHandler(t, backend)
			want := int16(0)
			if !exists {
				want = kerr.CoordinatorNotAvailable.Code
			}
			checkFound(t, h, version, "orders-app", 0, want)
			if version >= 1 {
				checkFound(t, h, version, "orders-app", 1, kerr.CoordinatorNotAvailable.Code)
				checkFound(t, h, version, "orders-app", 2, kerr.InvalidRequest.Code)
			}
		}
	}
}

func checkFound(t *testing.T, h *Handler, version int16, key string, keyType int8, want int16) {
	t.Helper()
	request := kmsg.NewPtrFindCoordinatorRequest()
	request.Version, request.CoordinatorKey, request.CoordinatorType = version, key, keyType
	if version >= 4 {
		request.CoordinatorKeys = []string{key, key + "-2"}
	}
	response := roundTrip(t, h, request).(*kmsg.FindCoordinatorResponse)
	type found struct {
		code       int16
		node, port int32
		host       string
	}
	var got []found
	if version < 4 {
		got = append(got, found{response.ErrorCode, response.NodeID, response.Port, response.Host})
	}
	for _, entry := range response.Coordinators {
		got = append(got, found{entry.ErrorCode, entry.NodeID, entry.Port, entry.Host})
	}
	if len(got) != max(1, len(request.CoordinatorKeys)) {
		t.Fatalf("v%d: %d answers", version, len(got))
	}
	for _, entry := range got {
		expected := found{want, -1, -1, ""}
		if want == 0 {
			expected = found{0, 1, 9092, "127.0.0.1"}
		}
		if entry != expected {
			t.Fatalf("v%d key type %d: %+v, want %+v", version, keyType, entry, expected)
		}
	}
}

// describedBy answers DescribeGroups naming each group's coordinator in its
// protocol type, so a test sees which coordinator answered which group.
func describedBy(partition int32, request kmsg.Request) kmsg.Response {
	describe := request.(*kmsg.DescribeGroupsRequest)
	response := describe.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range describe.Groups {
		entry := kmsg.NewDescribeGroupsResponseGroup()
		entry.Group, entry.State, entry.ProtocolType = id, "Stable", fmt.Sprint(partition)
		response.Groups = append(response.Groups, entry)
	}
	return response
}

// A DescribeGroups naming groups of two coordinators reaches each with
// only its groups, and the answer keeps the request's order; the groups of
// a coordinator that cannot answer get its code.
func TestDescribeGroupsSplitByCoordinator(t *testing.T) {
	backend := newFakeBackend()
	backend.groupPartitions, backend.groupServe = 2, describedBy
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrDescribeGroupsRequest()
	request.Version, request.Groups = 5, []string{"a", "bb", "ccc", "dd"} // partitions 1, 0, 1, 0
	response := roundTrip(t, h, request).(*kmsg.DescribeGroupsResponse)
	want := []string{"a/1", "bb/0", "ccc/1", "dd/0"}
	for i, group := range response.Groups {
		if got := group.Group + "/" + group.ProtocolType; got != want[i] || group.ErrorCode != 0 {
			t.Fatalf("group %d: %s code %d, want %s", i, got, group.ErrorCode, want[i])
		}
	}
	if len(backend.groupRequests) != 2 {
		t.Fatalf("%d coordinator requests, want 2", len(backend.groupRequests))
	}
	for _, asked := range backend.groupRequests {
		for _, id := range asked.request.(*kmsg.DescribeGroupsRequest).Groups {
			if int32(len(id))%2 != asked.partition {
				t.Fatalf("coordinator %d asked for group %q", asked.partition, id)
			}
		}
	}
	backend.groupCodes = map[int32]int16{0: kerr.CoordinatorLoadInProgress.Code}
	response = roundTrip(t, h, request).(*kmsg.DescribeGroupsResponse)
	for i, group := range response.Groups {
		if wantCode := map[bool]int16{true: kerr.CoordinatorLoadInProgress.Code}[i%2 == 1]; group.ErrorCode != wantCode {
			t.Fatalf("group %d (%s): code %d, want %d", i, group.Group, group.ErrorCode, wantCode)
		}
	}
}

// OffsetFetch v8+ and DeleteGroups split the same way; below v8 the one
// group's coordinator code lands at the top level and in every partition.
func TestOffsetFetchAndDeleteGroupsSplit(t *testing.T) {
	backend := newFakeBackend()
	backend.groupPartitions = 2
	backend.groupCodes = map[int32]int16{1: kerr.NotCoordinator.Code}
	backend.groupServe = func(_ int32, request kmsg.Request) kmsg.Response {
		switch request := request.(type) {
		case *kmsg.OffsetFetchRequest:
			response := request.ResponseKind().(*kmsg.OffsetFetchResponse)
			for _, group := range request.Groups {
				entry := kmsg.NewOffsetFetchResponseGroup()
				entry.Group = group.Group
				response.Groups = append(response.Groups, entry)
			}
			return response
		case *kmsg.DeleteGroupsRequest:
			response := request.ResponseKind().(*kmsg.DeleteGroupsResponse)
			for _, id := range request.Groups {
				entry := kmsg.NewDeleteGroupsResponseGroup()
				entry.Group = id
				response.Groups = append(response.Groups, entry)
			}
			return response
		}
		panic(request)
	}
	h := newTestHandler(t, backend)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	for _, id := range []string{"a", "bb", "ccc"} {
		group := kmsg.NewOffsetFetchRequestGroup()
		group.Group = id
		fetch.Groups = append(fetch.Groups, group)
	}
	fetched := roundTrip(t, h, fetch).(*kmsg.OffsetFetchResponse)
	deletion := kmsg.NewPtrDeleteGroupsRequest()
	deletion.Version, deletion.Groups = 2, []string{"a", "bb", "ccc"}
	deleted := roundTrip(t, h, deletion).(*kmsg.DeleteGroupsResponse)
	for i, want := range []int16{kerr.NotCoordinator.Code, 0, kerr.NotCoordinator.Code} {
		if fetched.Groups[i].ErrorCode != want || deleted.Groups[i].ErrorCode != want || deleted.Groups[i].Group != deletion.Groups[i] {
			t.Fatalf("group %d: fetch %+v delete %+v, want code %d", i, fetched.Groups[i], deleted.Groups[i], want)
		}
	}
	single := kmsg.NewPtrOffsetFetchRequest()
	single.Version, single.Group = 7, "a"
	topic := kmsg.NewOffsetFetchRequestTopic()
	topic.Topic, topic.Partitions = "orders", []int32{0, 1}
	single.Topics = append(single.Topics, topic)
	answer := roundTrip(t, h, single).(*kmsg.OffsetFetchResponse)
	if answer.ErrorCode != kerr.NotCoordinator.Code || len(answer.Topics) != 1 || answer.Topics[0].Partitions[1].Offset != -1 ||
		answer.Topics[0].Partitions[1].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("v7: %+v", answer)
	}
}

// An OffsetCommit's partitions that this broker's metadata lacks are
// UNKNOWN_TOPIC_OR_PARTITION and never reach the coordinator; the others
// get the coordinator's codes.
func TestOffsetCommitUnknownPartitions(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.groupPartitions = 1
	backend.groupServe = func(_ int32, request kmsg.Request) kmsg.Response {
		commit := request.(*kmsg.OffsetCommitRequest)
		response := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, topic := range commit.Topics {
			entry := kmsg.NewOffsetCommitResponseTopic()
			entry.Topic = topic.Topic
			for _, partition := range topic.Partitions {
				answer := kmsg.NewOffsetCommitResponseTopicPartition()
				answer.Partition, answer.ErrorCode = partition.Partition, kerr.IllegalGeneration.Code
				entry.Partitions = append(entry.Partitions, answer)
			}
			response.Topics = append(response.Topics, entry)
		}
		return response
	}
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation = 8, "app", 1
	for _, name := range []string{"orders", "missing"} {
		topic := kmsg.NewOffsetCommitRequestTopic()
		topic.Topic = name
		for _, p := range []int32{1, 5} {
			partition := kmsg.NewOffsetCommitRequestTopicPartition()
			partition.Partition, partition.Offset = p, 10
			topic.Partitions = append(topic.Partitions, partition)
		}
		request.Topics = append(request.Topics, topic)
	}
	response := roundTrip(t, h, request).(*kmsg.OffsetCommitResponse)
	unknown := kerr.UnknownTopicOrPartition.Code
	want := [][]int16{{kerr.IllegalGeneration.Code, unknown}, {unknown, unknown}}
	for i, topic := range response.Topics {
		for j, partition := range topic.Partitions {
			if partition.ErrorCode != want[i][j] {
				t.Fatalf("%s-%d: code %d, want %d", topic.Topic, partition.Partition, partition.ErrorCode, want[i][j])
			}
		}
	}
	forwarded := backend.groupRequests[0].request.(*kmsg.OffsetCommitRequest)
	if len(forwarded.Topics) != 1 || len(forwarded.Topics[0].Partitions) != 1 || forwarded.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("forwarded %+v", forwarded.Topics)
	}
}

// ListGroups merges every hosted coordinator's groups, leaving out one that
// is no longer the coordinator; a loading one makes the answer's code.
func TestListGroupsMerges(t *testing.T) {
	backend := newFakeBackend()
	backend.groupPartitions = 3
	backend.groupCodes = map[int32]int16{1: kerr.NotCoordinator.Code}
	backend.groupServe = func(partition int32, request kmsg.Request) kmsg.Response {
		response := request.(*kmsg.ListGroupsRequest).ResponseKind().(*kmsg.ListGroupsResponse)
		entry := kmsg.NewListGroupsResponseGroup()
		entry.Group = fmt.Sprint("group-", partition)
		response.Groups = append(response.Groups, entry)
		return response
	}
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrListGroupsRequest()
	request.Version = 4
	response := roundTrip(t, h, request).(*kmsg.ListGroupsResponse)
	if response.ErrorCode != 0 || len(response.Groups) != 2 || response.Groups[0].Group != "group-0" || response.Groups[1].Group != "group-2" {
		t.Fatalf("%+v", response)
	}
	backend.groupCodes[2] = kerr.CoordinatorLoadInProgress.Code
	if response = roundTrip(t, h, request).(*kmsg.ListGroupsResponse); response.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("loading: %+v", response)
	}
}

// A JoinGroup, SyncGroup, Heartbeat, LeaveGroup or OffsetDelete whose
// coordinator cannot take it gets that code in Kafka's error response.
func TestSingleGroupRequestsFail(t *testing.T) {
	backend := newFakeBackend()
	backend.groupPartitions = 1
	backend.groupCodes = map[int32]int16{0: kerr.NotCoordinator.Code}
	h := newTestHandler(t, backend)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group = 9, "app"
	if response := roundTrip(t, h, join).(*kmsg.JoinGroupResponse); response.ErrorCode != kerr.NotCoordinator.Code || response.Generation != -1 {
		t.Fatalf("join: %+v", response)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group = 5, "app"
	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.Version, heartbeat.Group = 4, "app"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "app"
	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = "app"
	if r := roundTrip(t, h, sync).(*kmsg.SyncGroupResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("sync: %+v", r)
	}
	if r := roundTrip(t, h, heartbeat).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat: %+v", r)
	}
	if r := roundTrip(t, h, leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("leave: %+v", r)
	}
	if r := roundTrip(t, h, offsetDelete).(*kmsg.OffsetDeleteResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("offset delete: %+v", r)
	}
}

// __consumer_offsets is internal: Metadata says so, a client's produce to
// it is INVALID_TOPIC_EXCEPTION, and CreateTopics and DeleteTopics of it
// are INVALID_REQUEST without reaching the Backend.
func TestOffsetsTopicIsInternal(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic(OffsetsTopic, 1, 0)
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	response := roundTrip(t, h, meta).(*kmsg.MetadataResponse)
	for _, topic := range response.Topics {
		if topic.IsInternal != (*topic.Topic == OffsetsTopic) {
			t.Fatalf("%s: internal %v", *topic.Topic, topic.IsInternal)
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, -1, 1000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = OffsetsTopic
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = testBatch(1, "x")
	topic.Partitions = append(topic.Partitions, partition)
	produce.Topics = append(produce.Topics, topic)
	produced := roundTrip(t, h, produce).(*kmsg.ProduceResponse)
	if code := produced.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code || len(backend.produces) != 0 {
		t.Fatalf("produce: code %d, %d produces reached the backend", code, len(backend.produces))
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	createTopic := kmsg.NewCreateTopicsRequestTopic()
	createTopic.Topic, createTopic.NumPartitions, createTopic.ReplicationFactor = OffsetsTopic, 1, 1
	create.Topics = append(create.Topics, createTopic)
	if code := roundTrip(t, h, create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidRequest.Code || len(backend.createTopics) != 0 {
		t.Fatalf("create: code %d", code)
	}
	deletion := kmsg.NewPtrDeleteTopicsRequest()
	deletion.Version, deletion.TopicNames = 5, []string{OffsetsTopic}
	if code := roundTrip(t, h, deletion).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("delete: code %d", code)
	}
	if _, ok := backend.Topic(OffsetsTopic); !ok {
		t.Fatal("the offsets topic was deleted")
	}
}

// coordinatorServe serves the fake's group requests with real coordinators
// (internal/group), one per partition, loaded empty and given topics (the
// KIP-848 assignors' view of the metadata; nil for none); their appends
// are reported committed at once. A request the coordinator holds (a
// JoinGroup waiting for the rebalance) gets no response: nil.
func coordinatorServe(topics map[string]group.TopicInfo) func(int32, kmsg.Request) kmsg.Response {
	coordinators := map[int32]*group.Coordinator{}
	next := group.RequestID(0)
	return func(partition int32, request kmsg.Request) kmsg.Response {
		coordinator, ok := coordinators[partition]
		if !ok {
			config := group.DefaultConfig()
			config.InitialRebalanceDelayMs = 0
			coordinator = group.NewCoordinator(config, partition)
			coordinator.SetTopics(topics)
			coordinator.FinishLoad(0)
			coordinators[partition] = coordinator
		}
		next++
		coordinator.Handle(0, next, request)
		var response kmsg.Response
		for {
			ready := coordinator.Ready()
			for _, answer := range ready.Answers {
				if answer.Request == next {
					response = answer.Response
				}
			}
			if len(ready.Appends) == 0 {
				return response
			}
			for _, append := range ready.Appends {
				coordinator.AppendDone(append.ID, 0)
			}
		}
	}
}

// An OffsetCommit and the OffsetFetch after it, through wire and a real
// coordinator: the offset committed is the offset fetched, at the oldest
// and newest versions.
func TestOffsetsThroughCoordinator(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.groupPartitions, backend.groupServe = 3, coordinatorServe(nil)
	h := newTestHandler(t, backend)
	for _, version := range []int16{2, 9} {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Version, commit.Group, commit.Generation = version, "app", -1
		topic := kmsg.NewOffsetCommitRequestTopic()
		topic.Topic = "orders"
		partition := kmsg.NewOffsetCommitRequestTopicPartition()
		partition.Partition, partition.Offset = 1, int64(100+version)
		topic.Partitions = append(topic.Partitions, partition)
		commit.Topics = append(commit.Topics, topic)
		if code := roundTrip(t, h, commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("v%d commit: code %d", version, code)
		}
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version = version
		wanted := kmsg.NewOffsetFetchRequestTopic()
		wanted.Topic, wanted.Partitions = "orders", []int32{1}
		fetch.Group, fetch.Topics = "app", []kmsg.OffsetFetchRequestTopic{wanted}
		if version >= 8 {
			group := kmsg.NewOffsetFetchRequestGroup()
			group.Group, group.Topics = "app", []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{1}}}
			fetch.Group, fetch.Topics, fetch.Groups = "", nil, []kmsg.OffsetFetchRequestGroup{group}
		}
		fetched := roundTrip(t, h, fetch).(*kmsg.OffsetFetchResponse)
		offset := int64(-1)
		if version >= 8 && len(fetched.Groups) == 1 && len(fetched.Groups[0].Topics) == 1 {
			offset = fetched.Groups[0].Topics[0].Partitions[0].Offset
		} else if version < 8 && len(fetched.Topics) == 1 {
			offset = fetched.Topics[0].Partitions[0].Offset
		}
		if offset != int64(100+version) {
			t.Fatalf("v%d: fetched %d, committed %d: %+v", version, offset, 100+version, fetched)
		}
	}
}
