package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// DeleteRecords: v0-v2.
//
// Moves each partition's log start offset up to the offset given (KIP-107):
// the records below it are unreadable at once (a fetch below the log start
// is OFFSET_OUT_OF_RANGE) and the segments wholly below it are deleted.
// kadm's DeleteRecords, sarama's ClusterAdmin.DeleteRecords and
// kafka-delete-records.sh send it.
//
//   - Offset -1 means the current high watermark
//     (replica.DeleteRecordsHighWatermark), as in Kafka.
//   - Served by the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere);
//     an offset below zero or above the high watermark is
//     OFFSET_OUT_OF_RANGE: only committed records may be deleted.
//   - The answer comes, as Kafka's DelayedDeleteRecords does, once every
//     live replica's log start offset has reached the offset (followers
//     follow from the leader's fetch responses, replica rule
//     follower-follows-log-start, and report theirs in their fetches), its
//     LowWatermark the smallest of them; after TimeoutMillis it is
//     REQUEST_TIMED_OUT, the leader's log start moved all the same.
//   - A partition named twice in one request is INVALID_REQUEST for each
//     time it is named.
//   - v2 is flexible (KIP-482).

func init() { register(21, 0, 2, (*Handler).handleDeleteRecords) }

func (h *Handler) handleDeleteRecords(x *exchange) error {
	request := x.request.(*kmsg.DeleteRecordsRequest)
	partitions := 0
	named := map[metadata.TopicPartition]int{}
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
		for _, partition := range topic.Partitions {
			named[metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}]++
		}
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.DeleteRecordsResponse)
	response.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(request.Topics))
	timeoutTicks := h.config.ticks(request.TimeoutMillis)
	g := newGather(func() { x.respond(response) })
	id := uint64(0)
	for i, topic := range request.Topics {
		response.Topics[i] = kmsg.NewDeleteRecordsResponseTopic()
		response.Topics[i].Topic = topic.Topic
		response.Topics[i].Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(topic.Partitions))
		for j, partition := range topic.Partitions {
			entry := &response.Topics[i].Partitions[j]
			*entry = kmsg.NewDeleteRecordsResponseTopicPartition()
			entry.Partition, entry.LowWatermark = partition.Partition, -1
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			if named[tp] > 1 {
				entry.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			deliver := g.expect(func() {})
			h.backend.DeleteRecords(tp, replica.DeleteRecordsRequest{ID: id, Offset: record.Offset(partition.Offset), TimeoutTicks: timeoutTicks},
				func(answer replica.DeleteRecordsAnswer) {
					entry.ErrorCode, entry.LowWatermark = answer.ErrorCode, int64(answer.LowWatermark)
					deliver()
				})
			id++
		}
	}
	g.release()
	return nil
}
