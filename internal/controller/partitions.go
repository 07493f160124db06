package controller

import (
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CreatePartitionsRequest asks to grow a topic to Count partitions
// (Kafka's CreatePartitions, KIP-195).
type CreatePartitionsRequest struct {
	Topic string
	// Count is the topic's new total partition count, not the number
	// added.
	Count int
	// Assignments, if set, places the new partitions' replicas explicitly:
	// one list per new partition, in order, each of the topic's
	// replication factor of distinct brokers, the first its preferred
	// leader. Nil lets the controller place them.
	Assignments [][]metadata.BrokerID
}

// CreatePartitions decides a topic's growth: the CreatePartitions record,
// or a code.
//
// The new partitions are placed as CreateTopic places a topic's (round
// robin over the brokers that may host a replica, from the topic name's
// start), continuing its partition numbers, so a topic grown later is laid
// out as if it had been created with the larger count on today's brokers.
// Each starts with its replicas as ISR and its first replica leading, at
// leader epoch 0 and partition epoch 0.
//
// Codes, as Kafka's ReplicationControlManager answers them:
// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist;
// INVALID_PARTITIONS for a count not above the current one (a topic never
// shrinks: a partition's records would be lost and keyed producers would
// move keys between the remaining ones) or above MaxPartitionsPerTopic;
// INVALID_REPLICATION_FACTOR when fewer brokers may host a replica than
// the topic's replication factor (a replica on a fenced broker could not
// join the ISR); INVALID_REPLICA_ASSIGNMENT for explicit assignments that
// do not give each new partition, and only those, the replication factor
// of distinct brokers that may host a replica. A bad assignment refuses
// the whole request: Kafka adds none of the partitions then either.
func CreatePartitions(img *metadata.Image, request CreatePartitionsRequest) ([]metadata.Record, int16, error) {
	topic, ok := img.Topic(request.Topic)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code, nil
	}
	current := len(topic.Partitions)
	if request.Count <= current || request.Count > MaxPartitionsPerTopic {
		return nil, kerr.InvalidPartitions.Code, nil
	}
	available := availableBrokers(img)
	replicationFactor := topic.Config.ReplicationFactor
	if replicationFactor > len(available) {
		return nil, kerr.InvalidReplicationFactor.Code, nil
	}
	if request.Assignments != nil && !validAssignments(request.Assignments, request.Count-current, replicationFactor, available) {
		return nil, kerr.InvalidReplicaAssignment.Code, nil
	}
	record := metadata.CreatePartitions{Topic: request.Topic, ID: topic.ID}
	start := placementStart(request.Topic, len(available))
	for partition := current; partition < request.Count; partition++ {
		replicas := make([]metadata.BrokerID, replicationFactor)
		for i := range replicas {
			replicas[i] = available[(start+partition+i)%len(available)]
		}
		if request.Assignments != nil {
			replicas = slices.Clone(request.Assignments[partition-current])
		}
		record.Partitions = append(record.Partitions, metadata.PartitionState{
			TopicPartition: metadata.TopicPartition{Topic: request.Topic, Partition: int32(partition)},
			Replicas:       replicas,
			ISR:            slices.Clone(replicas),
			Leader:         replicas[0],
		})
	}
	d := newDecision(img)
	if err := d.append(record); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}

// availableBrokers lists, in ID order, the brokers that may host a new
// replica: registered, unfenced and not shutting down.
func availableBrokers(img *metadata.Image) []metadata.BrokerID {
	var available []metadata.BrokerID
	for _, broker := range img.Brokers() {
		if img.Active(broker.ID) {
			available = append(available, broker.ID)
		}
	}
	return available
}

// validAssignments checks explicit assignments of a new topic's or of the
// added partitions: exactly one per partition (count), each of
// replicationFactor distinct brokers that may host a replica.
func validAssignments(assignments [][]metadata.BrokerID, count, replicationFactor int, available []metadata.BrokerID) bool {
	if len(assignments) != count {
		return false
	}
	for _, replicas := range assignments {
		if len(replicas) != replicationFactor {
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
