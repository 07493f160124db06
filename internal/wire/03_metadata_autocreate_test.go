package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataFor(version int16, allow bool, names ...string) *kmsg.MetadataRequest {
	request := kmsg.NewPtrMetadataRequest()
	request.Version, request.AllowAutoTopicCreation = version, allow
	for _, name := range names {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr(name)
		request.Topics = append(request.Topics, topic)
	}
	return request
}

// auto.create.topics.enable: an unknown valid name is created with the
// broker's defaults and answered LEADER_NOT_AVAILABLE meanwhile; an
// invalid name is INVALID_TOPIC_EXCEPTION; an internal one is not created
// (rule no-auto-create-internal); a known topic is answered as always.
func TestMetadataAutoCreatesTopics(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0, 1)
	backend.cluster.Config.AutoCreateTopics = true
	backend.cluster.Config.DefaultPartitions, backend.cluster.Config.DefaultReplicationFactor = 3, 2
	h := newTestHandler(t, backend)
	for _, version := range testVersions(t, 3) {
		backend.autoCreated = nil
		response := roundTrip(t, h, metadataFor(version, true, "orders", "fresh", "bad name!", "__consumer_offsets")).(*kmsg.MetadataResponse)
		want := []int16{0, kerr.LeaderNotAvailable.Code, kerr.InvalidTopicException.Code, kerr.UnknownTopicOrPartition.Code}
		for i, topic := range response.Topics {
			if topic.ErrorCode != want[i] {
				t.Errorf("v%d: %s answered %d, want %d", version, *topic.Topic, topic.ErrorCode, want[i])
			}
		}
		if len(backend.autoCreated) != 1 {
			t.Fatalf("v%d: auto-created %+v, want fresh alone", version, backend.autoCreated)
		}
		created := backend.autoCreated[0]
		if created.Name != "fresh" || created.Partitions != 3 || created.ReplicationFactor != 2 || created.Config.ReplicationFactor != 2 {
			t.Errorf("v%d: auto-created %+v, want fresh with 3 partitions of 2 replicas", version, created)
		}
	}
}

// A v4+ request that does not allow it, or a broker with auto creation off,
// creates nothing: the topic is UNKNOWN_TOPIC_OR_PARTITION. Below v4 the
// request has no flag and Kafka treats it as allowing creation.
func TestMetadataAutoCreateNeedsBothSides(t *testing.T) {
	backend := newFakeBackend()
	h := newTestHandler(t, backend)
	for _, version := range testVersions(t, 3) {
		for _, brokerOn := range []bool{false, true} {
			backend.cluster.Config.AutoCreateTopics = brokerOn
			backend.autoCreated = nil
			response := roundTrip(t, h, metadataFor(version, false, "fresh")).(*kmsg.MetadataResponse)
			created := brokerOn && version < 4
			if got := len(backend.autoCreated) == 1; got != created {
				t.Errorf("v%d broker on %t, request not allowing: created %t, want %t", version, brokerOn, got, created)
			}
			if !created && response.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("v%d: not created but answered %d", version, response.Topics[0].ErrorCode)
			}
		}
	}
}
