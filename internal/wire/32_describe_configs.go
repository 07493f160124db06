package wire

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v1-v4.
//
// The configs tide has, under Kafka's names, for topics and for this broker;
// a config tide does not have is simply absent, as an unknown name is in
// Kafka. rpk, kadm and Terraform read these.
//
//   - Topic: every config of internal/logconfig (max.message.bytes,
//     retention.ms, retention.bytes, segment.bytes, segment.ms,
//     cleanup.policy, min.insync.replicas, unclean.leader.election.enable,
//     message.timestamp.type, delete.retention.ms, min.compaction.lag.ms,
//     min.cleanable.dirty.ratio, compression.type): the value the metadata
//     log sets on the topic (DYNAMIC_TOPIC_CONFIG), else the broker's
//     static value where it has one, else Kafka's default (DEFAULT_CONFIG).
//   - Broker: num.partitions, default.replication.factor,
//     min.insync.replicas, unclean.leader.election.enable,
//     log.segment.bytes, log.retention.bytes, log.retention.ms and
//     message.max.bytes, as STATIC_BROKER_CONFIG. The resource name must be
//     this broker's id (as in Kafka, the client sends the request to the
//     broker it describes) or empty, for the cluster's defaults.
//   - Rule read-only-configs: a topic config is read-only exactly when
//     AlterConfigs refuses to change it (min.insync.replicas and
//     unclean.leader.election.enable, which the controller's decisions
//     read, see controller.AlterConfigs); the broker's static settings are
//     read-only. A client told a config is alterable must find it so.
//     None is sensitive.
//   - v1+ IncludeSynonyms lists the config itself and, for a topic config,
//     the broker config it defaults to; v3+ ConfigType; Documentation is
//     the config's text when IncludeDocumentation (v3+). v4 is flexible.
//   - Other resource types (broker loggers, client metrics, groups) are
//     INVALID_REQUEST.
//   - v0 (IsDefault instead of Source) is not served, as in Kafka 4.0.

func init() { register(32, 1, 4, (*Handler).handleDescribeConfigs) }

// configEntry is one config with its value and where the value comes from.
type configEntry struct {
	name   string
	value  string
	source kmsg.ConfigSource
	kind   kmsg.ConfigType
	// synonym is the broker config a topic config defaults to, or "", and
	// synonymValue its value.
	synonym, synonymValue string
	// doc is the config's documentation (v3+ IncludeDocumentation).
	doc string
}

func (h *Handler) handleDescribeConfigs(x *exchange) error {
	request := x.request.(*kmsg.DescribeConfigsRequest)
	if err := h.checkCounts(len(request.Resources), len(request.Resources)); err != nil {
		return err
	}
	cluster := h.backend.Cluster()
	response := request.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, resource := range request.Resources {
		entry := kmsg.NewDescribeConfigsResponseResource()
		entry.ResourceType, entry.ResourceName = resource.ResourceType, resource.ResourceName
		entries, code, message := h.resourceConfigs(cluster, resource)
		if code != 0 {
			entry.ErrorCode, entry.ErrorMessage = code, &message
		}
		for _, config := range entries {
			if resource.ConfigNames == nil || slices.Contains(resource.ConfigNames, config.name) {
				described := describedConfig(config, request.IncludeSynonyms)
				if request.IncludeDocumentation && config.doc != "" {
					described.Documentation = &config.doc
				}
				entry.Configs = append(entry.Configs, described)
			}
		}
		response.Resources = append(response.Resources, entry)
	}
	x.respond(response)
	return nil
}

// resourceConfigs returns a resource's configs, or an error code and
// message.
func (h *Handler) resourceConfigs(cluster Cluster, resource kmsg.DescribeConfigsRequestResource) ([]configEntry, int16, string) {
	switch resource.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		topic, ok := h.backend.Topic(resource.ResourceName)
		if !ok {
			return nil, kerr.UnknownTopicOrPartition.Code, "unknown topic " + resource.ResourceName
		}
		return topicConfigs(topic, cluster.Config), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if resource.ResourceName != "" && resource.ResourceName != strconv.Itoa(int(cluster.BrokerID)) {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("this is broker %d, not %q", cluster.BrokerID, resource.ResourceName)
		}
		return brokerConfigs(cluster.Config), 0, ""
	}
	return nil, kerr.InvalidRequest.Code, fmt.Sprintf("tide has no configs of resource type %d", resource.ResourceType)
}

