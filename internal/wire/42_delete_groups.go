package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-v2.
//
// Deletes empty groups and their committed offsets, by tombstones each
// group's coordinator writes to __consumer_offsets (Backend.Group); a
// group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND. The groups of one request may live on different
// coordinators: the request is split by coordinator and the answers
// merged in request order (splitByCoordinator). v2 is flexible.

func init() { register(42, 0, 2, (*Handler).handleDeleteGroups) }

func (h *Handler) handleDeleteGroups(x *exchange) error {
	request := x.request.(*kmsg.DeleteGroupsRequest)
	if err := h.checkCounts(len(request.Groups), len(request.Groups)); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.DeleteGroupsResponse)
	splitByCoordinator(h, x, groupSplit[kmsg.DeleteGroupsResponseGroup]{
		groups: request.Groups,
		request: func(indexes []int) kmsg.Request {
			part := *request
			part.Groups = pick(request.Groups, indexes)
			return &part
		},
		parts: func(answer kmsg.Response) []kmsg.DeleteGroupsResponseGroup {
			if deleted, ok := answer.(*kmsg.DeleteGroupsResponse); ok {
				return deleted.Groups
			}
			return nil
		},
		failed: func(index int, code int16) kmsg.DeleteGroupsResponseGroup {
			entry := kmsg.NewDeleteGroupsResponseGroup()
			entry.Group, entry.ErrorCode = request.Groups[index], code
			return entry
		},
		respond: func(parts []kmsg.DeleteGroupsResponseGroup) {
			response.Groups = parts
			x.respond(response)
		},
	})
	return nil
}
