package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-v9.
//
// The earliest (timestamp -2) or latest (-1) offset of each partition, the
// consumer's way to resolve auto.offset.reset and kcat's -o beginning/end,
// or the offset for a timestamp (KIP-79, from the time index, KIP-33).
//
//   - v1+ one offset per partition (v0's list of old-style offsets is not
//     served; KIP-896 dropped it from Kafka 4.0 too), with the timestamp
//     of the record found by a lookup by timestamp (-1 otherwise). A
//     timestamp >= 0 answers the first record with a timestamp at or after
//     it below the high watermark; none is offset -1, timestamp -1 with
//     no error (Kafka's UNKNOWN_OFFSET: offsetsForTimes gives null).
//   - v2+ IsolationLevel: with no transactions, latest is the high
//     watermark for both levels.
//   - The latest offset is OFFSET_NOT_AVAILABLE while a new leader's high
//     watermark has not reached the start of its epoch (KIP-207,
//     KAFKA-2334): the code passes through from the Backend, so that a
//     client never sees the latest offset go backwards.
//   - v4+ CurrentLeaderEpoch (KIP-320, fenced like Fetch) and LeaderEpoch
//     in the answer (KAFKA-7568); v6 is flexible.
//   - v7+ -3, MAX_TIMESTAMP (KIP-734): the record with the largest
//     timestamp. v8+ -4, EARLIEST_LOCAL (KIP-405): the log start offset,
//     tide having no tiered storage. v9+ -5, LATEST_TIERED (KIP-1005):
//     offset -1, epoch -1. Each asked for below its version is
//     UNSUPPORTED_VERSION for that partition, as in Kafka.
//   - ReplicaID: a follower's broker id gets the log end offset as latest;
//     so does -2 (Kafka's debugging id, replica.DebugReplicaID), which any
//     replica answers, leader or follower, with its own offsets, as in
//     Kafka; -1 and any other negative id are read as a consumer's.
//   - v10 (KIP-1075's TimeoutMs for remote lookups) is not served.

func init() { register(2, 1, 9, (*Handler).handleListOffsets) }

// listOffsetsTimestampMinVersion is the first version that may ask for
// each special timestamp (Kafka's isListOffsetsTimestampUnsupported).
var listOffsetsTimestampMinVersion = map[int64]int16{
	replica.MaxTimestamp: 7, replica.EarliestLocalTimestamp: 8, replica.LatestTieredTimestamp: 9,
}

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
			entry.Timestamp, entry.Offset, entry.LeaderEpoch = -1, -1, -1
			if minVersion, special := listOffsetsTimestampMinVersion[partition.Timestamp]; special && request.Version < minVersion {
				entry.ErrorCode = kerr.UnsupportedVersion.Code
				continue
			}
			deliver := g.expect(func() {
				entry.ErrorCode = answer.ErrorCode
				if answer.ErrorCode == 0 { // an error carries neither, as in Kafka
					entry.Offset, entry.LeaderEpoch = int64(answer.Offset), int32(answer.LeaderEpoch)
					entry.Timestamp = answer.TimestampMs
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
