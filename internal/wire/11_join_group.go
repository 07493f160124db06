package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-v9.
//
// A member joins a classic consumer group; the group coordinator
// (internal/group, through Backend.Group) decides everything: member ids,
// rebalances, the generation and the leader.
//
//   - v1 adds the rebalance timeout; v4+ a new member first gets
//     MEMBER_ID_REQUIRED with its id and joins again with it (KIP-394);
//     v5 adds group.instance.id, static membership (KIP-345); v6 is
//     flexible; v7 answers the protocol type; v8 carries a reason
//     (KIP-800); v9 may tell a static leader to skip the assignment.
//   - A request the coordinator cannot take (this broker is not, or no
//     longer, the coordinator: NOT_COORDINATOR; still loading:
//     COORDINATOR_LOAD_IN_PROGRESS) is answered with generation -1, an
//     empty member id and no members, as Kafka's error response.

func init() { register(11, 0, 9, (*Handler).handleJoinGroup) }

func (h *Handler) handleJoinGroup(x *exchange) error {
	request := x.request.(*kmsg.JoinGroupRequest)
	h.serveGroup(x, request.Group, func(code int16) kmsg.Response {
		response := request.ResponseKind().(*kmsg.JoinGroupResponse)
		response.ErrorCode, response.Generation = code, -1
		return response
	})
	return nil
}
