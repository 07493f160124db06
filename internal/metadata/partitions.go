package metadata

import (
	"fmt"

	"github.com/tidelog/tide/internal/codec"
)

// CreatePartitions adds partitions to an existing topic (KIP-195), each
// with its full initial state: Kafka writes one PartitionRecord per new
// partition, tide one record for the whole growth, so a broker never sees
// a topic with only some of the partitions one request added.
//
// Partitions continue the topic's numbering: the first is numbered the
// topic's current partition count, and each next one follows. ID is the
// topic's id when the controller decided (NoTopicID for a topic created
// before topic ids): a record decided for a topic that has since been
// deleted and created again under its name must not grow the new one.
type CreatePartitions struct {
	Topic      string
	ID         TopicID
	Partitions []PartitionState
}

func (CreatePartitions) isRecord() {}

func (r CreatePartitions) String() string {
	first := int32(-1)
	if len(r.Partitions) > 0 {
		first = r.Partitions[0].Partition
	}
	replicas := make([][]BrokerID, len(r.Partitions))
	for i, p := range r.Partitions {
		replicas[i] = p.Replicas
	}
	return fmt.Sprintf("create-partitions topic=%s first=%d count=%d replicas=%v", r.Topic, first, len(r.Partitions), replicas)
}

// tagCreatePartitions is CreatePartitions on disk.
const tagCreatePartitions byte = 18

func appendCreatePartitions(e *codec.Encoder, r CreatePartitions) {
	e.Byte(tagCreatePartitions)
	e.String(r.Topic)
	e.Bytes(r.ID[:])
	e.Uvarint(uint64(len(r.Partitions)))
	for _, p := range r.Partitions {
		AppendPartitionState(e, p)
	}
}

func readCreatePartitions(d *codec.Decoder) Record {
	r := CreatePartitions{Topic: d.String(maxNameBytes), ID: readTopicID(d)}
	n := d.Length(1, maxPartitionsPerTopic)
	for i := 0; i < n && d.Err() == nil; i++ {
		r.Partitions = append(r.Partitions, ReadPartitionState(d))
	}
	return r
}

// applyCreatePartitions grows a topic. Every new partition is checked as a
// CreateTopic's are (numbering, replication factor, every partition
// invariant), and the topic keeps at most maxPartitionsPerTopic, the bound
// its snapshot decoder accepts: an image that grew past it could not be
// loaded again.
func (img *Image) applyCreatePartitions(r CreatePartitions) (bool, error) {
	topic, ok := img.topics[r.Topic]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Topic)
	}
	if topic.id != r.ID {
		return false, fmt.Errorf("%w: partitions for topic %q id %s, which has id %s", ErrInvariant, r.Topic, r.ID, topic.id)
	}
	if len(r.Partitions) == 0 || len(topic.partitions)+len(r.Partitions) > maxPartitionsPerTopic {
		return false, fmt.Errorf("%w: %d partitions added to %q, which has %d", ErrInvariant, len(r.Partitions), r.Topic, len(topic.partitions))
	}
	added := make([]PartitionState, len(r.Partitions))
	for i, partition := range r.Partitions {
		want := int32(len(topic.partitions) + i)
		if partition.Topic != r.Topic || partition.Partition != want {
			return false, fmt.Errorf("%w: new partition %d of %q is named %s", ErrInvariant, want, r.Topic, partition.TopicPartition)
		}
		if len(partition.Replicas) != topic.config.ReplicationFactor {
			return false, fmt.Errorf("%w: %s has %d replicas, replication factor is %d",
				ErrInvariant, partition.TopicPartition, len(partition.Replicas), topic.config.ReplicationFactor)
		}
		if err := img.validatePartition(partition, effectiveConfig(topic, img.brokerDefaults)); err != nil {
			return false, err
		}
		added[i] = partition.Clone()
	}
	topic.partitions = append(topic.partitions, added...)
	return true, nil
}
