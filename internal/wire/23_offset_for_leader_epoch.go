package wire

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v2-v4.
//
// Where a leader epoch ended in the leader's log: the largest epoch at or
// below the one asked for that the leader knows, and the start offset of
// the next (KIP-101, KIP-279). Followers use it to truncate only a diverging
// suffix, never to their high watermark (KAFKA-1211); consumers use it to
// detect truncation after a leader change (KIP-320).
//
//   - v2+ CurrentLeaderEpoch (KIP-320): fenced like Fetch. v2 is the floor
//     because kgo turns KIP-320 validation on only when a broker
//     advertises v2+, and without the current epoch a zombie could be
//     answered.
//   - v3+ ReplicaID: a follower's broker id; -2 (Kafka's "not a replica",
//     what consumers send) and any other negative id are a consumer's.
//   - v4 is flexible.
//   - An epoch the leader has no end for answers epoch -1, end offset -1
//     with no error, as in Kafka.

func init() { register(23, 2, 4, (*Handler).handleOffsetForLeaderEpoch) }

func (h *Handler) handleOffsetForLeaderEpoch(x *exchange) error {
	request := x.request.(*kmsg.OffsetForLeaderEpochRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	replicaID := metadata.BrokerID(request.ReplicaID)
	if replicaID < 0 {
		replicaID = replica.ConsumerReplicaID
	}
	response := request.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	response.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(request.Topics))
	g := newGather(func() { x.respond(response) })
	id := uint64(0)
	for i, topic := range request.Topics {
		response.Topics[i] = kmsg.NewOffsetForLeaderEpochResponseTopic()
		response.Topics[i].Topic = topic.Topic
		response.Topics[i].Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(topic.Partitions))
		for j, partition := range topic.Partitions {
			entry := &response.Topics[i].Partitions[j]
			*entry = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			entry.Partition = partition.Partition
			var answer replica.OffsetsForLeaderEpochAnswer
			deliver := g.expect(func() {
				entry.ErrorCode = answer.ErrorCode
				entry.LeaderEpoch, entry.EndOffset = int32(answer.LeaderEpoch), int64(answer.EndOffset)
			})
			h.backend.OffsetsForLeaderEpoch(metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition},
				replica.OffsetsForLeaderEpochRequest{
					ID: id, ReplicaID: replicaID,
					CurrentLeaderEpoch: record.LeaderEpoch(partition.CurrentLeaderEpoch),
					LeaderEpoch:        record.LeaderEpoch(partition.LeaderEpoch),
				},
				func(a replica.OffsetsForLeaderEpochAnswer) { answer = a; deliver() })
			id++
		}
	}
	g.release()
	return nil
}
