package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The internal topics. __consumer_offsets holds the consumer groups'
// metadata and committed offsets, written by the group coordinators only
// (Backend.Group); __transaction_state is reserved for the transaction
// coordinator to come. Clients may read them but never produce to them,
// create or delete them (Kafka's Topic.isInternal).
const (
	OffsetsTopic          = "__consumer_offsets"
	TransactionStateTopic = "__transaction_state"
)

// InternalTopic reports whether name is one of the internal topics.
func InternalTopic(name string) bool { return name == OffsetsTopic || name == TransactionStateTopic }

// NoGroupPartition is what Backend.GroupPartition answers while
// __consumer_offsets does not exist: every group has the same (unknown)
// coordinator.
const NoGroupPartition int32 = -1

// serveGroup hands a request naming one group to the Backend's coordinator
// of groupID and answers with the coordinator's response, or, when the
// Backend gives a code instead (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, ...), with failed(code).
func (h *Handler) serveGroup(x *exchange, groupID string, failed func(code int16) kmsg.Response) {
	h.backend.Group(groupID, x.groupClient(), x.request, func(response kmsg.Response, code int16) {
		if code == 0 && response == nil {
			code = kerr.UnknownServerError.Code
		}
		if code != 0 {
			response = failed(code)
		}
		x.respond(response)
	})
}

// groupSplit describes how to split a request naming several groups
// (OffsetFetch v8+, DescribeGroups, DeleteGroups) by coordinator and merge
// the answers; Part is one group's entry of the response.
type groupSplit[Part any] struct {
	// groups are the group ids the request names, in request order.
	groups []string
	// request returns the request naming only the groups at indexes (in
	// request order), for one coordinator.
	request func(indexes []int) kmsg.Request
	// parts returns a coordinator's response's entries, one per group of
	// its request, in that request's order.
	parts func(response kmsg.Response) []Part
	// failed is the entry of the group at index when its coordinator could
	// not be asked (code).
	failed func(index int, code int16) Part
	// respond answers with every group's entry, in request order.
	respond func(parts []Part)
}

// splitByCoordinator serves a request naming several groups: one request
// per coordinator (by Backend.GroupPartition, coordinators in order of
// their first group), each with only that coordinator's groups, as a group
// coordinator serves only the groups of its partition; the answers are
// merged into one response in the request's group order. A coordinator
// that answers a different number of entries than it was asked for is a
// broken Backend: its groups get UNKNOWN_SERVER_ERROR.
func splitByCoordinator[Part any](h *Handler, x *exchange, split groupSplit[Part]) {
	parts := make([]Part, len(split.groups))
	var order []int32
	byPartition := map[int32][]int{}
	for i, group := range split.groups {
		partition := h.backend.GroupPartition(group)
		if _, seen := byPartition[partition]; !seen {
			order = append(order, partition)
		}
		byPartition[partition] = append(byPartition[partition], i)
	}
	all := newGather(func() { split.respond(parts) })
	for _, partition := range order {
		indexes := byPartition[partition]
		answered := all.expect(func() {})
		h.backend.Group(split.groups[indexes[0]], x.groupClient(), split.request(indexes), func(response kmsg.Response, code int16) {
			var answers []Part
			if code == 0 && response != nil {
				answers = split.parts(response)
			}
			if code == 0 && len(answers) != len(indexes) {
				code = kerr.UnknownServerError.Code
			}
			for k, i := range indexes {
				if code != 0 {
					parts[i] = split.failed(i, code)
				} else {
					parts[i] = answers[k]
				}
			}
			answered()
		})
	}
	all.release()
}

// pick returns the elements of all at indexes, in that order.
func pick[T any](all []T, indexes []int) []T {
	picked := make([]T, 0, len(indexes))
	for _, i := range indexes {
		picked = append(picked, all[i])
	}
	return picked
}

// groupClient is who sent the exchange's request.
func (x *exchange) groupClient() GroupClient {
	return GroupClient{ID: x.header.ClientID, Host: x.clientHost}
}
