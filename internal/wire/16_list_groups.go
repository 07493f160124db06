package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-v5.
//
// The groups of every coordinator this broker hosts (Backend.ListGroups),
// as in Kafka, where each broker lists the __consumer_offsets partitions
// it leads: clients ask every broker and merge. v3 is flexible; v4 filters
// by state (KIP-518), v5 by type (KIP-848); the coordinators apply the
// filters. A coordinator that lost its partition meanwhile
// (NOT_COORDINATOR) is left out, its groups now listed by the new leader;
// any other code of a coordinator (still loading) is the answer's code.

func init() { register(16, 0, 5, (*Handler).handleListGroups) }

func (h *Handler) handleListGroups(x *exchange) error {
	request := x.request.(*kmsg.ListGroupsRequest)
	response := request.ResponseKind().(*kmsg.ListGroupsResponse)
	h.backend.ListGroups(request, func(answers []*kmsg.ListGroupsResponse) {
		for _, answer := range answers {
			switch {
			case answer.ErrorCode == kerr.NotCoordinator.Code:
			case answer.ErrorCode != 0:
				if response.ErrorCode == 0 {
					response.ErrorCode = answer.ErrorCode
				}
			default:
				response.Groups = append(response.Groups, answer.Groups...)
			}
		}
		x.respond(response)
	})
	return nil
}
