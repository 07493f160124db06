package wire

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments: v0 (KIP-455).
//
// The partitions being reassigned, each with its replicas (the target and
// the replicas being removed), the replicas being added and those being
// removed. Null topics list every one; named topics list their named
// partitions that are being reassigned and leave out the others, unknown
// topics and partitions included, as Kafka's controller does (it has no
// per-partition error code to give).
//
//   - Answered from this broker's metadata image rather than forwarded to
//     the controller: the image is the controller's committed log applied
//     in order, so it may lag a move decided a moment ago, never show one
//     that was not decided. A client that just moved a partition gets its
//     answer after this broker's image shows the move (AlterPartition-
//     Reassignments waits for that).
//   - Topics come in name order, partitions in number order. The version
//     is flexible.

func init() { register(46, 0, 0, (*Handler).handleListPartitionReassignments) }

func (h *Handler) handleListPartitionReassignments(x *exchange) error {
	request := x.request.(*kmsg.ListPartitionReassignmentsRequest)
	count := 0
	for _, topic := range request.Topics {
		count += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), count); err != nil {
		return err
	}
	var named map[string][]int32
	names := h.backend.TopicNames()
	if request.Topics != nil {
		named = map[string][]int32{}
		names = nil
		for _, topic := range request.Topics {
			if _, seen := named[topic.Topic]; !seen {
				names = append(names, topic.Topic)
			}
			named[topic.Topic] = append(named[topic.Topic], topic.Partitions...)
		}
	}
	response := request.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	for _, name := range slices.Sorted(slices.Values(names)) {
		topic, ok := h.backend.Topic(name)
		if !ok {
			continue
		}
		entry := kmsg.NewListPartitionReassignmentsResponseTopic()
		entry.Topic = name
		for _, state := range topic.Partitions {
			if !state.Reassigning() || (named != nil && !slices.Contains(named[name], state.Partition)) {
				continue
			}
			partition := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			partition.Partition = state.Partition
			partition.Replicas = brokerIDs(state.Replicas)
			partition.AddingReplicas = brokerIDs(state.Adding)
			partition.RemovingReplicas = brokerIDs(state.Removing)
			entry.Partitions = append(entry.Partitions, partition)
		}
		if len(entry.Partitions) > 0 {
			response.Topics = append(response.Topics, entry)
		}
	}
	x.respond(response)
	return nil
}
