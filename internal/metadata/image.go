package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Image is the cluster metadata built by applying the metadata log in order:
// the registered brokers and the topics with their configuration and
// partitions. The zero value is the empty image before offset 0.
//
// Invariants, checked by Apply before any record takes effect (Apply refuses
// a record that would break one, so an Image can only hold states that keep
// them):
//   - every partition: Replicas is non-empty and has no duplicates; ISR and
//     ELR are disjoint subsets of Replicas without duplicates; Leader is
//     NoBroker or an ISR member; a Recovering leader (after an unclean
//     election, KIP-704) has an ISR of at most itself; an ISR of at least
//     min.insync.replicas has an empty ELR (KIP-966: once the high watermark
//     can advance again, former members may miss committed records);
//   - the leader and every ISR member are registered, unfenced and not
//     shutting down (KIP-841): leadership and ISR membership move away
//     before a broker is fenced, shuts down or re-registers;
//   - leader epochs and partition epochs never decrease, and a new leader
//     always comes with a new leader epoch (one leader per epoch);
//   - broker epochs never decrease;
//   - a topic's id is NoTopicID (created before topic ids) or usable and
//     no other topic's, and once set it never changes.
//
// An Image is not safe for concurrent use; the pure cores that hold one are
// driven from one goroutine.
type Image struct {
	// nextOffset is the offset of the next entry to apply; the zero value
	// makes Offset() -1.
	nextOffset int64
	brokers    map[BrokerID]brokerRegistration
	topics     map[string]*topicImage
	// nextProducerID is the first producer id no broker has been handed
	// (ProducerIDs records); it only grows.
	nextProducerID int64
	// topicsByID indexes topics by id, built when first needed and
	// dropped whenever a record changes the topics (topicIDIndex).
	topicsByID map[TopicID]string
	// brokerDefaults are the cluster-wide dynamic broker configs
	// (ConfigRecord for the broker default resource).
	brokerDefaults map[string]string
}

type brokerRegistration struct {
	state       BrokerState
	incarnation string
	// endpoint is where clients reach its Kafka listener, or empty.
	endpoint string
}

type topicImage struct {
	// id is the topic's id, NoTopicID until an AssignTopicID for a topic
	// created before topic ids; unique among the topics.
	id         TopicID
	config     TopicConfig
	partitions []PartitionState // indexed by partition number
	// configs are the topic's own configs (ConfigRecord), dropped with
	// the topic.
	configs map[string]string
}

// Topic is a read-only copy of one topic's metadata.
type Topic struct {
	Name       string
	ID         TopicID
	Config     TopicConfig
	Partitions []PartitionState
	// Configs are the configs set on the topic (config records), a copy.
	Configs map[string]string
}

// NewImage returns an empty image at offset -1; the zero Image is the same.
func NewImage() *Image { return &Image{} }

// NextProducerID is the first producer id the controller has not yet handed
// to any broker.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Offset is the offset of the last entry applied, -1 before any.
func (img *Image) Offset() int64 { return img.nextOffset - 1 }

// Broker returns a registered broker's state.
func (img *Image) Broker(id BrokerID) (BrokerState, bool) {
	registration, ok := img.brokers[id]
	return registration.state, ok
}

// Endpoint returns where clients reach a registered broker's Kafka
// listener, as it registered it, or "" when it gave none.
func (img *Image) Endpoint(id BrokerID) string { return img.brokers[id].endpoint }

// Incarnation returns the incarnation a registered broker last registered
// with, so the controller can tell a retried registration from a restart.
func (img *Image) Incarnation(id BrokerID) (string, bool) {
	registration, ok := img.brokers[id]
	return registration.incarnation, ok
}

// Brokers returns every registered broker, sorted by ID.
func (img *Image) Brokers() []BrokerState {
	brokers := make([]BrokerState, 0, len(img.brokers))
	for _, id := range img.brokerIDs() {
		brokers = append(brokers, img.brokers[id].state)
	}
	return brokers
}

// Active reports whether broker id may lead and be in an ISR: registered,
// unfenced and not in controlled shutdown (Kafka's isActive).
func (img *Image) Active(id BrokerID) bool {
	registration, ok := img.brokers[id]
	return ok && !registration.state.Fenced && !registration.state.ShuttingDown
}

