package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-v2.
//
// Preferred leader election (KIP-460): hand each partition's leadership
// back to its first replica, the admin call that spreads leaders again
// after failovers. The controller elects the preferred replica only if it
// is an eligible ISR member (controller.ElectPreferred), so the call can
// never promote a replica that misses committed records.
//
//   - v1+ ElectionType: only PREFERRED (0) is offered. UNCLEAN (1) or any
//     other type is INVALID_REQUEST, top-level and for every partition:
//     tide elects uncleanly only through a topic's
//     unclean.leader.election.enable, never on an admin's demand.
//   - Null topics (v0 allows it too) mean every partition of every topic.
//     An empty list (sarama sends one for a nil map) names none, and is
//     answered at once with no results, as Kafka does: it never reaches
//     the Backend, to whose controller no partitions means all of them.
//   - A partition named twice is elected and answered once, as Kafka's
//     controller reads the request into a set.
//   - v0 has no top-level error code: a top-level code from the controller
//     is given to every partition instead. v2 is flexible.

func init() { register(43, 0, 2, (*Handler).handleElectLeaders) }

const electionTypePreferred = 0

func (h *Handler) handleElectLeaders(x *exchange) error {
	request := x.request.(*kmsg.ElectLeadersRequest)
	partitions := h.electionPartitions(request)
	// Every partition (null topics) is bounded by the controller, which
	// answers INVALID_REQUEST above its limit; a request that names more
	// partitions than the wire's limit closes the connection.
	if request.Topics != nil {
		if err := h.checkCounts(len(request.Topics), len(partitions)); err != nil {
			return err
		}
	}
	response := request.ResponseKind().(*kmsg.ElectLeadersResponse)
	if request.ElectionType != electionTypePreferred {
		refusal := controller.ElectLeadersResponse{ErrorCode: kerr.InvalidRequest.Code}
		for _, tp := range partitions {
			refusal.Results = append(refusal.Results, controller.ElectionResult{TopicPartition: tp, ErrorCode: kerr.InvalidRequest.Code})
		}
		fillElectLeaders(response, refusal, "tide offers only PREFERRED leader elections")
		x.respond(response)
		return nil
	}
	if len(partitions) == 0 {
		x.respond(response)
		return nil
	}
	h.backend.ElectLeaders(partitions, h.config.ticks(request.TimeoutMillis), func(answer controller.ElectLeadersResponse) {
		if answer.ErrorCode == 0 && len(answer.Results) != len(partitions) {
			panic(fmt.Sprintf("wire: a Backend answered %d partitions to an ElectLeaders of %d", len(answer.Results), len(partitions)))
		}
		if answer.ErrorCode != 0 && len(answer.Results) == 0 {
			for _, tp := range partitions {
				answer.Results = append(answer.Results, controller.ElectionResult{TopicPartition: tp, ErrorCode: answer.ErrorCode})
			}
		}
		fillElectLeaders(response, answer, "")
		x.respond(response)
	})
	return nil
}

// electionPartitions lists the partitions a request names, each once, or
// every partition when it names no topics (null).
func (h *Handler) electionPartitions(request *kmsg.ElectLeadersRequest) []metadata.TopicPartition {
	var partitions []metadata.TopicPartition
	if request.Topics == nil {
		for _, name := range h.backend.TopicNames() {
			topic, _ := h.backend.Topic(name)
			for _, state := range topic.Partitions {
				partitions = append(partitions, state.TopicPartition)
			}
		}
		return partitions
	}
	seen := map[metadata.TopicPartition]bool{}
	for _, topic := range request.Topics {
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition}
			if !seen[tp] {
				seen[tp] = true
				partitions = append(partitions, tp)
			}
		}
	}
	return partitions
}

// fillElectLeaders writes the results, grouped by topic in the order they
// come; message, if set, goes with every partition's error.
func fillElectLeaders(response *kmsg.ElectLeadersResponse, answer controller.ElectLeadersResponse, message string) {
	response.ErrorCode = answer.ErrorCode
	for _, result := range answer.Results {
		if n := len(response.Topics); n == 0 || response.Topics[n-1].Topic != result.Topic {
			topic := kmsg.NewElectLeadersResponseTopic()
			topic.Topic = result.Topic
			response.Topics = append(response.Topics, topic)
		}
		entry := kmsg.NewElectLeadersResponseTopicPartition()
		entry.Partition, entry.ErrorCode = result.Partition, result.ErrorCode
		if result.ErrorCode != 0 {
			text := message
			if text == "" {
				text = controller.CodeName(result.ErrorCode)
			}
			entry.ErrorMessage = &text
		}
		topic := &response.Topics[len(response.Topics)-1]
		topic.Partitions = append(topic.Partitions, entry)
	}
}
