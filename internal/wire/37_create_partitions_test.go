package wire

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The handler refuses duplicates itself (one answer per duplicated name,
// as Kafka gives), passes the rest to the Backend
// with null and explicit assignments told apart, and explains the
// Backend's refusals, in every served version.
func TestCreatePartitions(t *testing.T) {
	for _, version := range testVersions(t, 37) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 0)
		backend.addTopic("events", 2, 0)
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrCreatePartitionsRequest()
		request.Version, request.TimeoutMillis = version, 5000
		add := func(name string, count int32, assignment ...[]int32) {
			topic := kmsg.NewCreatePartitionsRequestTopic()
			topic.Topic, topic.Count = name, count
			for _, replicas := range assignment {
				item := kmsg.NewCreatePartitionsRequestTopicAssignment()
				item.Replicas = replicas
				topic.Assignment = append(topic.Assignment, item)
			}
			request.Topics = append(request.Topics, topic)
		}
		add("orders", 3)
		add("events", 2)
		add("missing", 4)
		add("twice", 2)
		add("twice", 3)
		response := roundTrip(t, h, request).(*kmsg.CreatePartitionsResponse)
		want := []int16{0, kerr.InvalidPartitions.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code}
		if len(response.Topics) != len(want) {
			t.Fatalf("v%d: %d answers, want %d", version, len(response.Topics), len(want))
		}
		for i, topic := range response.Topics {
			if topic.Topic != request.Topics[i].Topic || topic.ErrorCode != want[i] {
				t.Fatalf("v%d: entry %d is %s %d, want %s %d", version, i, topic.Topic, topic.ErrorCode, request.Topics[i].Topic, want[i])
			}
			if (topic.ErrorCode != 0) != (topic.ErrorMessage != nil) {
				t.Fatalf("v%d: entry %d: code %d with message %v", version, i, topic.ErrorCode, topic.ErrorMessage)
			}
		}
		if message := *response.Topics[1].ErrorMessage; !strings.Contains(message, "has 2 partitions") {
			t.Fatalf("v%d: the no-increase refusal says %q", version, message)
		}
		if got := len(backend.topics["orders"].partitions); got != 3 {
			t.Fatalf("v%d: orders has %d partitions, want 3", version, got)
		}
		forwarded := backend.grows[0]
		wantForwarded := []controller.CreatePartitionsRequest{{Topic: "orders", Count: 3}, {Topic: "events", Count: 2}, {Topic: "missing", Count: 4}}
		if !reflect.DeepEqual(forwarded.Topics, wantForwarded) || forwarded.TimeoutTicks != h.config.ticks(5000) {
			t.Fatalf("v%d: forwarded %+v", version, forwarded)
		}

		// An explicit assignment reaches the Backend as given; ValidateOnly
		// adds nothing.
		request.Topics, request.ValidateOnly = nil, true
		add("orders", 5, []int32{1}, []int32{2, 1})
		response = roundTrip(t, h, request).(*kmsg.CreatePartitionsResponse)
		if response.Topics[0].ErrorCode != 0 || len(backend.topics["orders"].partitions) != 3 {
			t.Fatalf("v%d: validate-only answered %d and left %d partitions", version, response.Topics[0].ErrorCode, len(backend.topics["orders"].partitions))
		}
		last := backend.grows[len(backend.grows)-1]
		if !last.ValidateOnly || !reflect.DeepEqual(last.Topics[0].Assignments, [][]metadata.BrokerID{{1}, {2, 1}}) {
			t.Fatalf("v%d: forwarded %+v", version, last)
		}
	}
}

// One request adds at most MaxPartitionsPerRequest partitions: the topic
// that would go over is refused before it reaches the controller.
func TestCreatePartitionsBoundsTheRequest(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	backend.addTopic("events", 1, 0)
	config := testConfig()
	config.MaxTopicsPerRequest, config.MaxPartitionsPerRequest = 10, 10
	h, err := New(config, backend)
	if err != nil {
		t.Fatal(err)
	}
	request := kmsg.NewPtrCreatePartitionsRequest()
	for _, name := range []string{"orders", "events"} {
		topic := kmsg.NewCreatePartitionsRequestTopic()
		topic.Topic, topic.Count = name, 7
		request.Topics = append(request.Topics, topic)
	}
	response := roundTrip(t, h, request).(*kmsg.CreatePartitionsResponse)
	if response.Topics[0].ErrorCode != 0 || response.Topics[1].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("answered %d and %d", response.Topics[0].ErrorCode, response.Topics[1].ErrorCode)
	}
	if len(backend.grows) != 1 || len(backend.grows[0].Topics) != 1 {
		t.Fatalf("forwarded %+v", backend.grows)
	}
}
