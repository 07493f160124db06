package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v1-v6.
//
// Topics are deleted by the controller (controller.DeleteTopic); the
// Backend answers once the deletion is in the metadata log.
//
//   - v0-v5 name topics in TopicNames; v6 in Topics, by name or by topic
//     id (KIP-516). An id the controller does not know is UNKNOWN_TOPIC_ID;
//     an entry with both a name and an id, or with neither, is
//     INVALID_REQUEST, as in Kafka. The answer to a deletion by id names
//     the topic when this broker knows it.
//   - A topic named twice in one request (by name or by id) is
//     INVALID_REQUEST for each, as in Kafka.
//   - An internal topic (__consumer_offsets), by name or by id, is
//     INVALID_REQUEST: deleting it would drop every group's committed
//     offsets (Kafka's tools refuse it too).
//   - v4 is flexible; v5+ carries an ErrorMessage.
//   - v0 is not served (Kafka 4.0 dropped it, KIP-896).

func init() { register(20, 1, 6, (*Handler).handleDeleteTopics) }

// deleteTarget is one topic a DeleteTopics names.
type deleteTarget struct {
	name    *string
	topicID [16]byte
}

func (h *Handler) handleDeleteTopics(x *exchange) error {
	request := x.request.(*kmsg.DeleteTopicsRequest)
	targets := deleteTargets(request)
	if err := h.checkCounts(len(targets), len(targets)); err != nil {
		return err
	}
	named := make(map[string]int, len(targets))
	identified := make(map[metadata.TopicID]int, len(targets))
	for _, target := range targets {
		if target.name != nil {
			named[*target.name]++
		}
		identified[target.topicID]++
	}
	response := request.ResponseKind().(*kmsg.DeleteTopicsResponse)
	response.Topics = make([]kmsg.DeleteTopicsResponseTopic, len(targets))
	var topics []TopicRef
	var positions []int
	for i, target := range targets {
		entry := &response.Topics[i]
		*entry = kmsg.NewDeleteTopicsResponseTopic()
		entry.Topic, entry.TopicID = target.name, target.topicID
		id := metadata.TopicID(target.topicID)
		switch {
		case (target.name == nil) == id.IsZero():
			entry.ErrorCode = kerr.InvalidRequest.Code
		case target.name == nil && identified[id] > 1, target.name != nil && named[*target.name] > 1:
			entry.ErrorCode = kerr.InvalidRequest.Code
		case target.name != nil && InternalTopic(*target.name):
			entry.ErrorCode = kerr.InvalidRequest.Code // the groups' state lives there
		case target.name == nil && h.internalTopicID(id):
			entry.ErrorCode = kerr.InvalidRequest.Code
		case target.name == nil:
			if topic, ok := h.backend.TopicByID(id); ok {
				entry.Topic = kmsg.StringPtr(topic.Name)
			}
			topics = append(topics, TopicRef{ID: id})
			positions = append(positions, i)
		default:
			topics = append(topics, TopicRef{Name: *target.name})
			positions = append(positions, i)
		}
	}
	if len(topics) == 0 {
		x.respond(withDeleteMessages(response))
		return nil
	}
	h.backend.DeleteTopics(topics, h.config.ticks(request.TimeoutMillis), func(codes []int16) {
		if len(codes) != len(topics) {
			panic(fmt.Sprintf("wire: a Backend answered %d codes to a DeleteTopics of %d", len(codes), len(topics)))
		}
		for k, code := range codes {
			response.Topics[positions[k]].ErrorCode = code
		}
		x.respond(withDeleteMessages(response))
	})
	return nil
}

// deleteTargets lists the topics a request names, in request order.
func deleteTargets(request *kmsg.DeleteTopicsRequest) []deleteTarget {
	var targets []deleteTarget
	if request.Version < 6 {
		for i := range request.TopicNames {
			targets = append(targets, deleteTarget{name: &request.TopicNames[i]})
		}
		return targets
	}
	for _, topic := range request.Topics {
		targets = append(targets, deleteTarget{name: topic.Topic, topicID: topic.TopicID})
	}
	return targets
}

// withDeleteMessages names each error code, for the v5+ ErrorMessage.
func withDeleteMessages(response *kmsg.DeleteTopicsResponse) *kmsg.DeleteTopicsResponse {
	for i := range response.Topics {
		if code := response.Topics[i].ErrorCode; code != 0 {
			message := controller.CodeName(code)
			response.Topics[i].ErrorMessage = &message
		}
	}
	return response
}

// internalTopicID reports whether id is an internal topic's.
func (h *Handler) internalTopicID(id metadata.TopicID) bool {
	topic, ok := h.backend.TopicByID(id)
	return ok && InternalTopic(topic.Name)
}
