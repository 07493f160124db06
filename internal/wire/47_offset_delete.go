package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0.
//
// Deletes a group's committed offsets of some partitions (KIP-496), by
// tombstones the coordinator writes to __consumer_offsets
// (Backend.Group). An empty group, or one not subscribed to the topic,
// may lose them; a subscribed topic is GROUP_SUBSCRIBED_TO_TOPIC for each
// of its partitions. A request the coordinator cannot take gets its code
// at the top level and no topics, as Kafka's error response.

func init() { register(47, 0, 0, (*Handler).handleOffsetDelete) }

func (h *Handler) handleOffsetDelete(x *exchange) error {
	request := x.request.(*kmsg.OffsetDeleteRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.OffsetDeleteResponse)
		response.ErrorCode = code
		return response
	})
	return nil
}
