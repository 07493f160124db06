package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v2-v7.
//
// Topics are created by the controller (controller.CreateTopic decides the
// placement and the codes); the Backend forwards the request and answers
// once the topics are in the metadata log, or with ValidateOnly (v1+) only
// checks them.
//
//   - NumPartitions and ReplicationFactor -1 (v4+, KIP-464) take the
//     broker's num.partitions and default.replication.factor.
//   - Configs: every config of internal/logconfig, validated there and
//     kept in the metadata log (AlterConfigs changes them later); a null
//     value means the default. Any other config, or a value outside its
//     type and range, is INVALID_CONFIG naming it: accepting a setting
//     tide then ignores would hide that. Configs are read-only in the
//     answer exactly as in DescribeConfigs (rule read-only-configs).
//   - A manual ReplicaAssignment is INVALID_REPLICA_ASSIGNMENT: the
//     controller places replicas itself.
//   - A topic named twice in one request is INVALID_REQUEST for each, as in
//     Kafka.
//   - One request creates at most Config.MaxPartitionsPerRequest partitions:
//     a topic that would go over is INVALID_PARTITIONS, so one request
//     cannot make the controller write an unbounded record batch.
//   - v5+ answers the partitions, replication factor and configs of each
//     created topic (KIP-525); v5 is flexible. v7+ answers each created
//     topic's id (KIP-516), as this broker's metadata has it once the
//     topic is visible; the zero id for ValidateOnly, as in Kafka.
//   - An internal topic (__consumer_offsets) is INVALID_REQUEST: the
//     brokers create it, with its own settings, on the first
//     FindCoordinator.
//   - v0-v1 are not served (Kafka 4.0 dropped them, KIP-896).

func init() { register(19, 2, 7, (*Handler).handleCreateTopics) }

func (h *Handler) handleCreateTopics(x *exchange) error {
	request := x.request.(*kmsg.CreateTopicsRequest)
	if err := h.checkCounts(len(request.Topics), len(request.Topics)); err != nil {
		return err
	}
	cluster := h.backend.Cluster()
	response := request.ResponseKind().(*kmsg.CreateTopicsResponse)
	response.Topics = make([]kmsg.CreateTopicsResponseTopic, len(request.Topics))
	named := make(map[string]int, len(request.Topics))
	for _, topic := range request.Topics {
		named[topic.Topic]++
	}
	forward := CreateTopicsRequest{TimeoutTicks: h.config.ticks(request.TimeoutMillis), ValidateOnly: request.ValidateOnly}
	var positions []int // response position of each forwarded topic
	partitions := 0     // partitions the forwarded topics create, bounded by MaxPartitionsPerRequest
	for i, topic := range request.Topics {
		entry := &response.Topics[i]
		*entry = kmsg.NewCreateTopicsResponseTopic()
		entry.Topic = topic.Topic
		create, code, message := createTopicRequest(topic, cluster.Config)
		switch {
		case named[topic.Topic] > 1:
			code, message = kerr.InvalidRequest.Code, "topic "+topic.Topic+" is named more than once"
		case InternalTopic(topic.Topic):
			code, message = kerr.InvalidRequest.Code, topic.Topic+" is an internal topic: the broker creates it"
		case code == 0 && create.Partitions > h.config.MaxPartitionsPerRequest-partitions:
			code, message = kerr.InvalidPartitions.Code, fmt.Sprintf("one request may create at most %d partitions", h.config.MaxPartitionsPerRequest)
		}
		if code != 0 {
			entry.ErrorCode, entry.ErrorMessage = code, &message
			continue
		}
		partitions += max(create.Partitions, 0)
		forward.Topics = append(forward.Topics, create)
		positions = append(positions, i)
	}
	if len(forward.Topics) == 0 {
		x.respond(response)
		return nil
	}
	h.backend.CreateTopics(forward, func(codes []int16) {
		if len(codes) != len(forward.Topics) {
			panic(fmt.Sprintf("wire: a Backend answered %d codes to a CreateTopics of %d", len(codes), len(forward.Topics)))
		}
		for k, code := range codes {
			entry := &response.Topics[positions[k]]
			fillCreatedTopic(entry, forward.Topics[k], code, cluster)
			if topic, ok := h.backend.Topic(entry.Topic); ok && code == 0 && !forward.ValidateOnly {
				entry.TopicID = topic.ID
			}
		}
		x.respond(response)
	})
	return nil
}

