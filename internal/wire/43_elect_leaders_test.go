package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestElectLeaders(t *testing.T) {
	for _, version := range testVersions(t, 43) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 3, 1, 2)
		backend.topics["orders"].partitions[1].state.Leader = 2 // not the preferred leader
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrElectLeadersRequest()
		request.Version = version
		request.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0, 1}}, {Topic: "missing", Partitions: []int32{0}}}
		response := roundTrip(t, h, request).(*kmsg.ElectLeadersResponse)
		if response.ErrorCode != 0 || len(response.Topics) != 2 {
			t.Fatalf("v%d: %+v", version, response)
		}
		orders := response.Topics[0].Partitions
		if orders[0].ErrorCode != kerr.ElectionNotNeeded.Code || orders[1].ErrorCode != 0 || orders[0].ErrorMessage == nil {
			t.Fatalf("v%d: orders results %+v", version, orders)
		}
		if got := response.Topics[1].Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: missing error %d", version, got)
		}
		if p := backend.topics["orders"].partitions[1].state; p.Leader != 1 || p.LeaderEpoch != 4 {
			t.Fatalf("v%d: orders-1 leader %d epoch %d after the election", version, p.Leader, p.LeaderEpoch)
		}
	}
}

func TestElectLeadersAllAndUnclean(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("b", 1, 0)
	backend.addTopic("a", 2, 0)
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrElectLeadersRequest()
	request.Version = 2
	response := roundTrip(t, h, request).(*kmsg.ElectLeadersResponse) // null topics: every partition
	var seen []metadata.TopicPartition
	for _, topic := range response.Topics {
		for _, p := range topic.Partitions {
			seen = append(seen, tp(topic.Topic, p.Partition))
		}
	}
	if len(seen) != 3 || seen[0] != tp("a", 0) || seen[2] != tp("b", 0) {
		t.Fatalf("all partitions answered as %v", seen)
	}
	request.ElectionType = 1
	request.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	response = roundTrip(t, h, request).(*kmsg.ElectLeadersResponse)
	if response.ErrorCode != kerr.InvalidRequest.Code || response.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unclean election answered %+v", response)
	}
}

// An ElectLeaders naming no partitions (an empty topic list, as sarama
// sends for a nil map, or topics with no partitions) elects nothing and is
// answered with no results. It must not reach the Backend: tide's
// controller takes no partitions to mean all of them, and the answer for
// every partition to a request for none crashed the broker on wire's check
// that a Backend answers what was asked.
func TestElectLeadersNoPartitions(t *testing.T) {
	for _, version := range testVersions(t, 43) {
		for _, topics := range [][]kmsg.ElectLeadersRequestTopic{{}, {{Topic: "a", Partitions: []int32{}}}} {
			backend := &electAllWhenEmpty{fakeBackend: newFakeBackend()}
			backend.addTopic("a", 2, 0)
			h := newTestHandler(t, backend)
			request := kmsg.NewPtrElectLeadersRequest()
			request.Version, request.Topics = version, topics
			response := roundTrip(t, h, request).(*kmsg.ElectLeadersResponse)
			if response.ErrorCode != 0 || len(response.Topics) != 0 || backend.calls != 0 {
				t.Fatalf("v%d %v: %+v after %d Backend calls", version, topics, response, backend.calls)
			}
		}
	}
}

// electAllWhenEmpty answers an ElectLeaders of no partitions for every
// partition, as tide's controller does (quorum.ElectPreferredRequest).
type electAllWhenEmpty struct {
	*fakeBackend
	calls int
}

func (e *electAllWhenEmpty) ElectLeaders(partitions []metadata.TopicPartition, timeoutTicks int64, done func(controller.ElectLeadersResponse)) {
	e.calls++
	if len(partitions) == 0 {
		for _, name := range e.TopicNames() {
			topic, _ := e.Topic(name)
			for _, state := range topic.Partitions {
				partitions = append(partitions, state.TopicPartition)
			}
		}
	}
	e.fakeBackend.ElectLeaders(partitions, timeoutTicks, done)
}

// A partition named twice, in one topic entry or in two, is elected and
// answered once.
func TestElectLeadersDeduplicates(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 3, 1, 2)
	backend.topics["orders"].partitions[0].state.Leader = 2
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrElectLeadersRequest()
	request.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0, 0}}, {Topic: "orders", Partitions: []int32{0}}}
	response := roundTrip(t, h, request).(*kmsg.ElectLeadersResponse)
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 || response.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("results %+v, want orders-0 elected once", response.Topics)
	}
	if p := backend.topics["orders"].partitions[0].state; p.Leader != 1 || p.LeaderEpoch != 4 {
		t.Fatalf("orders-0 leader %d epoch %d, want one election", p.Leader, p.LeaderEpoch)
	}
}
