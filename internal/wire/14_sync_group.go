package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-v5.
//
// The leader of a classic group hands the coordinator its assignment and
// every member gets its share (Backend.Group). The coordinator answers only
// once the group's metadata record with the assignment is committed in
// __consumer_offsets (rule answer-after-commit), as Kafka answers after
// its append. v3 adds group.instance.id (KIP-345); v4 is flexible; v5
// carries the protocol type and name, which must match the group's. A
// request the coordinator cannot take gets its code and an empty
// assignment.

func init() { register(14, 0, 5, (*Handler).handleSyncGroup) }

func (h *Handler) handleSyncGroup(x *exchange) error {
	request := x.request.(*kmsg.SyncGroupRequest)
	if err := h.checkCounts(1, len(request.GroupAssignment)); err != nil {
		return err
	}
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.SyncGroupResponse)
		response.ErrorCode, response.MemberAssignment = code, []byte{}
		return response
	})
	return nil
}
