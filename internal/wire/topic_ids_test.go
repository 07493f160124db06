package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata v10+ answers each topic's id, and v12+ finds a topic by id alone
// (KIP-516).
func TestMetadataTopicIDs(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	id := backend.topics["orders"].id
	h := newTestHandler(t, backend)
	for _, version := range testVersions(t, 3) {
		request := kmsg.NewPtrMetadataRequest()
		request.Version = version
		asked := kmsg.NewMetadataRequestTopic()
		asked.Topic = kmsg.StringPtr("orders")
		request.Topics = append(request.Topics, asked)
		if version >= 12 {
			byID := kmsg.NewMetadataRequestTopic()
			byID.TopicID = id
			request.Topics = append(request.Topics, byID)
		}
		response := roundTrip(t, h, request).(*kmsg.MetadataResponse)
		if len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", version, response.Topics)
		}
		if got := response.Topics[0].TopicID; version >= 10 && got != id {
			t.Fatalf("v%d: topic id %v, want %v", version, got, id)
		}
	}
}

// CreateTopics v7+ answers the new topic's id.
func TestCreateTopicsAnswersTopicID(t *testing.T) {
	backend := newFakeBackend()
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version = 7
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "orders", 1, 1
	request.Topics = append(request.Topics, topic)
	response := roundTrip(t, h, request).(*kmsg.CreateTopicsResponse)
	if len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 || response.Topics[0].TopicID != backend.topics["orders"].id {
		t.Fatalf("%+v", response.Topics)
	}
}

// DeleteTopics v6 deletes by id and names the topic in its answer; an entry
// with both a name and an id is INVALID_REQUEST, as in Kafka.
func TestDeleteTopicsByID(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	backend.addTopic("kept", 1, 0)
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrDeleteTopicsRequest()
	request.Version = 6
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = backend.topics["orders"].id
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr("kept"), backend.topics["kept"].id
	request.Topics = append(request.Topics, byID, both)
	response := roundTrip(t, h, request).(*kmsg.DeleteTopicsResponse)
	if len(response.Topics) != 2 || response.Topics[0].ErrorCode != 0 || response.Topics[0].Topic == nil ||
		*response.Topics[0].Topic != "orders" || response.Topics[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("%+v", response.Topics)
	}
	if backend.topics["orders"] != nil || backend.topics["kept"] == nil {
		t.Fatalf("deleted the wrong topics: %v", backend.TopicNames())
	}
}

// Fetch v13+ names topics by id: a consumer still holding a deleted
// topic's id gets UNKNOWN_TOPIC_ID, not the topic that took its name; the
// current id is served, and answered by id.
func TestFetchByTopicID(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("ghost", 1, 0)
	deleted := backend.topics["ghost"].id
	delete(backend.topics, "ghost")
	backend.addTopic("ghost", 1, 0)
	current := backend.topics["ghost"].id
	h := newTestHandler(t, backend)
	for _, version := range []int16{13, 15} {
		request := kmsg.NewPtrFetchRequest()
		request.Version, request.ReplicaID, request.MaxBytes = version, -1, 1<<20
		for _, id := range [][16]byte{deleted, current} {
			topic := kmsg.NewFetchRequestTopic()
			topic.TopicID = id
			partition := kmsg.NewFetchRequestTopicPartition()
			partition.PartitionMaxBytes = 1 << 20
			topic.Partitions = append(topic.Partitions, partition)
			request.Topics = append(request.Topics, topic)
		}
		response := roundTrip(t, h, request).(*kmsg.FetchResponse)
		if len(response.Topics) != 2 {
			t.Fatalf("v%d: %+v", version, response.Topics)
		}
		served, refused := response.Topics[0], response.Topics[1]
		if served.TopicID != current || served.Partitions[0].ErrorCode != 0 {
			t.Fatalf("v%d: the current id got %+v", version, served)
		}
		if refused.TopicID != deleted || refused.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("v%d: the deleted id got %+v", version, refused)
		}
	}
}