// Topic returns a copy of a topic's metadata.
func (img *Image) Topic(name string) (Topic, bool) {
	topic, ok := img.topics[name]
	if !ok {
		return Topic{}, false
	}
	partitions := make([]PartitionState, len(topic.partitions))
	for i, partition := range topic.partitions {
		partitions[i] = partition.Clone()
	}
	return Topic{Name: name, ID: topic.id, Config: effectiveConfig(topic, img.brokerDefaults), Partitions: partitions,
		Configs: maps.Clone(topic.configs)}, true
}

// TopicConfig returns a topic's configuration, with the
// min.insync.replicas and unclean.leader.election.enable its config
// records set (effectiveConfig).
func (img *Image) TopicConfig(name string) (TopicConfig, bool) {
	topic, ok := img.topics[name]
	if !ok {
		return TopicConfig{}, false
	}
	return effectiveConfig(topic, img.brokerDefaults), true
}

// Topics returns the topic names, sorted.
func (img *Image) Topics() []string {
	names := make([]string, 0, len(img.topics))
	for name := range img.topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Partition returns a copy of one partition's state.
func (img *Image) Partition(tp TopicPartition) (PartitionState, bool) {
	topic, ok := img.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(topic.partitions) {
		return PartitionState{}, false
	}
	return topic.partitions[tp.Partition].Clone(), true
}

// Partitions returns a copy of every partition, sorted by topic then
// partition, so that decisions iterating over them are deterministic.
func (img *Image) Partitions() []PartitionState {
	var partitions []PartitionState
	for _, name := range img.Topics() {
		for _, partition := range img.topics[name].partitions {
			partitions = append(partitions, partition.Clone())
		}
	}
	return partitions
}

// Clone returns a deep copy that shares nothing with img, so a test or a
// controller decision can apply records to it without touching img.
func (img *Image) Clone() *Image {
	clone := &Image{nextOffset: img.nextOffset, nextProducerID: img.nextProducerID, brokerDefaults: maps.Clone(img.brokerDefaults)}
	if img.brokers != nil {
		clone.brokers = make(map[BrokerID]brokerRegistration, len(img.brokers))
		for id, registration := range img.brokers {
			clone.brokers[id] = registration
		}
	}
	if img.topics != nil {
		clone.topics = make(map[string]*topicImage, len(img.topics))
		for name, topic := range img.topics {
			partitions := make([]PartitionState, len(topic.partitions))
			for i, partition := range topic.partitions {
				partitions[i] = partition.Clone()
			}
			clone.topics[name] = &topicImage{id: topic.id, config: topic.config, partitions: partitions, configs: maps.Clone(topic.configs)}
		}
	}
	return clone
}

// Describe returns the whole image as stable multi-line text, brokers by ID
// and topics by name, for datadriven tests and the admin tools.
func (img *Image) Describe() string {
	var out strings.Builder
	fmt.Fprintf(&out, "offset=%d\n", img.Offset())
	if img.nextProducerID > 0 {
		fmt.Fprintf(&out, "next-producer-id=%d\n", img.nextProducerID)
	}
	if len(img.brokerDefaults) > 0 {
		fmt.Fprintf(&out, "broker-default configs:%s\n", describeConfigs(img.brokerDefaults))
	}
	for _, id := range img.brokerIDs() {
		registration := img.brokers[id]
		endpoint := ""
		if registration.endpoint != "" {
			endpoint = " endpoint=" + registration.endpoint
		}
		fmt.Fprintf(&out, "broker %d epoch=%d incarnation=%s%s %s\n", id, registration.state.Epoch,
			registration.incarnation, endpoint, describeBrokerStatus(registration.state))
	}
	for _, name := range img.Topics() {
		topic := img.topics[name]
		id := ""
		if !topic.id.IsZero() {
			id = " id=" + topic.id.String()
		}
		configs := ""
		if len(topic.configs) > 0 {
			configs = " configs:" + describeConfigs(topic.configs)
		}
		fmt.Fprintf(&out, "topic %s%s %s%s\n", name, id, effectiveConfig(topic, img.brokerDefaults), configs)
		for _, partition := range topic.partitions {
			fmt.Fprintf(&out, "  %s%s\n", partition, recoverySuffix(partition.LeaderRecoveryState))
		}
	}
	return out.String()
}

func describeBrokerStatus(state BrokerState) string {
	status := "unfenced"
	if state.Fenced {
		status = "fenced"
	}
	if state.ShuttingDown {
		status += " shutting-down"
	}
	return status
}

func (img *Image) brokerIDs() []BrokerID {
	ids := make([]BrokerID, 0, len(img.brokers))
	for id := range img.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
