package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-v1 (KIP-848).
//
// Each KIP-848 consumer group's state, group epoch, target assignment
// epoch, assignor and members, each with its member epoch, subscription,
// current and target assignment, from the group's coordinator
// (Backend.Group); a classic or unknown group is GROUP_ID_NOT_FOUND. The
// groups of one request may live on different coordinators: the request
// is split by coordinator and the answers merged in request order
// (splitByCoordinator), as DescribeGroups. v1 adds each member's type
// (KIP-1099: consumer or classic protocol). A group whose coordinator
// cannot take it gets that code and nothing else.

func init() { register(69, 0, 1, (*Handler).handleConsumerGroupDescribe) }

func (h *Handler) handleConsumerGroupDescribe(x *exchange) error {
	request := x.request.(*kmsg.ConsumerGroupDescribeRequest)
	if err := h.checkCounts(len(request.Groups), len(request.Groups)); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	splitByCoordinator(h, x, groupSplit[kmsg.ConsumerGroupDescribeResponseGroup]{
		groups: request.Groups,
		request: func(indexes []int) kmsg.Request {
			part := *request
			part.Groups = pick(request.Groups, indexes)
			return &part
		},
		parts: func(answer kmsg.Response) []kmsg.ConsumerGroupDescribeResponseGroup {
			if described, ok := answer.(*kmsg.ConsumerGroupDescribeResponse); ok {
				return described.Groups
			}
			return nil
		},
		failed: func(index int, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
			entry := kmsg.NewConsumerGroupDescribeResponseGroup()
			entry.Group, entry.ErrorCode = request.Groups[index], code
			return entry
		},
		respond: func(parts []kmsg.ConsumerGroupDescribeResponseGroup) {
			response.Groups = parts
			x.respond(response)
		},
	})
	return nil
}
