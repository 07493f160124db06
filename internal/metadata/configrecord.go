package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/codec"
)

// Configuration records: Kafka's ConfigRecord. A config is a key and a
// string value held for a resource, a topic or the cluster-wide broker
// default (KIP-226's default resource: BROKER with an empty name). The
// controller writes them in the batch of the CreateTopic they come with
// and for AlterConfigs and IncrementalAlterConfigs later; every broker
// reads the same values from the same log, so a config change reaches
// every broker in log order, with the topic changes around it.
//
// Values are kept as the strings the client sent, validated before the
// controller writes them (ValidateTopicConfig): the image is the source of
// truth for DescribeConfigs, which answers the value as it was set.

// ConfigResourceType is what a config is set on.
type ConfigResourceType int8

const (
	// ConfigTopic is a topic's own config (Kafka's TOPIC, 2).
	ConfigTopic ConfigResourceType = 2
	// ConfigBrokerDefault is the cluster-wide dynamic broker default
	// (Kafka's BROKER, 4, with an empty name).
	ConfigBrokerDefault ConfigResourceType = 4
)

// ConfigResource names what a config is set on: a topic by name, or the
// broker default with an empty name.
type ConfigResource struct {
	Type ConfigResourceType
	Name string
}

func (r ConfigResource) String() string {
	if r.Type == ConfigBrokerDefault {
		return "broker-default"
	}
	return "topic " + r.Name
}

// ConfigRecord sets a config of a resource, or removes it when Delete is
// set (the resource falls back to the next source: broker default, then
// the static default).
type ConfigRecord struct {
	Resource ConfigResource
	Key      string
	Value    string
	Delete   bool
}

func (ConfigRecord) isRecord() {}

func (r ConfigRecord) String() string {
	if r.Delete {
		return fmt.Sprintf("config %s delete %s", r.Resource, r.Key)
	}
	return fmt.Sprintf("config %s %s=%s", r.Resource, r.Key, r.Value)
}

// Bounds on a config record, so a hostile snapshot cannot make a decoder
// allocate without limit: Kafka's config names are short, and no supported
// value is longer than a cleanup policy list.
const (
	maxConfigKeyBytes   = 255
	maxConfigValueBytes = 4096
)

// tagConfigRecord is a ConfigRecord; tags 12 to 15 are still free.
const tagConfigRecord byte = 11

func appendConfigRecord(e *codec.Encoder, r ConfigRecord) {
	e.Byte(tagConfigRecord)
	e.Byte(byte(r.Resource.Type))
	e.String(r.Resource.Name)
	e.String(r.Key)
	e.Bool(r.Delete)
	e.String(r.Value)
}

func readConfigRecord(d *codec.Decoder) Record {
	r := ConfigRecord{Resource: ConfigResource{Type: ConfigResourceType(d.Byte()), Name: d.String(maxNameBytes)}}
	r.Key = d.String(maxConfigKeyBytes)
	r.Delete = d.Bool()
	r.Value = d.String(maxConfigValueBytes)
	if d.Err() == nil && !r.Resource.valid() {
		d.Fail(fmt.Errorf("config resource %d %q", r.Resource.Type, r.Resource.Name))
	}
	return r
}

func (r ConfigResource) valid() bool {
	switch r.Type {
	case ConfigTopic:
		return r.Name != ""
	case ConfigBrokerDefault:
		return r.Name == ""
	}
	return false
}

// applyConfig applies a ConfigRecord. Rule config-needs-resource: a topic
// config names an existing topic, so a config left over from a deleted
// topic cannot come back with a new topic of the same name (DeleteTopic
// drops the topic's configs with it).
//
// A change of min.insync.replicas, the topic's own or the cluster-wide
// default it inherits, must leave every partition of the topics it reaches
// within the invariants: at most the replication factor, and no ELR beside
// an ISR of at least the new value (KIP-966). The controller clears those
// ELRs in changes it writes before the config (controller.AlterConfigs);
// a record that would break one changes nothing.
func (img *Image) applyConfig(r ConfigRecord) (bool, error) {
	if !r.Resource.valid() || r.Key == "" {
		return false, fmt.Errorf("%w: config resource %v key %q", ErrInvariant, r.Resource, r.Key)
	}
	if r.Resource.Type == ConfigTopic {
		if _, ok := img.topics[r.Resource.Name]; !ok {
			return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Resource.Name)
		}
	}
	affected := img.Topics()
	if r.Resource.Type == ConfigTopic {
		affected = []string{r.Resource.Name}
	}
	before := make([]TopicConfig, len(affected))
	for i, name := range affected {
		before[i], _ = img.TopicConfig(name)
	}
	previous, had := img.setConfig(r)
	for i, name := range affected {
		after, _ := img.TopicConfig(name)
		if after == before[i] {
			continue
		}
		if err := img.checkTopicConfig(name, after); err != nil {
			img.setConfig(ConfigRecord{Resource: r.Resource, Key: r.Key, Value: previous, Delete: !had})
			return false, err
		}
	}
	return true, nil
}

// applyConfigUnchecked applies a ConfigRecord of a snapshot, which the
// whole image's validate checks once read.
func (img *Image) applyConfigUnchecked(r ConfigRecord) (bool, error) {
	if !r.Resource.valid() || r.Key == "" {
		return false, fmt.Errorf("%w: config resource %v key %q", ErrInvariant, r.Resource, r.Key)
	}
	if _, ok := img.topics[r.Resource.Name]; r.Resource.Type == ConfigTopic && !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Resource.Name)
	}
	img.setConfig(r)
	return true, nil
}

