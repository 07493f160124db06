package wire

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v1-v4.
//
// The configs tide has, under Kafka's names, for topics and for brokers;
// a config tide does not have is simply absent, as an unknown name is in
// Kafka. rpk, kadm and Terraform read these.
//
//   - Topic: every config of internal/logconfig. Each has a synonym chain,
//     in Kafka's order of precedence (KIP-226): the topic's own value
//     (DYNAMIC_TOPIC_CONFIG), the cluster-wide dynamic default of its
//     broker synonym (DYNAMIC_DEFAULT_BROKER_CONFIG, log.retention.ms for
//     retention.ms), the answering broker's static setting of it
//     (STATIC_BROKER_CONFIG, a flag of tide serve), and its default
//     (DEFAULT_CONFIG), each present only where set. The config's value
//     and source are the chain's first; v1+ IncludeSynonyms lists the
//     whole chain, as Kafka's ConfigHelper does. A topic created with a
//     min.insync.replicas or unclean.leader.election.enable that no
//     config record holds (metadata logs from before topic configs) shows
//     it as its own value.
//   - Broker by id: num.partitions, default.replication.factor, and the
//     broker synonyms of the topic configs this broker has settings for
//     (min.insync.replicas, unclean.leader.election.enable,
//     log.segment.bytes, log.roll.ms, log.retention.bytes,
//     log.retention.ms, log.message.timestamp.type, message.max.bytes),
//     each with its chain from the cluster-wide dynamic default down. The id must be this broker's (as in Kafka, the
//     client sends the request to the broker it describes).
//   - Broker "" (the cluster-wide default resource): the dynamic defaults
//     AlterConfigs set, as DYNAMIC_DEFAULT_BROKER_CONFIG, and nothing
//     else, as in Kafka.
//   - Rule read-only-configs: a config is read-only exactly when
//     AlterConfigs refuses to change it: a topic's configs and the
//     cluster-wide defaults are alterable, a broker's settings by id are
//     not (tide refuses per-broker dynamic configs). A client told a
//     config is alterable must find it so. None is sensitive.
//   - v3+ ConfigType; Documentation is the config's text when
//     IncludeDocumentation (v3+). v4 is flexible.
//   - Other resource types (broker loggers, client metrics, groups) are
//     INVALID_REQUEST.
//   - v0 (IsDefault instead of Source) is not served, as in Kafka 4.0.

func init() { register(32, 1, 4, (*Handler).handleDescribeConfigs) }

// configEntry is one config with its synonym chain, first the source
// that gives it its value.
type configEntry struct {
	name     string
	kind     kmsg.ConfigType
	chain    []configSynonym
	readOnly bool
	// doc is the config's documentation (v3+ IncludeDocumentation).
	doc string
}

// configSynonym is one link of a config's chain: a name, the value that
// source sets, and the source.
type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
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
		return topicConfigs(topic, cluster), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if resource.ResourceName == "" {
			return dynamicDefaultConfigs(cluster.DynamicDefaults), 0, ""
		}
		if resource.ResourceName != strconv.Itoa(int(cluster.BrokerID)) {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("this is broker %d, not %q", cluster.BrokerID, resource.ResourceName)
		}
		return brokerConfigs(cluster), 0, ""
	}
	return nil, kerr.InvalidRequest.Code, fmt.Sprintf("tide has no configs of resource type %d", resource.ResourceType)
}

// topicConfigs lists a topic's configs, sorted by name, each with its
// chain (see the top of the file).
func topicConfigs(topic metadata.Topic, cluster Cluster) []configEntry {
	var entries []configEntry
	for _, config := range logconfig.Topics() {
		entry := configEntry{name: config.Name, kind: kmsg.ConfigType(config.Type), doc: config.Doc}
		if value, ok := topic.Configs[config.Name]; ok {
			entry.chain = append(entry.chain, configSynonym{config.Name, value, kmsg.ConfigSourceDynamicTopicConfig})
		}
		entry.chain = append(entry.chain, brokerChain(config.Broker, cluster)...)
		if own, ok := createdValue(topic, config.Name); ok && own != entry.chain[0].value {
			entry.chain = append([]configSynonym{{config.Name, own, kmsg.ConfigSourceDynamicTopicConfig}}, entry.chain...)
		}
		entries = append(entries, entry)
	}
	return entries
}

