package wire

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v1-v4 (KIP-113, KIP-827).
//
// Each broker answers for its own log directory (Backend.LogDir): tide
// keeps one per broker, so the answer has one Dir. For each partition
// whose log is open there: its Size in bytes, its OffsetLag (how far its
// log end is below the high watermark it knows, never negative, as Kafka
// computes it: 0 on a leader) and IsFuture false (tide moves no replica
// between directories, KIP-113's future replicas).
//
//   - Topics null asks for every partition; otherwise only those named, and
//     a named topic or partition this broker does not hold is left out of
//     the answer, as in Kafka (an empty list gives the directory with no
//     partitions).
//   - v3+ carries the top-level ErrorCode (0); v4+ the volume's
//     TotalBytes and UsableBytes (-1 when the runtime does not know them).
//   - v2+ is flexible. v0 is not served (Kafka 4.0 dropped it, KIP-896).

func init() { register(35, 1, 4, (*Handler).handleDescribeLogDirs) }

func (h *Handler) handleDescribeLogDirs(x *exchange) error {
	request := x.request.(*kmsg.DescribeLogDirsRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	var wanted map[metadata.TopicPartition]bool // nil: every partition
	if request.Topics != nil {
		wanted = make(map[metadata.TopicPartition]bool, partitions)
		for _, topic := range request.Topics {
			for _, partition := range topic.Partitions {
				wanted[metadata.TopicPartition{Topic: topic.Topic, Partition: partition}] = true
			}
		}
	}
	dir := h.backend.LogDir()
	response := request.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	described := kmsg.NewDescribeLogDirsResponseDir()
	described.Dir, described.ErrorCode = dir.Path, dir.ErrorCode
	described.TotalBytes, described.UsableBytes = dir.TotalBytes, dir.UsableBytes
	for _, partition := range dir.Partitions {
		if wanted != nil && !wanted[partition.TopicPartition] {
			continue
		}
		if n := len(described.Topics); n == 0 || described.Topics[n-1].Topic != partition.Topic {
			topic := kmsg.NewDescribeLogDirsResponseDirTopic()
			topic.Topic = partition.Topic
			described.Topics = append(described.Topics, topic)
		}
		entry := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		entry.Partition, entry.Size, entry.OffsetLag, entry.IsFuture = partition.Partition, partition.SizeBytes, partition.OffsetLag, false
		topic := &described.Topics[len(described.Topics)-1]
		topic.Partitions = append(topic.Partitions, entry)
	}
	response.Dirs = []kmsg.DescribeLogDirsResponseDir{described}
	x.respond(response)
	return nil
}
