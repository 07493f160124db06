package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzLoad feeds arbitrary record bytes to Load, two records at a time:
// a bad record is an error, never a panic, and a coordinator that loaded
// whatever decoded keeps its invariants and serves the group it names.
func FuzzLoad(f *testing.F) {
	offset := committedOffset{offset: 5, leaderEpoch: 2, metadata: "m", commitTimestampMs: 1, expireTimestampMs: -1}
	metadata := groupMetadataRecord("g", groupMetadata{protocolType: "consumer", generation: 3, protocol: "range", leader: "m",
		members: []persistedMember{{memberID: "m", instanceID: "i", sessionTimeoutMs: 10000, rebalanceTimeoutMs: -1}}})
	for _, record := range []Record{
		offsetCommitRecord("g", topicPartition{"t", 0}, offset),
		offsetTombstone("g", topicPartition{"t", 0}),
		metadata,
		groupTombstone("g"),
	} {
		f.Add(record.Key, record.Value, record.Value == nil, metadata.Key, metadata.Value)
	}
	f.Add([]byte{0, 9, 1}, []byte{0, 4, 0}, false, []byte{0, 2}, []byte{})
	// A classic member whose stored session timeout is negative: its
	// deadline is past when loading ends (found by this target).
	f.Add([]byte("\x00\x02\x00\x0200"), []byte("\x00\x03\x00\b000000000000\x00\x0500000\x00\x01000000000\x00\x00\x00\x01\x00\x010\x00\x010\x00\x00\x00\x000000\xb5000\x00\x00\x00\x00\x00\x00\x00\x00"),
		false, []byte("0"), []byte("0"))
	// A loaded consumer member whose subscription no target can be
	// computed for: a member joining beside it must still get a session
	// deadline (found by this target).
	f.Add([]byte("0"), []byte("0"), false, []byte("\x00\x05\x00\x010\x00\x00"), []byte("\x00\x00\x00\x00\x01\x01\x02\x020\x000000\x00\x00"))
	current := consumerKey{recordType: recordTypeConsumerGroupCurrentMemberAssignment, group: "c", member: "m"}
	memberKey := consumerKey{recordType: recordTypeConsumerGroupMemberMetadata, group: "c", member: "m"}
	f.Add(current.encode(), encodeCurrentAssignmentValue(currentAssignmentValue{memberEpoch: 2, state: 1,
		assigned: []topicIDPartitions{{id: testTopics["t"].ID, partitions: []int32{0, 1}}}}), false,
		memberKey.encode(), encodeMemberMetadataValue(consumerMemberMetadata{subscribedTopicNames: []string{"t"}, rebalanceTimeoutMs: 1000}))
	f.Add(consumerKey{recordType: recordTypeConsumerGroupMetadata, group: "c"}.encode(), encodeGroupEpochValue(4), false,
		consumerKey{recordType: recordTypeConsumerGroupTargetAssignmentMetadata, group: "c"}.encode(), encodeGroupEpochValue(9))
	// Consumer group metadata records whose group epoch is the largest
	// int32 or one below: the next changes of the group overflowed it
	// (found by this target).
	f.Add([]byte("\x00\x03\x00\x010"), []byte("\x00\x00\x7f\xff\xff\xff\x00"), false, []byte("0"), []byte("0"))
	f.Add([]byte("\x00\x03\x00\x010"), []byte("\x00\x00\x7f\xff\xff\xfe\x00"), false, []byte("0"), []byte("0"))
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool, secondKey, secondValue []byte) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		h := &harness{t: t, config: DefaultConfig(), nowMs: 1000, answers: map[RequestID]kmsg.Response{}, autoCommit: true}
		h.coordinator = NewCoordinator(h.config, 0)
		h.coordinator.SetTopics(testTopics)
		_ = h.coordinator.Load(0, Record{Key: key, Value: value})
		_ = h.coordinator.Load(1, Record{Key: secondKey, Value: secondValue})
		h.coordinator.FinishLoad(h.nowMs)
		h.checkInvariants()
		groups := sortedKeys(h.coordinator.groups)
		h.send(&kmsg.DescribeGroupsRequest{Version: 5, Groups: groups})
		h.send(&kmsg.ListGroupsRequest{Version: 5})
		for _, id := range groups {
			group := h.coordinator.groups[id]
			h.send(&kmsg.OffsetFetchRequest{Version: 7, Group: id})
			for _, memberID := range group.sortedMemberIDs() {
				h.send(&kmsg.HeartbeatRequest{Version: 4, Group: id, MemberID: memberID, Generation: group.generation})
				h.send(syncRequestFor(id, memberID, group.generation, nil))
				h.send(joinRequestFor(9, id, memberID))
			}
			h.send(joinRequestFor(9, id, ""))
		}
		consumerGroups := sortedKeys(h.coordinator.consumerGroups)
		h.send(&kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: consumerGroups})
		for _, id := range consumerGroups {
			group := h.coordinator.consumerGroups[id]
			for _, memberID := range group.sortedMemberIDs() {
				h.send(consumerBeat(id, memberID, group.members[memberID].current.MemberEpoch, []int32{}))
				h.send(consumerBeat(id, memberID, group.members[memberID].current.MemberEpoch, nil))
			}
			h.send(consumerJoin(id, "new", "t", "u"))
		}
		h.advance(700000)
		for id := RequestID(1); id <= h.nextRequest; id++ {
			if !h.answered(id) {
				t.Fatalf("request %d not answered", id)
			}
		}
	})
}