// createTopicRequest translates one topic with its defaults filled in, or
// returns the code and message that refuse it.
func createTopicRequest(topic kmsg.CreateTopicsRequestTopic, broker BrokerConfig) (controller.CreateTopicRequest, int16, string) {
	create := controller.CreateTopicRequest{
		Name: topic.Topic, Partitions: int(topic.NumPartitions), ReplicationFactor: int(topic.ReplicationFactor),
		Config: metadata.TopicConfig{MinInsyncReplicas: broker.MinInsyncReplicas, UncleanLeaderElection: broker.UncleanLeaderElection},
	}
	if topic.NumPartitions == -1 {
		create.Partitions = broker.DefaultPartitions
	}
	if topic.ReplicationFactor == -1 {
		create.ReplicationFactor = broker.DefaultReplicationFactor
	}
	create.Config.ReplicationFactor = create.ReplicationFactor
	if len(topic.ReplicaAssignment) > 0 {
		return create, kerr.InvalidReplicaAssignment.Code, "tide places replicas itself: leave the replica assignment empty"
	}
	for _, config := range topic.Configs {
		if config.Value == nil {
			continue
		}
		if _, twice := create.Configs[config.Name]; twice {
			return create, kerr.InvalidConfig.Code, "config " + config.Name + " is set more than once"
		}
		if err := setTopicConfig(&create.Config, config.Name, *config.Value); err != nil {
			return create, kerr.InvalidConfig.Code, err.Error()
		}
		if create.Configs == nil {
			create.Configs = map[string]string{}
		}
		create.Configs[config.Name] = *config.Value
	}
	if err := logconfig.ValidateTopicConfigs(create.Configs, create.ReplicationFactor); err != nil {
		return create, kerr.InvalidConfig.Code, err.Error()
	}
	return create, 0, ""
}

// setTopicConfig validates one topic config (internal/logconfig) and
// applies the two the controller's decisions read from TopicConfig; every
// valid config also travels to the controller in CreateTopicRequest.Configs.
func setTopicConfig(config *metadata.TopicConfig, name, value string) error {
	if err := logconfig.ValidateTopic(name, value); err != nil {
		return err
	}
	value = strings.TrimSpace(value)
	switch name {
	case "min.insync.replicas":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("min.insync.replicas %q is not an integer", value)
		}
		config.MinInsyncReplicas = n
	case "unclean.leader.election.enable":
		config.UncleanLeaderElection = strings.EqualFold(value, "true")
	}
	return nil
}

// fillCreatedTopic writes the Backend's answer for one topic.
func fillCreatedTopic(entry *kmsg.CreateTopicsResponseTopic, create controller.CreateTopicRequest, code int16, cluster Cluster) {
	entry.ErrorCode = code
	if code != 0 {
		message := createTopicRefusal(create, code, cluster)
		entry.ErrorMessage = &message
		return
	}
	entry.NumPartitions, entry.ReplicationFactor = int32(create.Partitions), int16(create.ReplicationFactor)
	config := create.Config
	if value, ok := cluster.DynamicDefaults["min.insync.replicas"]; ok && create.Configs["min.insync.replicas"] == "" {
		config.MinInsyncReplicas, _ = strconv.Atoi(strings.TrimSpace(value))
	}
	if value, ok := cluster.DynamicDefaults["unclean.leader.election.enable"]; ok && create.Configs["unclean.leader.election.enable"] == "" {
		config.UncleanLeaderElection = strings.EqualFold(strings.TrimSpace(value), "true")
	}
	for _, config := range topicConfigs(metadata.Topic{Config: config, Configs: create.Configs}, cluster) {
		first := config.chain[0]
		described := kmsg.NewCreateTopicsResponseTopicConfig()
		described.Name, described.Value, described.ReadOnly, described.Source = config.name, &first.value, config.readOnly, int8(first.source)
		entry.Configs = append(entry.Configs, described)
	}
}

// createTopicRefusal says why the controller refused a topic, in Kafka's
// words where Kafka has them (a bare code name sent users guessing). The
// code is the controller's decision; the reason reads this broker's view
// of the cluster, which may be a moment behind the controller's.
func createTopicRefusal(create controller.CreateTopicRequest, code int16, cluster Cluster) string {
	switch code {
	case kerr.InvalidTopicException.Code:
		if problem := controller.TopicNameProblem(create.Name); problem != "" {
			return problem
		}
	case kerr.TopicAlreadyExists.Code:
		return fmt.Sprintf("Topic '%s' already exists.", create.Name)
	case kerr.InvalidPartitions.Code:
		return fmt.Sprintf("Number of partitions must be 1 to %d, or -1 to use the default value.", controller.MaxPartitionsPerTopic)
	case kerr.InvalidReplicationFactor.Code:
		if create.ReplicationFactor < 1 {
			return "Replication factor must be larger than 0, or -1 to use the default value."
		}
		return fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			create.ReplicationFactor, create.ReplicationFactor, len(cluster.Brokers))
	}
	return controller.CodeName(code)
}
