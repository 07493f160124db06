package metadata

import (
	"fmt"
	"maps"
	"slices"
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
func (img *Image) applyConfig(r ConfigRecord) (bool, error) {
	if !r.Resource.valid() || r.Key == "" {
		return false, fmt.Errorf("%w: config resource %v key %q", ErrInvariant, r.Resource, r.Key)
	}
	var configs map[string]string
	switch r.Resource.Type {
	case ConfigTopic:
		topic, ok := img.topics[r.Resource.Name]
		if !ok {
			return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Resource.Name)
		}
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
	if r.Delete {
		delete(configs, r.Key)
	} else {
		configs[r.Key] = r.Value
	}
	return true, nil
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
