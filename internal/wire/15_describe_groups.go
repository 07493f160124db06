package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-v5.
//
// Each group's state, protocol and members with their metadata and
// assignments, from its coordinator (Backend.Group). The groups of one
// request may live on different coordinators: the request is split by
// coordinator and the answers merged in request order
// (splitByCoordinator). v1 adds throttling; v3 authorized operations
// (KIP-430); v4 group.instance.id; v5 is flexible. A group whose
// coordinator cannot take it gets its code, no state and no members, as
// Kafka's per-group error.

func init() { register(15, 0, 5, (*Handler).handleDescribeGroups) }

func (h *Handler) handleDescribeGroups(x *exchange) error {
	request := x.request.(*kmsg.DescribeGroupsRequest)
	if err := h.checkCounts(len(request.Groups), len(request.Groups)); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.DescribeGroupsResponse)
	splitByCoordinator(h, x, groupSplit[kmsg.DescribeGroupsResponseGroup]{
		groups: request.Groups,
		request: func(indexes []int) kmsg.Request {
			part := *request
			part.Groups = pick(request.Groups, indexes)
			return &part
		},
		parts: func(answer kmsg.Response) []kmsg.DescribeGroupsResponseGroup {
			if described, ok := answer.(*kmsg.DescribeGroupsResponse); ok {
				return described.Groups
			}
			return nil
		},
		failed: func(index int, code int16) kmsg.DescribeGroupsResponseGroup {
			entry := kmsg.NewDescribeGroupsResponseGroup()
			entry.Group, entry.ErrorCode = request.Groups[index], code
			return entry
		},
		respond: func(parts []kmsg.DescribeGroupsResponseGroup) {
			response.Groups = parts
			x.respond(response)
		},
	})
	return nil
}
