package controller

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/logconfig"
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
	// Configs are the topic configs the client set (CreateTopics'
	// configs), written as config records in the batch of the
	// CreateTopic so no broker sees the topic without them. Set
	// min.insync.replicas and unclean.leader.election.enable override
	// Config's.
	Configs map[string]string
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
// writes could never succeed; Kafka accepts this, tide refuses it), or for
// Configs that logconfig refuses (unknown, or out of Kafka's type and
// range). The Configs follow the CreateTopic in the same batch, one config
// record each, keys sorted.
//
// The topic's id (KIP-516) is drawn from random, the controller's injected
// source (metadata.NewTopicID): usable, and no other topic's, so a topic
// created again under a deleted topic's name is told apart from it. A
// source that fails is an error, like any broken decision.
func CreateTopic(img *metadata.Image, request CreateTopicRequest, random io.Reader) ([]metadata.Record, int16, error) {
	config := request.Config
	if err := logconfig.ValidateTopicConfigs(request.Configs, request.ReplicationFactor); err != nil {
		return nil, kerr.InvalidConfig.Code, nil
	}
	if value, ok := request.Configs["min.insync.replicas"]; ok {
		config.MinInsyncReplicas, _ = strconv.Atoi(strings.TrimSpace(value))
	}
	if value, ok := request.Configs["unclean.leader.election.enable"]; ok {
		config.UncleanLeaderElection = strings.EqualFold(strings.TrimSpace(value), "true")
	}
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
	available := availableBrokers(img)
	if request.ReplicationFactor > len(available) {
		return nil, kerr.InvalidReplicationFactor.Code, nil
	}
	if request.Assignments != nil && !validAssignments(request.Assignments, request.Partitions, request.ReplicationFactor, available) {
		return nil, kerr.InvalidReplicaAssignment.Code, nil
	}
	id, err := metadata.NewTopicID(img, random)
	if err != nil {
		return nil, 0, fmt.Errorf("controller: topic %q: %w", request.Name, err)
	}
	record := metadata.CreateTopic{Name: request.Name, ID: id, Config: config}
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
	resource := metadata.ConfigResource{Type: metadata.ConfigTopic, Name: request.Name}
	for _, key := range slices.Sorted(maps.Keys(request.Configs)) {
		if err := d.append(metadata.ConfigRecord{Resource: resource, Key: key, Value: request.Configs[key]}); err != nil {
			return nil, 0, err
		}
	}
	// A topic that sets no min.insync.replicas of its own takes the
	// cluster-wide dynamic default, which must fit it too.
	if n, inherits := inheritedMinInsync(request.Configs, img.BrokerDefaultConfigs()); inherits && n > request.ReplicationFactor {
		return nil, kerr.InvalidConfig.Code, nil
	}
	return d.records, 0, nil
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

// ValidTopicName reports whether a name passes Kafka's rules for a topic
// name (validTopicName): the front end checks it before it creates a topic
// on its own (auto.create.topics.enable).
func ValidTopicName(name string) bool { return validTopicName(name) }

// validTopicName applies Kafka's rules (Topic.validate): 1 to 249
// characters from [a-zA-Z0-9._-], and not "." or "..".
func validTopicName(name string) bool { return TopicNameProblem(name) == "" }

// TopicNameProblem says why Kafka would refuse a topic name, in Kafka's
// words (its Topic.validate), or "" for a valid name.
func TopicNameProblem(name string) string {
	switch {
	case name == "":
		return "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		return `Topic name cannot be "." or ".."`
	case len(name) > maxTopicNameLength:
		return fmt.Sprintf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLength, name)
	}
	for _, character := range name {
		switch {
		case character >= 'a' && character <= 'z', character >= 'A' && character <= 'Z',
			character >= '0' && character <= '9', character == '.', character == '_', character == '-':
		default:
			return fmt.Sprintf("Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return ""
}

// DeleteTopic decides a topic's deletion, named by name (id NoTopicID) or
// by id (name empty; DeleteTopics v6+): the DeleteTopic record, or
// UNKNOWN_TOPIC_OR_PARTITION for an unknown name, UNKNOWN_TOPIC_ID for an
// unknown id or one that is not the named topic's (the name now belongs
// to a later topic: deleting it would delete what the caller never saw).
func DeleteTopic(img *metadata.Image, name string, id metadata.TopicID) ([]metadata.Record, int16, error) {
	if !id.IsZero() {
		owner, ok := img.TopicByID(id)
		if !ok || (name != "" && owner != name) {
			return nil, kerr.UnknownTopicID.Code, nil
		}
		name = owner
	}
	if !topicExists(img, name) {
		return nil, kerr.UnknownTopicOrPartition.Code, nil
	}
	d := newDecision(img)
	if err := d.append(metadata.DeleteTopic{Name: name}); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}

// MaxTopicIDAssignments bounds the AssignTopicID records of one decision,
// so that upgrading a log with many topics without ids takes a few bounded
// proposals instead of one that could exceed the entry size limit.
const MaxTopicIDAssignments = 256

// AssignMissingTopicIDs decides the upgrade step for a metadata log written
// before topic ids: one AssignTopicID for each topic without an id, by
// name, at most MaxTopicIDAssignments, each id drawn from random as at
// creation. None when every topic has its id. The active controller runs
// it until none are left, as Kafka's controller gives ids to the topics it
// takes over; brokers then write the ids into the topics' partition
// directories.
func AssignMissingTopicIDs(img *metadata.Image, random io.Reader) ([]metadata.Record, error) {
	names := img.TopicsWithoutID()
	if len(names) == 0 {
		return nil, nil
	}
	d := newDecision(img)
	for _, name := range names[:min(len(names), MaxTopicIDAssignments)] {
		id, err := metadata.NewTopicID(d.image, random)
		if err != nil {
			return nil, fmt.Errorf("controller: topic %q: %w", name, err)
		}
		if err := d.append(metadata.AssignTopicID{Name: name, ID: id}); err != nil {
			return nil, err
		}
	}
	return d.records, nil
}