// setConfig sets or deletes one config value, with no check, and returns
// the value it replaces.
func (img *Image) setConfig(r ConfigRecord) (previous string, had bool) {
	var configs map[string]string
	switch r.Resource.Type {
	case ConfigTopic:
		topic := img.topics[r.Resource.Name]
		if topic.configs == nil {
			topic.configs = map[string]string{}
		}
		configs = topic.configs
	case ConfigBrokerDefault:
		if img.brokerDefaults == nil {
			img.brokerDefaults = map[string]string{}
		}
		configs = img.brokerDefaults
	}
	previous, had = configs[r.Key]
	if r.Delete {
		delete(configs, r.Key)
	} else {
		configs[r.Key] = r.Value
	}
	return previous, had
}

// checkTopicConfig checks a topic's partitions against its new config.
func (img *Image) checkTopicConfig(name string, config TopicConfig) error {
	if config.MinInsyncReplicas < 1 || config.MinInsyncReplicas > config.ReplicationFactor {
		return fmt.Errorf("%w: topic %q: min.insync.replicas %d with replication factor %d",
			ErrInvariant, name, config.MinInsyncReplicas, config.ReplicationFactor)
	}
	for _, partition := range img.topics[name].partitions {
		if err := img.validatePartition(partition, config); err != nil {
			return err
		}
	}
	return nil
}

// Keys of the configs the controller's own decisions read (TopicConfig).
const (
	minInsyncReplicasKey     = "min.insync.replicas"
	uncleanLeaderElectionKey = "unclean.leader.election.enable"
)

// effectiveConfig is a topic's TopicConfig as its config records leave
// it: min.insync.replicas and unclean.leader.election.enable from the
// topic's own configs, else from the cluster-wide dynamic defaults, else
// as the topic was created (KIP-226's order; the static broker value the
// topic was created with stands for the static default). Values were
// validated before the controller wrote them; one that does not parse
// counts as not set, and so does a cluster-wide min.insync.replicas above
// the topic's replication factor.
func effectiveConfig(topic *topicImage, brokerDefaults map[string]string) TopicConfig {
	config := topic.config
	fromDefault := false
	lookup := func(key string) (string, bool) {
		if value, ok := topic.configs[key]; ok {
			fromDefault = false
			return strings.TrimSpace(value), true
		}
		value, ok := brokerDefaults[key]
		fromDefault = true
		return strings.TrimSpace(value), ok
	}
	if value, ok := lookup(minInsyncReplicasKey); ok {
		// A cluster-wide default above the topic's replication factor
		// does not reach it: the controller refuses to write one, but a
		// log from before it checked may hold one.
		if n, err := strconv.Atoi(value); err == nil && (!fromDefault || n <= config.ReplicationFactor) {
			config.MinInsyncReplicas = n
		}
	}
	if value, ok := lookup(uncleanLeaderElectionKey); ok {
		config.UncleanLeaderElection = strings.EqualFold(value, "true")
	}
	return config
}

// TopicConfigWith returns the TopicConfig a topic would have with its own
// configs and the cluster-wide defaults replaced by the given ones (nil
// keeps the image's): what a config change would make of it, before the
// controller writes it.
func (img *Image) TopicConfigWith(name string, own, brokerDefaults map[string]string) (TopicConfig, bool) {
	topic, ok := img.topics[name]
	if !ok {
		return TopicConfig{}, false
	}
	if own != nil {
		topic = &topicImage{config: topic.config, configs: own}
	}
	if brokerDefaults == nil {
		brokerDefaults = img.brokerDefaults
	}
	return effectiveConfig(topic, brokerDefaults), true
}

// TopicConfigs returns a copy of the configs set on a topic (its
// TOPIC_CONFIG source), empty when none or no such topic.
func (img *Image) TopicConfigs(name string) map[string]string {
	if topic, ok := img.topics[name]; ok {
		return maps.Clone(topic.configs)
	}
	return nil
}

// BrokerDefaultConfigs returns a copy of the cluster-wide dynamic broker
// defaults (DYNAMIC_DEFAULT_BROKER_CONFIG).
func (img *Image) BrokerDefaultConfigs() map[string]string { return maps.Clone(img.brokerDefaults) }

// configRecords returns the records that rebuild every config of the
// image, broker defaults first, then topics by name, keys sorted: the
// trailing section of a snapshot.
func (img *Image) configRecords() []Record {
	var records []Record
	add := func(resource ConfigResource, configs map[string]string) {
		for _, key := range slices.Sorted(maps.Keys(configs)) {
			records = append(records, ConfigRecord{Resource: resource, Key: key, Value: configs[key]})
		}
	}
	add(ConfigResource{Type: ConfigBrokerDefault}, img.brokerDefaults)
	for _, name := range img.Topics() {
		add(ConfigResource{Type: ConfigTopic, Name: name}, img.topics[name].configs)
	}
	return records
}

// describeConfigs renders a resource's configs for Describe, keys sorted.
func describeConfigs(configs map[string]string) string {
	var out strings.Builder
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		fmt.Fprintf(&out, " %s=%s", key, configs[key])
	}
	return out.String()
}

// TopicConfigValue returns one config set on a topic, without copying.
func (img *Image) TopicConfigValue(topic, key string) (string, bool) {
	if t, ok := img.topics[topic]; ok {
		value, set := t.configs[key]
		return value, set
	}
	return "", false
}

// BrokerDefault returns one cluster-wide dynamic broker default.
func (img *Image) BrokerDefault(key string) (string, bool) {
	value, ok := img.brokerDefaults[key]
	return value, ok
}
