package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-v9.
//
// A consumer commits its group's offsets. The group coordinator checks the
// member and its generation and writes one record per partition to
// __consumer_offsets (Backend.Group); it answers only once they are
// committed (rule answer-after-commit): an OffsetCommit answered OK is a
// write like any other and survives the coordinator's broker.
//
//   - v1 adds the generation and member id; v2-v4 a retention time; v5
//     drops it; v6 adds the committed leader epoch (KIP-320); v7
//     group.instance.id (KIP-345); v8 is flexible; v9 is for KIP-848
//     members.
//   - A partition this broker's metadata does not have is
//     UNKNOWN_TOPIC_OR_PARTITION and is not handed to the coordinator, as
//     Kafka's KafkaApis does: no offset is kept for a topic that does not
//     exist.
//   - A request the coordinator cannot take gets its code for every
//     partition, as Kafka's error response.

func init() { register(8, 0, 9, (*Handler).handleOffsetCommit) }

func (h *Handler) handleOffsetCommit(x *exchange) error {
	request := x.request.(*kmsg.OffsetCommitRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.OffsetCommitResponse)
	forward := *request
	forward.Topics = nil
	for _, topic := range request.Topics {
		known := kmsg.NewOffsetCommitRequestTopic()
		known.Topic = topic.Topic
		entry := kmsg.NewOffsetCommitResponseTopic()
		entry.Topic = topic.Topic
		for _, partition := range topic.Partitions {
			answer := kmsg.NewOffsetCommitResponseTopicPartition()
			answer.Partition, answer.ErrorCode = partition.Partition, kerr.UnknownTopicOrPartition.Code
			if h.partitionExists(topic.Topic, partition.Partition) {
				known.Partitions = append(known.Partitions, partition)
				answer.ErrorCode = 0
			}
			entry.Partitions = append(entry.Partitions, answer)
		}
		if len(known.Partitions) > 0 {
			forward.Topics = append(forward.Topics, known)
		}
		response.Topics = append(response.Topics, entry)
	}
	if len(forward.Topics) == 0 {
		x.respond(response)
		return nil
	}
	h.backend.Group(request.Group, x.groupClient(), &forward, func(answer kmsg.Response, code int16) {
		mergeCommitCodes(response, answer, code)
		x.respond(response)
	})
	return nil
}

// mergeCommitCodes fills in the codes of the partitions handed to the
// coordinator (those still 0 in response) from its answer, or code when it
// gave none; a partition its answer leaves out is UNKNOWN_SERVER_ERROR.
func mergeCommitCodes(response *kmsg.OffsetCommitResponse, answer kmsg.Response, code int16) {
	committed, _ := answer.(*kmsg.OffsetCommitResponse)
	if code == 0 && committed == nil {
		code = kerr.UnknownServerError.Code
	}
	codes := map[topicPartitionKey]int16{}
	if code == 0 {
		for _, topic := range committed.Topics {
			for _, partition := range topic.Partitions {
				codes[topicPartitionKey{topic.Topic, partition.Partition}] = partition.ErrorCode
			}
		}
	}
	for i := range response.Topics {
		topic := &response.Topics[i]
		for j := range topic.Partitions {
			partition := &topic.Partitions[j]
			if partition.ErrorCode != 0 {
				continue // not forwarded
			}
			got, ok := codes[topicPartitionKey{topic.Topic, partition.Partition}]
			switch {
			case code != 0:
				partition.ErrorCode = code
			case !ok:
				partition.ErrorCode = kerr.UnknownServerError.Code
			default:
				partition.ErrorCode = got
			}
		}
	}
}

// topicPartitionKey names a partition in a response being merged.
type topicPartitionKey struct {
	topic     string
	partition int32
}

// partitionExists reports whether this broker's metadata has the
// partition.
func (h *Handler) partitionExists(name string, partition int32) bool {
	topic, ok := h.backend.Topic(name)
	if !ok {
		return false
	}
	for _, state := range topic.Partitions {
		if state.Partition == partition {
			return true
		}
	}
	return false
}
