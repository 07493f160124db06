package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-v7.
//
// The earliest (timestamp -2) or latest (-1) offset of each partition, the
// consumer's way to resolve auto.offset.reset and kcat's -o beginning/end.
//
//   - v1+ one offset per partition (v0's list of old-style offsets is not
//     served; KIP-896 dropped it from Kafka 4.0 too). Timestamp is -1 in
//     every answer: the log keeps no time index yet, and the Backend
//     answers lookups by timestamp (any timestamp >= 0, and v7's -3,
//     MAX_TIMESTAMP, KIP-734) with an error code (tide's replica gives
//     INVALID_REQUEST).
//   - v2+ IsolationLevel: with no transactions, latest is the high
//     watermark for both levels.
//   - The latest offset is OFFSET_NOT_AVAILABLE while a new leader's high
//     watermark has not reached the start of its epoch (KIP-207,
//     KAFKA-2334): the code passes through from the Backend, so that a
//     client never sees the latest offset go backwards.
//   - v4+ CurrentLeaderEpoch (KIP-320, fenced like Fetch) and LeaderEpoch
//     in the answer (KAFKA-7568); v6 is flexible.
//   - ReplicaID: a follower's broker id gets the log end offset as latest;
//     so does -2 (Kafka's debugging id, replica.DebugReplicaID), which any
//     replica answers, leader or follower, with its own offsets, as in
//     Kafka; -1 and any other negative id are read as a consumer's.
//   - v8+ (tiered storage's -4/-5) is not served.

func init() { register(2, 1, 7, (*Handler).handleListOffsets) }

func (h *Handler) handleListOffsets(x *exchange) error {
	request := x.request.(*kmsg.ListOffsetsRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	if request.IsolationLevel != int8(ReadUncommitted) && request.IsolationLevel != int8(ReadCommitted) {
		return fmt.Errorf("%w: list offsets isolation level %d", ErrMalformedRequest, request.IsolationLevel)
	}
	replicaID := metadata.BrokerID(request.ReplicaID)
	if replicaID < 0 && replicaID != replica.DebugReplicaID {
		replicaID = replica.ConsumerReplicaID
	}
	response := request.ResponseKind().(*kmsg.ListOffsetsResponse)
	response.Topics = make([]kmsg.ListOffsetsResponseTopic, len(request.Topics))
	g := newGather(func() { x.respond(response) })
	id := uint64(0)
	for i, topic := range request.Topics {
		response.Topics[i] = kmsg.NewListOffsetsResponseTopic()
		response.Topics[i].Topic = topic.Topic
		response.Topics[i].Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(topic.Partitions))
		for j, partition := range topic.Partitions {
			entry := &response.Topics[i].Partitions[j]
			*entry = kmsg.NewListOffsetsResponseTopicPartition()
			entry.Partition = partition.Partition
			var answer replica.ListOffsetsAnswer
			deliver := g.expect(func() {
				entry.ErrorCode, entry.Timestamp = answer.ErrorCode, -1
				entry.Offset, entry.LeaderEpoch = -1, -1 // an error carries neither, as in Kafka
				if answer.ErrorCode == 0 {
					entry.Offset, entry.LeaderEpoch = int64(answer.Offset), int32(answer.LeaderEpoch)
				}
			})
			h.backend.ListOffsets(metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition},
				replica.ListOffsetsRequest{
					ID: id, ReplicaID: replicaID, Timestamp: partition.Timestamp,
					CurrentLeaderEpoch: record.LeaderEpoch(partition.CurrentLeaderEpoch),
				},
				func(a replica.ListOffsetsAnswer) { answer = a; deliver() })
			id++
		}
	}
	g.release()
	return nil
}