// FuzzHandle decodes arbitrary bytes as each group request at each version
// and hands what decodes to a coordinator with a Stable group: whatever
// the fields say, it answers with a Kafka error code or a result, exactly
// once, and never panics.
func FuzzHandle(f *testing.F) {
	f.Add(int16(11), int16(9), (&kmsg.JoinGroupRequest{Version: 9, Group: "g", SessionTimeoutMillis: 10000, ProtocolType: "consumer",
		Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range"}}}).AppendTo(nil))
	f.Add(int16(8), int16(8), (&kmsg.OffsetCommitRequest{Version: 8, Group: "g", Generation: 1,
		Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}}).AppendTo(nil))
	f.Add(int16(14), int16(5), (&kmsg.SyncGroupRequest{Version: 5, Group: "g", Generation: 1}).AppendTo(nil))
	f.Add(int16(13), int16(3), (&kmsg.LeaveGroupRequest{Version: 3, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{}}}).AppendTo(nil))
	f.Add(int16(68), int16(1), consumerJoin("c", "m", "t").AppendTo(nil))
	f.Add(int16(68), int16(0), consumerBeat("c", "a", 1, []int32{0, 1, 2}).AppendTo(nil))
	f.Add(int16(69), int16(1), (&kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{"c", "g"}}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		request := kmsg.RequestForKey(key)
		switch request.(type) {
		case *kmsg.ConsumerGroupHeartbeatRequest, *kmsg.ConsumerGroupDescribeRequest, *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest, *kmsg.LeaveGroupRequest, *kmsg.OffsetCommitRequest,
			*kmsg.OffsetFetchRequest, *kmsg.DescribeGroupsRequest, *kmsg.ListGroupsRequest, *kmsg.DeleteGroupsRequest, *kmsg.OffsetDeleteRequest:
		default:
			return
		}
		if version < 0 || version > request.MaxVersion() {
			return
		}
		request.SetVersion(version)
		if err := request.ReadFrom(body); err != nil {
			return
		}
		h := newHarness(t, DefaultConfig())
		stableGroup(t, h, "g")
		h.send(consumerJoin("c", "a", "t"))
		id := h.send(request)
		h.advance(700000)
		if !h.answered(id) {
			t.Fatalf("key %d v%d not answered", key, version)
		}
	})
}
