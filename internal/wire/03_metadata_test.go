package wire

import (
	"slices"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetadata(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 4, 1, 3) // broker 3 is not listed: offline
	backend.addTopic("audit", 1, 0, 2)
	backend.topics["audit"].partitions[0].state.Leader = metadata.NoBroker
	h := newTestHandler(t, backend)
	for _, version := range testVersions(t, 3) {
		request := kmsg.NewPtrMetadataRequest()
		request.Version = version
		for _, name := range []string{"orders", "missing", "orders"} {
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr(name)
			request.Topics = append(request.Topics, topic)
		}
		response := roundTrip(t, h, request).(*kmsg.MetadataResponse)
		if len(response.Brokers) != 2 || response.Brokers[0].NodeID != 1 || response.Brokers[0].Port != 9092 {
			t.Fatalf("v%d: brokers %+v", version, response.Brokers)
		}
		if version >= 1 && response.ControllerID != 1 {
			t.Fatalf("v%d: controller %d", version, response.ControllerID)
		}
		if version >= 2 && (response.ClusterID == nil || *response.ClusterID != "tide-test") {
			t.Fatalf("v%d: cluster id %v", version, response.ClusterID)
		}
		if len(response.Topics) != 2 {
			t.Fatalf("v%d: %d topics, want orders once and missing", version, len(response.Topics))
		}
		orders, missing := response.Topics[0], response.Topics[1]
		if missing.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: missing topic error %d", version, missing.ErrorCode)
		}
		checkOrdersMetadata(t, version, orders)
	}
}

func checkOrdersMetadata(t *testing.T, version int16, orders kmsg.MetadataResponseTopic) {
	t.Helper()
	if orders.ErrorCode != 0 || len(orders.Partitions) != 2 {
		t.Fatalf("v%d: orders %+v", version, orders)
	}
	p := orders.Partitions[1]
	if p.Partition != 1 || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1, 3}) || !slices.Equal(p.ISR, []int32{1, 3}) {
		t.Fatalf("v%d: partition %+v", version, p)
	}
	if version >= 5 && !slices.Equal(p.OfflineReplicas, []int32{3}) {
		t.Fatalf("v%d: offline replicas %v, want [3]", version, p.OfflineReplicas)
	}
	if want := int32(4); version >= 7 && p.LeaderEpoch != want {
		t.Fatalf("v%d: leader epoch %d, want %d", version, p.LeaderEpoch, want)
	}
}

func TestMetadataAllTopicsAndNone(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("b", 1, 0)
	backend.addTopic("a", 1, 0, 2)
	backend.topics["a"].partitions[0].state.Leader = metadata.NoBroker
	h := newTestHandler(t, backend)
	for _, c := range []struct {
		version int16
		topics  []kmsg.MetadataRequestTopic
		want    []string
	}{
		{0, []kmsg.MetadataRequestTopic{}, []string{"a", "b"}}, // v0: empty is all
		{1, nil, []string{"a", "b"}},                           // v1+: null is all
		{1, []kmsg.MetadataRequestTopic{}, nil},                // v1+: empty is none
		{12, nil, []string{"a", "b"}},
	} {
		request := kmsg.NewPtrMetadataRequest()
		request.Version, request.Topics = c.version, c.topics
		response := roundTrip(t, h, request).(*kmsg.MetadataResponse)
		var names []string
		for _, topic := range response.Topics {
			names = append(names, *topic.Topic)
		}
		if !slices.Equal(names, c.want) {
			t.Fatalf("v%d %v: topics %v, want %v", c.version, c.topics, names, c.want)
		}
		if len(names) > 0 && response.Topics[0].Partitions[0].ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("v%d: leaderless partition error %d", c.version, response.Topics[0].Partitions[0].ErrorCode)
		}
	}
}

func TestMetadataByTopicIDIsUnknown(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	request := kmsg.NewPtrMetadataRequest()
	request.Version = 12
	topic := kmsg.NewMetadataRequestTopic()
	topic.TopicID = [16]byte{1}
	request.Topics = []kmsg.MetadataRequestTopic{topic}
	response := roundTrip(t, h, request).(*kmsg.MetadataResponse)
	if len(response.Topics) != 1 || response.Topics[0].ErrorCode != kerr.UnknownTopicID.Code || response.Topics[0].TopicID != topic.TopicID {
		t.Fatalf("topics %+v", response.Topics)
	}
}