// createdValue is the value of min.insync.replicas or
// unclean.leader.election.enable the topic's metadata holds, which the
// controller's decisions read.
func createdValue(topic metadata.Topic, name string) (string, bool) {
	switch name {
	case "min.insync.replicas":
		return strconv.Itoa(topic.Config.MinInsyncReplicas), true
	case "unclean.leader.election.enable":
		return strconv.FormatBool(topic.Config.UncleanLeaderElection), true
	}
	return "", false
}

// brokerChain is a broker config's chain below the topic: the cluster-wide
// dynamic default, this broker's static setting, and the default.
func brokerChain(name string, cluster Cluster) []configSynonym {
	var chain []configSynonym
	if value, ok := cluster.DynamicDefaults[name]; ok {
		chain = append(chain, configSynonym{name, value, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	if value, ok := cluster.Config.Static[name]; ok {
		chain = append(chain, configSynonym{name, value, kmsg.ConfigSourceStaticBrokerConfig})
	}
	return append(chain, configSynonym{name, brokerDefault(name, cluster.Config), kmsg.ConfigSourceDefaultConfig})
}

// brokerDefault is a broker config's value when nothing sets it: the
// broker's own default where it has a setting (log.segment.bytes is 64 MiB
// in tide, docs/compatibility.md), else Kafka's.
func brokerDefault(name string, broker BrokerConfig) string {
	if value, ok := broker.Defaults[name]; ok {
		return value
	}
	if config, ok := logconfig.Broker(name); ok {
		return config.Default
	}
	return ""
}

// brokerConfigs lists this broker's configs, sorted by name: its settings
// with their chains, read-only since a broker's configs by id are not
// alterable.
func brokerConfigs(cluster Cluster) []configEntry {
	broker := cluster.Config
	static := kmsg.ConfigSourceStaticBrokerConfig
	entries := []configEntry{
		{name: "default.replication.factor", kind: kmsg.ConfigTypeInt,
			chain: []configSynonym{{"default.replication.factor", strconv.Itoa(broker.DefaultReplicationFactor), static}}},
		{name: "num.partitions", kind: kmsg.ConfigTypeInt,
			chain: []configSynonym{{"num.partitions", strconv.Itoa(broker.DefaultPartitions), static}}},
	}
	for _, name := range []string{"log.message.timestamp.type", "log.retention.bytes", "log.retention.ms", "log.roll.ms", "log.segment.bytes",
		"message.max.bytes", "min.insync.replicas", "unclean.leader.election.enable"} {
		config, _ := logconfig.Broker(name)
		entries = append(entries, configEntry{name: name, kind: kmsg.ConfigType(config.Type), chain: brokerChain(name, cluster), doc: config.Doc})
	}
	for i := range entries {
		entries[i].readOnly = true
	}
	slices.SortFunc(entries, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return entries
}

// dynamicDefaultConfigs lists the cluster-wide dynamic defaults, sorted by
// name: alterable, as AlterConfigs of the broker resource "" sets them.
func dynamicDefaultConfigs(defaults map[string]string) []configEntry {
	var entries []configEntry
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		config, _ := logconfig.Broker(name)
		entries = append(entries, configEntry{name: name, kind: kmsg.ConfigType(config.Type), doc: config.Doc,
			chain: []configSynonym{{name, defaults[name], kmsg.ConfigSourceDynamicDefaultBrokerConfig}}})
	}
	return entries
}

func describedConfig(config configEntry, includeSynonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	entry := kmsg.NewDescribeConfigsResponseResourceConfig()
	first := config.chain[0]
	entry.Name, entry.Value, entry.ReadOnly = config.name, &first.value, config.readOnly
	entry.Source, entry.ConfigType = first.source, config.kind
	if !includeSynonyms {
		return entry
	}
	for _, link := range config.chain {
		synonym := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		synonym.Name, synonym.Value, synonym.Source = link.name, &link.value, link.source
		entry.ConfigSynonyms = append(entry.ConfigSynonyms, synonym)
	}
	return entry
}
