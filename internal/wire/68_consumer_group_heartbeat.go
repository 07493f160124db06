package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v0-v1 (KIP-848, the consumer group protocol,
// Kafka 4.0's default for new consumers).
//
// One request is a KIP-848 member's join (member epoch 0), heartbeat, or
// leave (epoch -1, or -2 for a static member's temporary leave): it
// carries the member's subscription and the partitions it owns, and the
// answer its member epoch and the assignment it should own next, decided
// by the group coordinator (Backend.Group), which assigns on the server
// side and revokes a partition before it assigns it to another member.
// The answer leaves the coordinator only once what the heartbeat changed
// is committed to __consumer_offsets. v1 is KIP-1082: the client makes up
// its own member id, and subscriptions may be regular expressions
// (KIP-848's SubscribedTopicRegex). Both versions are flexible.
//
// A request the coordinator cannot take gets its code
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) with no assignment,
// as Kafka's error response; the client finds the coordinator again and
// resends its full state.

func init() { register(68, 0, 1, (*Handler).handleConsumerGroupHeartbeat) }

func (h *Handler) handleConsumerGroupHeartbeat(x *exchange) error {
	request := x.request.(*kmsg.ConsumerGroupHeartbeatRequest)
	owned := 0
	for _, topic := range request.Topics {
		owned += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.SubscribedTopicNames)+len(request.Topics), owned); err != nil {
		return err
	}
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		response.ErrorCode = code
		return response
	})
	return nil
}
