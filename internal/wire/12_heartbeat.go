package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-v4.
//
// A classic group member's liveness and its cue to rejoin
// (REBALANCE_IN_PROGRESS), decided by the group coordinator
// (Backend.Group). v3 adds group.instance.id (KIP-345); v4 is flexible. A
// request the coordinator cannot take gets its code (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS), on which clients find the coordinator
// again.

func init() { register(12, 0, 4, (*Handler).handleHeartbeat) }

func (h *Handler) handleHeartbeat(x *exchange) error {
	request := x.request.(*kmsg.HeartbeatRequest)
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.HeartbeatResponse)
		response.ErrorCode = code
		return response
	})
	return nil
}
