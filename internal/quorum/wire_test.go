package quorum

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tidelog/tide/internal/codec"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

func sampleRequests() []Request {
	tp := metadata.TopicPartition{Topic: "events", Partition: 2}
	return []Request{
		{ID: 1, From: 3, Register: &RegisterRequest{Incarnation: "b3-9", PreviousEpoch: 41, Endpoint: "127.0.0.1:9094"}},
		{ID: 2, From: 3, Heartbeat: &HeartbeatRequest{Epoch: 41, AppliedOffset: -1, WantShutdown: true, MaxEntries: 500}},
		{ID: 3, From: 1, AlterPartition: &controller.AlterPartitionRequest{BrokerEpoch: 7, Partitions: []controller.AlterPartitionItem{
			{TopicPartition: tp, LeaderEpoch: 4, PartitionEpoch: 9, NewISR: []controller.BrokerIDAndEpoch{{ID: 1, Epoch: 7}, {ID: 2, Epoch: -1}}}}}},
		{ID: 4, From: 1, CreateTopic: &controller.CreateTopicRequest{Name: "events", Partitions: 3, ReplicationFactor: 3,
			Config: metadata.TopicConfig{MinInsyncReplicas: 2, UncleanLeaderElection: true}}},
		{ID: 4, From: 1, CreateTopic: &controller.CreateTopicRequest{Name: "logs", Partitions: 1, ReplicationFactor: 1,
			Config: metadata.TopicConfig{MinInsyncReplicas: 1}, Configs: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}}},
		{ID: 5, From: 1, DeleteTopic: &DeleteTopicRequest{Name: "old"}},
		{ID: 6, From: 2, CreatePartitions: &controller.CreatePartitionsRequest{Topic: "events", Count: 5}},
		{ID: 7, From: 2, CreatePartitions: &controller.CreatePartitionsRequest{Topic: "events", Count: 3,
			Assignments: [][]metadata.BrokerID{{1, 2}, {2, 3}}}},
		{ID: 8, From: 2, CreatePartitions: &controller.CreatePartitionsRequest{Topic: "events", Count: 3, Assignments: [][]metadata.BrokerID{}}},
		{ID: 5, From: 1, DeleteTopic: &DeleteTopicRequest{ID: metadata.TopicID{3, 15: 7}}},
		{ID: 6, From: 1, ElectPreferred: &ElectPreferredRequest{Partitions: []metadata.TopicPartition{tp}}},
		{ID: 7, From: 2, AllocateProducerIDs: &AllocateProducerIDsRequest{BrokerEpoch: 12}},
		{ID: 9, From: 3, Reassign: &controller.ReassignRequest{TopicPartition: tp, Replicas: []metadata.BrokerID{4, 2, 3}}},
		{ID: 10, From: 3, Reassign: &controller.ReassignRequest{TopicPartition: tp}},
		{ID: 8, From: 2, FetchMetadata: &FetchMetadataRequest{Epoch: 12, AppliedOffset: 40, MaxEntries: 500, MaxWaitTicks: 50}},
		{ID: 9, From: 2, AlterConfigs: &controller.AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "logs"},
			Incremental: true, Changes: []controller.ConfigChange{{Key: "retention.ms", Value: "5"}, {Key: "cleanup.policy", Op: controller.ConfigDelete}}}},
	}
}

func sampleAnswers() []Answer {
	tp := metadata.TopicPartition{Topic: "events", Partition: 2}
	state := metadata.PartitionState{TopicPartition: tp, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1}, ELR: []metadata.BrokerID{},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 10}
	return []Answer{
		{ID: 1, To: 3, ControllerEpoch: 5, Leader: 2, ErrorCode: 41},
		{ID: 2, To: 3, ControllerEpoch: 5, Leader: 2, Register: &RegisterAnswer{Epoch: 77}},
		{ID: 3, To: 3, ControllerEpoch: 5, Leader: 2, Heartbeat: &HeartbeatAnswer{Fenced: true, Snapshot: []byte{1, 2, 3},
			Entries: []metadata.Entry{{Offset: 9, Record: metadata.UnfenceBroker{ID: 3, Epoch: 77}}, {Offset: 10, Record: metadata.DeleteTopic{Name: "x"}}}}},
		{ID: 4, To: 1, ControllerEpoch: 5, Leader: 2, AlterPartition: &controller.AlterPartitionResponse{
			Partitions: []controller.AlterPartitionResult{{TopicPartition: tp, Partition: state}}}},
		{ID: 5, To: 1, ControllerEpoch: 5, Leader: 2, ElectPreferred: &controller.ElectLeadersResponse{
			Results: []controller.ElectionResult{{TopicPartition: tp, ErrorCode: 84}}}},
		{ID: 6, To: 2, ControllerEpoch: 5, Leader: 2, ProducerIDs: &controller.ProducerIDBlock{FirstProducerID: 3000, Length: 1000}},
		{ID: 7, To: 2, ControllerEpoch: 5, Leader: 2, AlterConfigs: &AlterConfigsAnswer{Configs: map[string]string{"retention.ms": "5"}}},
		{ID: 8, To: 2, ControllerEpoch: 5, Leader: 2, ErrorCode: 40, AlterConfigs: &AlterConfigsAnswer{Message: "bad", Configs: map[string]string{}}},
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, request := range sampleRequests() {
		decoded, err := DecodeRequest(EncodeRequest(nil, request))
		if err != nil || !reflect.DeepEqual(decoded, request) {
			t.Errorf("%s came back as %+v, %v", request, decoded, err)
		}
	}
	for _, answer := range sampleAnswers() {
		decoded, err := DecodeAnswer(EncodeAnswer(nil, answer))
		if err != nil || !reflect.DeepEqual(decoded, answer) {
			t.Errorf("%+v came back as %+v, %v", answer, decoded, err)
		}
	}
	if _, err := DecodeRequest(EncodeRequest(nil, Request{ID: 1})); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("an empty request decoded: %v", err)
	}
}

// FuzzWire: bytes from the network never panic the decoders, and what they
// accept round-trips.
func FuzzWire(f *testing.F) {
	for _, request := range sampleRequests() {
		f.Add(EncodeRequest(nil, request))
	}
	for _, answer := range sampleAnswers() {
		f.Add(EncodeAnswer(nil, answer))
	}
	// A create-topic-with-configs that names no config: refused, since it
	// would come back as a plain create-topic (found by this target).
	f.Add([]byte("\x0100\v\x040000000\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if request, err := DecodeRequest(b); err == nil {
			again, err := DecodeRequest(EncodeRequest(nil, request))
			if err != nil || !reflect.DeepEqual(again, request) {
				t.Fatalf("request %+v did not round-trip: %v", request, err)
			}
		} else if !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		if answer, err := DecodeAnswer(b); err == nil {
			again, err := DecodeAnswer(EncodeAnswer(nil, answer))
			if err != nil || !reflect.DeepEqual(again, answer) {
				t.Fatalf("answer %+v did not round-trip: %v", answer, err)
			}
		} else if !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
