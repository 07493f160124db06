package wire

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createTopic(name string, partitions int32, replicationFactor int16, configs map[string]string) kmsg.CreateTopicsRequestTopic {
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, replicationFactor
	for name, value := range configs {
		config := kmsg.NewCreateTopicsRequestTopicConfig()
		config.Name, config.Value = name, kmsg.StringPtr(value)
		topic.Configs = append(topic.Configs, config)
	}
	return topic
}

func TestCreateTopics(t *testing.T) {
	for _, version := range testVersions(t, 19) {
		backend := newFakeBackend()
		backend.addTopic("taken", 1, 0)
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrCreateTopicsRequest()
		request.Version, request.TimeoutMillis = version, 3000
		assigned := createTopic("assigned", 1, 1, nil)
		assigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
		request.Topics = []kmsg.CreateTopicsRequestTopic{
			createTopic("orders", 3, 2, map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}),
			createTopic("taken", 1, 1, nil),
			createTopic("odd", 1, 1, map[string]string{"retention.ms": "soon"}),
			assigned,
			createTopic("twice", 1, 1, nil), createTopic("twice", 1, 1, nil),
		}
		if version >= 4 {
			request.Topics = append(request.Topics, createTopic("defaults", -1, -1, nil))
		}
		response := roundTrip(t, h, request).(*kmsg.CreateTopicsResponse)
		want := []int16{0, kerr.TopicAlreadyExists.Code, kerr.InvalidConfig.Code, kerr.InvalidReplicaAssignment.Code,
			kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0}
		for i, topic := range response.Topics {
			if topic.ErrorCode != want[i] {
				t.Fatalf("v%d: topic %s error %d, want %d", version, topic.Topic, topic.ErrorCode, want[i])
			}
		}
		created := backend.topics["orders"]
		if created == nil || len(created.partitions) != 3 || created.config.MinInsyncReplicas != 2 || !created.config.UncleanLeaderElection {
			t.Fatalf("v%d: orders created as %+v", version, created)
		}
		if sent := backend.createTopics[0]; sent.TimeoutTicks != 3000 || sent.ValidateOnly {
			t.Fatalf("v%d: backend got %+v", version, sent)
		}
		// Every config travels to the controller, which writes them as
		// config records; a refused one is named in the message.
		if sent := backend.createTopics[0].Topics[0].Configs; sent["unclean.leader.election.enable"] != "true" || len(sent) != 2 {
			t.Fatalf("v%d: configs sent %v", version, sent)
		}
		if odd := response.Topics[2]; version >= 1 && (odd.ErrorMessage == nil || !strings.Contains(*odd.ErrorMessage, "retention.ms")) {
			t.Fatalf("v%d: odd answered %v", version, odd.ErrorMessage)
		}
		if version >= 5 {
			orders := response.Topics[0]
			if orders.NumPartitions != 3 || orders.ReplicationFactor != 2 || len(orders.Configs) == 0 {
				t.Fatalf("v%d: orders answered %+v", version, orders)
			}
		}
		if version >= 4 && backend.topics["defaults"] == nil {
			t.Fatalf("v%d: defaults topic not created from num.partitions and default.replication.factor", version)
		}
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	backend := newFakeBackend()
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version, request.ValidateOnly = 7, true
	request.Topics = []kmsg.CreateTopicsRequestTopic{createTopic("orders", 3, 1, nil), createTopic("wide", 1, 3, nil)}
	response := roundTrip(t, h, request).(*kmsg.CreateTopicsResponse)
	if response.Topics[0].ErrorCode != 0 || response.Topics[1].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("codes %d %d", response.Topics[0].ErrorCode, response.Topics[1].ErrorCode)
	}
	if len(backend.topics) != 0 || !backend.createTopics[0].ValidateOnly {
		t.Fatalf("validate-only created topics")
	}
}

func TestCreateTopicsBoundsPartitionsPerRequest(t *testing.T) {
	backend := newFakeBackend()
	config := testConfig()
	config.MaxTopicsPerRequest, config.MaxPartitionsPerRequest = 3, 5
	h, err := New(config, backend)
	if err != nil {
		t.Fatal(err)
	}
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version = 7
	request.Topics = []kmsg.CreateTopicsRequestTopic{createTopic("a", 3, 1, nil), createTopic("b", 3, 1, nil), createTopic("c", 2, 1, nil)}
	response := roundTrip(t, h, request).(*kmsg.CreateTopicsResponse)
	for i, want := range []int16{0, kerr.InvalidPartitions.Code, 0} {
		if got := response.Topics[i].ErrorCode; got != want {
			t.Fatalf("topic %s: error %d, want %d", response.Topics[i].Topic, got, want)
		}
	}
}

// TestCreateTopicsRefusalsSayWhy: a refused topic's message says why in
// Kafka's words, not only the code's name (a user once saw a bare
// INVALID_REPLICATION_FACTOR and had to guess).
func TestCreateTopicsRefusalsSayWhy(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("taken", 1, 0)
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version, request.TimeoutMillis = 7, 3000
	request.Topics = []kmsg.CreateTopicsRequestTopic{
		createTopic("wide", 1, 5, nil), createTopic("taken", 1, 1, nil), createTopic("many", 1000, 1, nil),
	}
	response := roundTrip(t, h, request).(*kmsg.CreateTopicsResponse)
	want := []string{
		"The target replication factor of 5 cannot be reached because only 2 broker(s) are registered.",
		"Topic 'taken' already exists.",
		"Number of partitions must be 1 to",
	}
	for i, topic := range response.Topics {
		if topic.ErrorCode == 0 || topic.ErrorMessage == nil || !strings.Contains(*topic.ErrorMessage, want[i]) {
			t.Errorf("topic %s: code %d, message %v; want %q", topic.Topic, topic.ErrorCode, topic.ErrorMessage, want[i])
		}
	}
}