// topicConfigs lists a topic's configs, sorted by name: every config of
// internal/logconfig, with the topic's own value (TOPIC_CONFIG) where the
// metadata log sets one, else the broker's static value for the configs it
// has, else Kafka's default (DEFAULT_CONFIG).
func topicConfigs(topic metadata.Topic, broker BrokerConfig) []configEntry {
	minInsync, brokerMinInsync := strconv.Itoa(topic.Config.MinInsyncReplicas), strconv.Itoa(broker.MinInsyncReplicas)
	unclean, brokerUnclean := strconv.FormatBool(topic.Config.UncleanLeaderElection), strconv.FormatBool(broker.UncleanLeaderElection)
	static := map[string]string{
		"max.message.bytes": strconv.FormatInt(broker.MessageMaxBytes, 10),
		"retention.bytes":   strconv.FormatInt(broker.RetentionBytes, 10), "retention.ms": strconv.FormatInt(broker.RetentionMs, 10),
		"segment.bytes": strconv.FormatInt(broker.SegmentBytes, 10), "min.insync.replicas": brokerMinInsync,
		"unclean.leader.election.enable": brokerUnclean,
	}
	var entries []configEntry
	for _, config := range logconfig.Topics() {
		entry := configEntry{name: config.Name, value: config.Default, source: kmsg.ConfigSourceDefaultConfig,
			kind: kmsg.ConfigType(config.Type), synonym: config.Broker, synonymValue: config.Default, doc: config.Doc}
		if value, ok := static[config.Name]; ok {
			entry.value, entry.synonymValue = value, value
		}
		switch value, ok := topic.Configs[config.Name]; {
		case ok:
			entry.value, entry.source = value, kmsg.ConfigSourceDynamicTopicConfig
		case config.Name == "min.insync.replicas":
			entry.value, entry.source = minInsync, perTopicSource(minInsync, brokerMinInsync)
		case config.Name == "unclean.leader.election.enable":
			entry.value, entry.source = unclean, perTopicSource(unclean, brokerUnclean)
		}
		entries = append(entries, entry)
	}
	return entries
}

// perTopicSource says where a per-topic value comes from: the topic, when
// it differs from the broker's default.
func perTopicSource(value, brokerValue string) kmsg.ConfigSource {
	if value != brokerValue {
		return kmsg.ConfigSourceDynamicTopicConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

// brokerConfigs lists the broker's configs, sorted by name.
func brokerConfigs(broker BrokerConfig) []configEntry {
	static := kmsg.ConfigSourceStaticBrokerConfig
	return []configEntry{
		{"default.replication.factor", strconv.Itoa(broker.DefaultReplicationFactor), static, kmsg.ConfigTypeInt, "", "", ""},
		{"log.retention.bytes", strconv.FormatInt(broker.RetentionBytes, 10), static, kmsg.ConfigTypeLong, "", "", ""},
		{"log.retention.ms", strconv.FormatInt(broker.RetentionMs, 10), static, kmsg.ConfigTypeLong, "", "", ""},
		{"log.segment.bytes", strconv.FormatInt(broker.SegmentBytes, 10), static, kmsg.ConfigTypeInt, "", "", ""},
		{"message.max.bytes", strconv.FormatInt(broker.MessageMaxBytes, 10), static, kmsg.ConfigTypeInt, "", "", ""},
		{"min.insync.replicas", strconv.Itoa(broker.MinInsyncReplicas), static, kmsg.ConfigTypeInt, "", "", ""},
		{"num.partitions", strconv.Itoa(broker.DefaultPartitions), static, kmsg.ConfigTypeInt, "", "", ""},
		{"unclean.leader.election.enable", strconv.FormatBool(broker.UncleanLeaderElection), static, kmsg.ConfigTypeBoolean, "", "", ""},
	}
}

func describedConfig(config configEntry, includeSynonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	entry := kmsg.NewDescribeConfigsResponseResourceConfig()
	entry.Name, entry.Value, entry.ReadOnly = config.name, &config.value, readOnlyConfig(config.name)
	entry.Source, entry.ConfigType = config.source, config.kind
	if !includeSynonyms {
		return entry
	}
	self := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	self.Name, self.Value, self.Source = config.name, &config.value, config.source
	entry.ConfigSynonyms = append(entry.ConfigSynonyms, self)
	if config.synonym != "" {
		broker := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		broker.Name, broker.Value, broker.Source = config.synonym, &config.synonymValue, kmsg.ConfigSourceStaticBrokerConfig
		entry.ConfigSynonyms = append(entry.ConfigSynonyms, broker)
	}
	return entry
}

// readOnlyConfig reports whether AlterConfigs refuses to change the
// config (rule read-only-configs): any name but an alterable topic
// config's, which covers the broker's static settings.
func readOnlyConfig(name string) bool {
	_, topicConfig := logconfig.Topic(name)
	return !topicConfig || name == "min.insync.replicas" || name == "unclean.leader.election.enable"
}
