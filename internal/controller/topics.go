package controller

import (
	"hash/fnv"
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxPartitionsPerTopic bounds a topic's partition count, and so the size of
// one CreateTopic record and of the decisions that visit every partition.
const MaxPartitionsPerTopic = 10_000

// maxTopicNameLength is Kafka's limit (Topic.MAX_NAME_LENGTH): a partition
// directory is named topic-partition and must fit a file name.
const maxTopicNameLength = 249

// CreateTopicRequest asks for a new topic.
type CreateTopicRequest struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	// Config holds the topic's settings. Its ReplicationFactor may be left
	// 0 (the request's field is the one that counts) and its
	// MinInsyncReplicas 0 for Kafka's default of 1.
	Config metadata.TopicConfig
	// Assignments, if set, places each partition's replicas explicitly, in
	// order (the first is the preferred leader): Kafka's CreateTopics
	// Assignments, which an operator uses to pin leaders and the scenarios
	// use to follow a seed's replica names. One list per partition.
	Assignments [][]metadata.BrokerID
}

// CreateTopic decides a topic's creation: the CreateTopic record, or a code.
//
// Replicas go to the brokers that may host one (registered, unfenced, not
// shutting down), in broker ID order, round-robin: partition p gets the RF
// brokers starting at (start + p), where start is derived from a hash of the
// topic name. The first replica of each partition is its preferred leader,
// so leaders spread over the brokers, and across topics too; the hash keeps
// the placement a pure function of the name and the image, with no
// randomness. Every partition starts with ISR = replicas, the first replica
// leading, leader epoch 0 and partition epoch 0.
//
// Codes: INVALID_TOPIC_EXCEPTION for a name Kafka would refuse,
// TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS below 1 or above
// MaxPartitionsPerTopic, INVALID_REPLICATION_FACTOR below 1, inconsistent
// with the config, or above the number of available brokers (a replica
// placed on a fenced broker could not join the ISR),
// INVALID_REPLICA_ASSIGNMENT for explicit assignments that do not give each
// partition that many distinct available brokers, INVALID_CONFIG for
// min.insync.replicas below 1 or above the replication factor (acks=all
// writes could never succeed; Kafka accepts this, tide refuses it).
func CreateTopic(img *metadata.Image, request CreateTopicRequest) ([]metadata.Record, int16, error) {
	config := request.Config
	if config.MinInsyncReplicas == 0 {
		config.MinInsyncReplicas = 1
	}
	switch {
	case !validTopicName(request.Name):
		return nil, kerr.InvalidTopicException.Code, nil
	case topicExists(img, request.Name):
		return nil, kerr.TopicAlreadyExists.Code, nil
	case request.Partitions < 1 || request.Partitions > MaxPartitionsPerTopic:
		return nil, kerr.InvalidPartitions.Code, nil
	case request.ReplicationFactor < 1:
		return nil, kerr.InvalidReplicationFactor.Code, nil
	case config.ReplicationFactor != 0 && config.ReplicationFactor != request.ReplicationFactor:
		return nil, kerr.InvalidReplicationFactor.Code, nil
	case config.MinInsyncReplicas < 1 || config.MinInsyncReplicas > request.ReplicationFactor:
		return nil, kerr.InvalidConfig.Code, nil
	}
	config.ReplicationFactor = request.ReplicationFactor
	var available []metadata.BrokerID
	for _, broker := range img.Brokers() {
		if img.Active(broker.ID) {
			available = append(available, broker.ID)
		}
	}
	if request.ReplicationFactor > len(available) {
		return nil, kerr.InvalidReplicationFactor.Code, nil
	}
	if request.Assignments != nil && !validAssignments(request, available) {
		return nil, kerr.InvalidReplicaAssignment.Code, nil
	}
	record := metadata.CreateTopic{Name: request.Name, Config: config}
	start := placementStart(request.Name, len(available))
	for partition := range request.Partitions {
		replicas := make([]metadata.BrokerID, request.ReplicationFactor)
		for i := range replicas {
			replicas[i] = available[(start+partition+i)%len(available)]
		}
		if request.Assignments != nil {
			replicas = slices.Clone(request.Assignments[partition])
		}
		record.Partitions = append(record.Partitions, metadata.PartitionState{
			TopicPartition: metadata.TopicPartition{Topic: request.Name, Partition: int32(partition)},
			Replicas:       replicas,
			ISR:            append([]metadata.BrokerID(nil), replicas...),
			Leader:         replicas[0],
		})
	}
	d := newDecision(img)
	if err := d.append(record); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}

// validAssignments checks explicit assignments: one per partition, each of
// replication-factor distinct brokers that may host a replica.
func validAssignments(request CreateTopicRequest, available []metadata.BrokerID) bool {
	if len(request.Assignments) != request.Partitions {
		return false
	}
	for _, replicas := range request.Assignments {
		if len(replicas) != request.ReplicationFactor {
			return false
		}
		for i, id := range replicas {
			if !slices.Contains(available, id) || slices.Contains(replicas[:i], id) {
				return false
			}
		}
	}
	return true
}

// placementStart is the broker index where a topic's placement starts: FNV-1a
// of the name, so that it is stable across runs and processes.
func placementStart(name string, brokers int) int {
	hash := fnv.New32a()
	hash.Write([]byte(name))
	return int(hash.Sum32() % uint32(brokers))
}

func topicExists(img *metadata.Image, name string) bool {
	_, ok := img.TopicConfig(name)
	return ok
}

// validTopicName applies Kafka's rules (Topic.validate): 1 to 249
// characters from [a-zA-Z0-9._-], and not "." or "..".
func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicNameLength {
		return false
	}
	for _, character := range name {
		switch {
		case character >= 'a' && character <= 'z', character >= 'A' && character <= 'Z',
			character >= '0' && character <= '9', character == '.', character == '_', character == '-':
		default:
			return false
		}
	}
	return true
}

// DeleteTopic decides a topic's deletion: the DeleteTopic record, or
// UNKNOWN_TOPIC_OR_PARTITION.
func DeleteTopic(img *metadata.Image, name string) ([]metadata.Record, int16, error) {
	if !topicExists(img, name) {
		return nil, kerr.UnknownTopicOrPartition.Code, nil
	}
	d := newDecision(img)
	if err := d.append(metadata.DeleteTopic{Name: name}); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}
