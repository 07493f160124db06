package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-v9.
//
// A group's committed offsets, from the group coordinator's state as of
// its last committed record (Backend.Group).
//
//   - v1 reads __consumer_offsets (v0 was ZooKeeper's; tide answers it the
//     same way); v2+ a null topic list means every partition with an
//     offset, and adds a top-level code; v5 answers the committed leader
//     epoch (KIP-320); v6 is flexible; v7 adds require_stable (KIP-447);
//     v8+ names several groups, each with its own code; v9 carries the
//     KIP-848 member id and epoch.
//   - Groups of one request may live on different coordinators: v8+ is
//     split by coordinator and the answers merged (splitByCoordinator).
//   - A group whose coordinator cannot take it gets its code: at v8+ in
//     its group entry, below at the top level (v2+) and in every
//     partition asked for, offset -1.

func init() { register(9, 0, 9, (*Handler).handleOffsetFetch) }

func (h *Handler) handleOffsetFetch(x *exchange) error {
	request := x.request.(*kmsg.OffsetFetchRequest)
	topics, partitions := len(request.Topics), 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	for _, group := range request.Groups {
		topics += len(group.Topics)
		for _, topic := range group.Topics {
			partitions += len(topic.Partitions)
		}
	}
	if err := h.checkCounts(max(topics, len(request.Groups)), partitions); err != nil {
		return err
	}
	if request.Version < 8 {
		h.serveGroup(x, request.Group, func(code int16) kmsg.Response { return offsetFetchFailed(request, code) })
		return nil
	}
	response := request.ResponseKind().(*kmsg.OffsetFetchResponse)
	groups := make([]string, len(request.Groups))
	for i, group := range request.Groups {
		groups[i] = group.Group
	}
	splitByCoordinator(h, x, groupSplit[kmsg.OffsetFetchResponseGroup]{
		groups: groups,
		request: func(indexes []int) kmsg.Request {
			part := *request
			part.Groups = pick(request.Groups, indexes)
			return &part
		},
		parts: func(answer kmsg.Response) []kmsg.OffsetFetchResponseGroup {
			if fetched, ok := answer.(*kmsg.OffsetFetchResponse); ok {
				return fetched.Groups
			}
			return nil
		},
		failed: func(index int, code int16) kmsg.OffsetFetchResponseGroup {
			entry := kmsg.NewOffsetFetchResponseGroup()
			entry.Group, entry.ErrorCode = groups[index], code
			return entry
		},
		respond: func(parts []kmsg.OffsetFetchResponseGroup) {
			response.Groups = parts
			x.respond(response)
		},
	})
	return nil
}

// offsetFetchFailed is the answer to a single-group OffsetFetch (v0-v7)
// its coordinator could not take: the code at the top level (v2+) and in
// every partition asked for, with offset and leader epoch -1.
func offsetFetchFailed(request *kmsg.OffsetFetchRequest, code int16) kmsg.Response {
	response := request.ResponseKind().(*kmsg.OffsetFetchResponse)
	response.ErrorCode = code
	for _, topic := range request.Topics {
		entry := kmsg.NewOffsetFetchResponseTopic()
		entry.Topic = topic.Topic
		for _, partition := range topic.Partitions {
			answer := kmsg.NewOffsetFetchResponseTopicPartition()
			answer.Partition, answer.Offset, answer.LeaderEpoch, answer.ErrorCode = partition, -1, -1, code
			entry.Partitions = append(entry.Partitions, answer)
		}
		response.Topics = append(response.Topics, entry)
	}
	return response
}
