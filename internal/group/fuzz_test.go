package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzLoad feeds arbitrary record bytes to Load: a bad record is an error,
// never a panic, and a coordinator that loaded garbage still serves.
func FuzzLoad(f *testing.F) {
	offset := committedOffset{offset: 5, leaderEpoch: 2, metadata: "m", commitTimestampMs: 1, expireTimestampMs: -1}
	for _, record := range []Record{
		offsetCommitRecord("g", topicPartition{"t", 0}, offset),
		offsetTombstone("g", topicPartition{"t", 0}),
		groupMetadataRecord("g", groupMetadata{protocolType: "consumer", generation: 3, protocol: "range", leader: "m",
			members: []persistedMember{{memberID: "m", instanceID: "i", sessionTimeoutMs: 10000, rebalanceTimeoutMs: -1}}}),
		groupTombstone("g"),
	} {
		f.Add(record.Key, record.Value, record.Value == nil)
	}
	f.Add([]byte{0, 9, 1}, []byte{0, 4, 0}, false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		coordinator := NewCoordinator(DefaultConfig(), 0)
		_ = coordinator.Load(0, Record{Key: key, Value: value})
		coordinator.FinishLoad(1000)
		coordinator.Tick(700000)
		coordinator.Handle(700000, 1, &kmsg.DescribeGroupsRequest{Version: 5, Groups: sortedKeys(coordinator.groups)})
		coordinator.Handle(700000, 2, &kmsg.OffsetFetchRequest{Version: 7, Group: "g"})
		coordinator.Handle(700000, 3, &kmsg.ListGroupsRequest{Version: 5})
		if answers := coordinator.Ready().Answers; len(answers) != 3 {
			t.Fatalf("%d answers", len(answers))
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
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		request := kmsg.RequestForKey(key)
		switch request.(type) {
		case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest, *kmsg.LeaveGroupRequest, *kmsg.OffsetCommitRequest,
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
		id := h.send(request)
		h.advance(700000)
		if !h.answered(id) {
			t.Fatalf("key %d v%d not answered", key, version)
		}
	})
}
