package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-v5.
//
// Members leave a classic group, which then rebalances; decided by the
// group coordinator (Backend.Group). v3+ batches members, each with
// group.instance.id (KIP-345) and its own code; v4 is flexible; v5 carries
// a reason (KIP-800). A request the coordinator cannot take gets its code
// at the top level and no members, as Kafka's error response.

func init() { register(13, 0, 5, (*Handler).handleLeaveGroup) }

func (h *Handler) handleLeaveGroup(x *exchange) error {
	request := x.request.(*kmsg.LeaveGroupRequest)
	if err := h.checkCounts(1, len(request.Members)); err != nil {
		return err
	}
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.LeaveGroupResponse)
		response.ErrorCode = code
		return response
	})
	return nil
}
