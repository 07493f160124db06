package wire

import (
	"slices"
	"strings"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-v12.
//
// The brokers, the controller and each asked-for topic's partitions with
// their leader, leader epoch, replicas and ISR, from the Backend's applied
// metadata image (KRaft: brokers learn leadership only through the
// replicated metadata log, so what is answered here never runs ahead of it).
//
//   - v0: an empty topic list means all topics; v1+: null means all, empty
//     means none.
//   - Auto topic creation (Kafka's auto.create.topics.enable, its
//     AutoTopicCreationManager): a topic asked for by name that does not
//     exist, when the request allows it (v4+ AllowAutoTopicCreation; always
//     below v4) and BrokerConfig.AutoCreateTopics is on, is handed to
//     Backend.AutoCreateTopic with num.partitions and
//     default.replication.factor, and answered LEADER_NOT_AVAILABLE, which
//     clients retry until it exists. Without either, it is
//     UNKNOWN_TOPIC_OR_PARTITION. An invalid name is INVALID_TOPIC_EXCEPTION;
//     an internal one ("__" prefix, such as __consumer_offsets) is never
//     created this way (rule no-auto-create-internal: a typo'd or
//     client-probed internal name would otherwise become a user topic with
//     the wrong settings), so it stays UNKNOWN_TOPIC_OR_PARTITION.
//   - v1+ IsInternal marks __consumer_offsets (Kafka's Topic.isInternal),
//     which clients leave out of regex subscriptions.
//   - v5+ OfflineReplicas: replicas on brokers the Backend does not list.
//   - v7+ LeaderEpoch (KIP-320): clients use it to fence their fetches and
//     to detect log truncation after a leader change.
//   - v10+ TopicID (KIP-516): each topic carries its id; a topic created
//     before topic ids carries the zero id until the controller assigns
//     it one. v12+ may ask for a topic by id alone (name null): an id
//     this broker does not know is UNKNOWN_TOPIC_ID, with the id echoed.
//   - A partition without a leader is LEADER_NOT_AVAILABLE, leader -1, as
//     in Kafka, so clients refresh and retry.
//   - v13 (top-level ErrorCode) is not served yet.
//   - PartitionEpochTag (v9+, flexible): a request carrying this tagged
//     field gets each partition's partition epoch (KIP-841's, which Kafka
//     keeps to its controller and brokers) in the same tag of the
//     partition, a varint. It is tide's own extension, asked for only by
//     `tide topic describe`: a client that does not send the tag never
//     sees it.

func init() { register(3, 0, 12, (*Handler).handleMetadata) }

// PartitionEpochTag is the tagged field, in a Metadata request and in its
// response's partitions, of tide's partition-epoch extension: far above
// any tag Kafka's schemas use.
const PartitionEpochTag = 0x7469_6465 // "tide"

// hasTag reports whether tags hold key.
func hasTag(tags *kmsg.Tags, key uint32) bool {
	found := false
	tags.Each(func(k uint32, _ []byte) { found = found || k == key })
	return found
}

func (h *Handler) handleMetadata(x *exchange) error {
	request := x.request.(*kmsg.MetadataRequest)
	if err := h.checkCounts(len(request.Topics), len(request.Topics)); err != nil {
		return err
	}
	cluster := h.backend.Cluster()
	response := request.ResponseKind().(*kmsg.MetadataResponse)
	response.ClusterID = &cluster.ClusterID
	response.ControllerID = int32(cluster.ControllerID)
	live := make(map[metadata.BrokerID]bool, len(cluster.Brokers))
	for _, broker := range cluster.Brokers {
		live[broker.ID] = true
		response.Brokers = append(response.Brokers, metadataBroker(broker))
	}
	epochs := request.IsFlexible() && hasTag(&request.UnknownTags, PartitionEpochTag)
	all := request.Topics == nil || request.Version == 0 && len(request.Topics) == 0
	if all {
		for _, name := range h.backend.TopicNames() {
			response.Topics = append(response.Topics, h.metadataTopic(name, live, epochs))
		}
		x.respond(response)
		return nil
	}
	autoCreate := cluster.Config.AutoCreateTopics && (request.Version < 4 || request.AllowAutoTopicCreation)
	seen := make(map[string]bool, len(request.Topics))
	for _, asked := range request.Topics {
		if asked.Topic == nil {
			topic, ok := h.backend.TopicByID(metadata.TopicID(asked.TopicID))
			if !ok {
				unknown := kmsg.NewMetadataResponseTopic()
				unknown.ErrorCode, unknown.TopicID = kerr.UnknownTopicID.Code, asked.TopicID
				response.Topics = append(response.Topics, unknown)
				continue
			}
			asked.Topic = &topic.Name
		}
		if !seen[*asked.Topic] {
			seen[*asked.Topic] = true
			entry := h.metadataTopic(*asked.Topic, live, epochs)
			if entry.ErrorCode == kerr.UnknownTopicOrPartition.Code && autoCreate {
				entry.ErrorCode = h.autoCreateTopic(*asked.Topic, cluster.Config)
			}
			response.Topics = append(response.Topics, entry)
		}
	}
	x.respond(response)
	return nil
}

// autoCreateTopic asks the Backend to create a topic a Metadata request
// named, and returns the code that topic is answered with meanwhile.
func (h *Handler) autoCreateTopic(name string, broker BrokerConfig) int16 {
	switch {
	case !controller.ValidTopicName(name):
		return kerr.InvalidTopicException.Code
	case strings.HasPrefix(name, "__"):
		return kerr.UnknownTopicOrPartition.Code // rule no-auto-create-internal
	}
	h.backend.AutoCreateTopic(controller.CreateTopicRequest{Name: name, Partitions: broker.DefaultPartitions,
		ReplicationFactor: broker.DefaultReplicationFactor, Config: metadata.TopicConfig{MinInsyncReplicas: broker.MinInsyncReplicas,
			UncleanLeaderElection: broker.UncleanLeaderElection, ReplicationFactor: broker.DefaultReplicationFactor}})
	return kerr.LeaderNotAvailable.Code
}

func metadataBroker(broker Broker) kmsg.MetadataResponseBroker {
	entry := kmsg.NewMetadataResponseBroker()
	entry.NodeID, entry.Host, entry.Port = int32(broker.ID), broker.Host, broker.Port
	if broker.Rack != "" {
		entry.Rack = &broker.Rack
	}
	return entry
}

// metadataTopic describes one topic; live holds the brokers listed.
func (h *Handler) metadataTopic(name string, live map[metadata.BrokerID]bool, epochs bool) kmsg.MetadataResponseTopic {
	entry := kmsg.NewMetadataResponseTopic()
	entry.Topic = &name
	entry.IsInternal = InternalTopic(name)
	topic, ok := h.backend.Topic(name)
	if !ok {
		entry.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return entry
	}
	entry.TopicID = topic.ID
	for _, state := range topic.Partitions {
		partition := kmsg.NewMetadataResponseTopicPartition()
		partition.Partition = state.Partition
		partition.Leader = int32(state.Leader)
		partition.LeaderEpoch = int32(state.LeaderEpoch)
		partition.Replicas = brokerIDs(state.Replicas)
		partition.ISR = brokerIDs(state.ISR)
		partition.OfflineReplicas = brokerIDs(slices.DeleteFunc(slices.Clone(state.Replicas),
			func(id metadata.BrokerID) bool { return live[id] }))
		if state.Leader == metadata.NoBroker {
			partition.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		if epochs {
			partition.UnknownTags.Set(PartitionEpochTag, kbin.AppendVarint(nil, int32(state.PartitionEpoch)))
		}
		entry.Partitions = append(entry.Partitions, partition)
	}
	return entry
}

// brokerIDs converts to the wire's int32s; never nil, since an array that
// is not nullable must not be written as null.
func brokerIDs(ids []metadata.BrokerID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
