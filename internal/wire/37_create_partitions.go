package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-v3 (KIP-195).
//
// A topic grows to Count partitions; the controller
// (controller.CreatePartitions) places the new replicas, or checks an
// explicit assignment whole, and decides the codes: a count that is not an
// increase is INVALID_PARTITIONS, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION. The Backend forwards the request and answers
// once this broker's metadata has the new partitions, so a client that
// grew a topic finds them in its next Metadata; ValidateOnly only checks.
//
//   - A topic named more than once in one request gets one answer,
//     INVALID_REQUEST, at its first position, and none of its entries is
//     carried out: Kafka's controller answers each duplicated name once.
//   - One request adds at most Config.MaxPartitionsPerRequest partitions:
//     a topic that would go over is INVALID_PARTITIONS, so one request
//     cannot make the controller write an unbounded record batch.
//   - An assignment list of a wrong length, or naming a broker twice or one
//     that cannot host a replica, is INVALID_REPLICA_ASSIGNMENT, and none of
//     that topic's partitions is added.
//   - tide keeps no controller mutation quota (KIP-599), so it never
//     answers THROTTLING_QUOTA_EXCEEDED; ThrottleMillis is 0.
//   - v2+ is flexible; every served version carries an ErrorMessage.

func init() { register(37, 0, 3, (*Handler).handleCreatePartitions) }

func (h *Handler) handleCreatePartitions(x *exchange) error {
	request := x.request.(*kmsg.CreatePartitionsRequest)
	if err := h.checkCounts(len(request.Topics), len(request.Topics)); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.CreatePartitionsResponse)
	named := make(map[string]int, len(request.Topics))
	for _, topic := range request.Topics {
		named[topic.Topic]++
	}
	answered := make(map[string]bool, len(request.Topics))
	forward := CreatePartitionsRequest{TimeoutTicks: h.config.ticks(request.TimeoutMillis), ValidateOnly: request.ValidateOnly}
	var positions []int // response position of each forwarded topic
	added := 0          // partitions the forwarded topics add, bounded by MaxPartitionsPerRequest
	for _, topic := range request.Topics {
		if answered[topic.Topic] {
			continue // a duplicate, answered at its first position
		}
		answered[topic.Topic] = true
		response.Topics = append(response.Topics, kmsg.NewCreatePartitionsResponseTopic())
		i := len(response.Topics) - 1
		entry := &response.Topics[i]
		entry.Topic = topic.Topic
		grow := createPartitionsRequest(topic)
		adds := 0
		if current, ok := h.backend.Topic(topic.Topic); ok {
			adds = max(grow.Count-len(current.Partitions), 0)
		}
		switch {
		case named[topic.Topic] > 1:
			entry.ErrorCode, entry.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("topic "+topic.Topic+" is named more than once")
			continue
		case adds > h.config.MaxPartitionsPerRequest-added:
			message := fmt.Sprintf("one request may add at most %d partitions", h.config.MaxPartitionsPerRequest)
			entry.ErrorCode, entry.ErrorMessage = kerr.InvalidPartitions.Code, &message
			continue
		}
		added += adds
		forward.Topics = append(forward.Topics, grow)
		positions = append(positions, i)
	}
	if len(forward.Topics) == 0 {
		x.respond(response)
		return nil
	}
	h.backend.CreatePartitions(forward, func(codes []int16) {
		if len(codes) != len(forward.Topics) {
			panic(fmt.Sprintf("wire: a Backend answered %d codes to a CreatePartitions of %d", len(codes), len(forward.Topics)))
		}
		for k, code := range codes {
			entry := &response.Topics[positions[k]]
			entry.ErrorCode = code
			if code != 0 {
				entry.ErrorMessage = kmsg.StringPtr(h.createPartitionsMessage(forward.Topics[k], code))
			}
		}
		x.respond(response)
	})
	return nil
}

// createPartitionsRequest translates one topic; a null assignment (the
// controller places the replicas) stays nil, told apart from an empty one.
func createPartitionsRequest(topic kmsg.CreatePartitionsRequestTopic) controller.CreatePartitionsRequest {
	grow := controller.CreatePartitionsRequest{Topic: topic.Topic, Count: int(topic.Count)}
	if topic.Assignment == nil {
		return grow
	}
	grow.Assignments = make([][]metadata.BrokerID, len(topic.Assignment))
	for i, assignment := range topic.Assignment {
		replicas := make([]metadata.BrokerID, len(assignment.Replicas))
		for j, id := range assignment.Replicas {
			replicas[j] = metadata.BrokerID(id)
		}
		grow.Assignments[i] = replicas
	}
	return grow
}

// createPartitionsMessage explains a refusal, naming the topic's current
// count where that is the reason.
func (h *Handler) createPartitionsMessage(grow controller.CreatePartitionsRequest, code int16) string {
	if code == kerr.InvalidPartitions.Code {
		if topic, ok := h.backend.Topic(grow.Topic); ok && grow.Count <= len(topic.Partitions) {
			return fmt.Sprintf("topic %s has %d partitions: a topic only grows, and %d is no increase",
				grow.Topic, len(topic.Partitions), grow.Count)
		}
		return fmt.Sprintf("a topic holds 1 to %d partitions", controller.MaxPartitionsPerTopic)
	}
	return controller.CodeName(code)
}
