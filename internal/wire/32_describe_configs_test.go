package wire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfigsResource(kind kmsg.ConfigResourceType, name string, configs ...string) kmsg.DescribeConfigsRequestResource {
	resource := kmsg.NewDescribeConfigsRequestResource()
	resource.ResourceType, resource.ResourceName, resource.ConfigNames = kind, name, configs
	return resource
}

func configValues(resource kmsg.DescribeConfigsResponseResource) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	values := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, config := range resource.Configs {
		values[config.Name] = config
	}
	return values
}

func TestDescribeConfigs(t *testing.T) {
	for _, version := range testVersions(t, 32) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 0)
		backend.topics["orders"].config.MinInsyncReplicas = 2
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrDescribeConfigsRequest()
		request.Version, request.IncludeSynonyms = version, true
		request.Resources = []kmsg.DescribeConfigsRequestResource{
			describeConfigsResource(kmsg.ConfigResourceTypeTopic, "orders"),
			describeConfigsResource(kmsg.ConfigResourceTypeTopic, "orders", "segment.bytes", "no.such.config"),
			describeConfigsResource(kmsg.ConfigResourceTypeBroker, "1"),
			describeConfigsResource(kmsg.ConfigResourceTypeTopic, "missing"),
			describeConfigsResource(kmsg.ConfigResourceTypeBroker, "2"),
			describeConfigsResource(kmsg.ConfigResourceTypeBrokerLogger, "1"),
		}
		response := roundTrip(t, h, request).(*kmsg.DescribeConfigsResponse)
		resources := response.Resources
		topic := configValues(resources[0])
		if got := topic["min.insync.replicas"]; *got.Value != "2" || got.Source != kmsg.ConfigSourceDynamicTopicConfig || got.ReadOnly {
			t.Fatalf("v%d: min.insync.replicas %+v", version, got)
		}
		if got := topic["unclean.leader.election.enable"]; *got.Value != "false" || got.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("v%d: unclean.leader.election.enable %+v", version, got)
		}
		// Rule read-only-configs: what AlterConfigs changes is not read-only.
		if got := topic["segment.bytes"]; got.ReadOnly || !broker1ReadOnly(resources[2], "log.segment.bytes") {
			t.Fatalf("v%d: segment.bytes read-only %v, or the broker's log.segment.bytes not", version, got.ReadOnly)
		}
		if got := topic["segment.bytes"]; *got.Value != "1073741824" || len(got.ConfigSynonyms) != 1 || got.ConfigSynonyms[0].Name != "log.segment.bytes" {
			t.Fatalf("v%d: segment.bytes %+v", version, got)
		}
		if version >= 3 && topic["retention.ms"].ConfigType != kmsg.ConfigTypeLong {
			t.Fatalf("v%d: retention.ms type %d", version, topic["retention.ms"].ConfigType)
		}
		if len(resources[1].Configs) != 1 || resources[1].Configs[0].Name != "segment.bytes" {
			t.Fatalf("v%d: filtered configs %+v", version, resources[1].Configs)
		}
		broker := configValues(resources[2])
		if got := broker["default.replication.factor"]; got.Value == nil || *got.Value != "1" || got.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Fatalf("v%d: default.replication.factor %+v", version, got)
		}
		for i, want := range []int16{kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code} {
			if got := resources[3+i]; got.ErrorCode != want || got.ErrorMessage == nil {
				t.Fatalf("v%d: resource %s error %d, want %d", version, got.ResourceName, got.ErrorCode, want)
			}
		}
	}
}

// A config the metadata log sets on a topic is described with its value
// and TOPIC_CONFIG; the others keep the broker's or Kafka's default, with
// their type and, when asked, their documentation.
func TestDescribeConfigsOfTopicConfigs(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	backend.topics["orders"].configs = map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "60000"}
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrDescribeConfigsRequest()
	request.Version, request.IncludeDocumentation = 4, true
	request.Resources = []kmsg.DescribeConfigsRequestResource{describeConfigsResource(kmsg.ConfigResourceTypeTopic, "orders")}
	response := roundTrip(t, h, request).(*kmsg.DescribeConfigsResponse)
	values := configValues(response.Resources[0])
	for name, want := range map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "60000"} {
		if got := values[name]; got.Value == nil || *got.Value != want || got.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: %+v", name, got)
		}
	}
	ratio := values["min.cleanable.dirty.ratio"]
	if ratio.Value == nil || *ratio.Value != "0.5" || ratio.Source != kmsg.ConfigSourceDefaultConfig || ratio.ConfigType != kmsg.ConfigTypeDouble ||
		ratio.Documentation == nil || *ratio.Documentation == "" {
		t.Errorf("min.cleanable.dirty.ratio: %+v", ratio)
	}
	if policy := values["cleanup.policy"]; policy.ConfigType != kmsg.ConfigTypeList {
		t.Errorf("cleanup.policy type %v", policy.ConfigType)
	}
}

// broker1ReadOnly reports whether a broker resource's config is read-only.
func broker1ReadOnly(resource kmsg.DescribeConfigsResponseResource, name string) bool {
	got, ok := configValues(resource)[name]
	return ok && got.ReadOnly
}

// Sources and synonym chains as Kafka's ConfigHelper gives them: the
// topic's own value, then the cluster-wide dynamic default, then the
// broker's static setting, then the default; each only where set, the
// first giving the value. The broker resource "" shows the dynamic
// defaults, alterable; a broker by id its settings, read-only.
func TestDescribeConfigsSynonymChains(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	backend.topics["orders"].configs = map[string]string{"retention.ms": "60000"}
	backend.cluster.DynamicDefaults = map[string]string{"log.retention.ms": "120000", "log.segment.bytes": "2000000"}
	backend.cluster.Config.Static = map[string]string{"log.retention.ms": "180000", "log.retention.bytes": "5000"}
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrDescribeConfigsRequest()
	request.Version, request.IncludeSynonyms = 4, true
	request.Resources = []kmsg.DescribeConfigsRequestResource{
		describeConfigsResource(kmsg.ConfigResourceTypeTopic, "orders"),
		describeConfigsResource(kmsg.ConfigResourceTypeBroker, ""),
		describeConfigsResource(kmsg.ConfigResourceTypeBroker, "1"),
	}
	response := roundTrip(t, h, request).(*kmsg.DescribeConfigsResponse)
	topic := configValues(response.Resources[0])
	for name, want := range map[string]string{
		"retention.ms":    "retention.ms=60000 DYNAMIC_TOPIC_CONFIG, log.retention.ms=120000 DYNAMIC_DEFAULT_BROKER_CONFIG, log.retention.ms=180000 STATIC_BROKER_CONFIG, log.retention.ms=604800000 DEFAULT_CONFIG",
		"segment.bytes":   "log.segment.bytes=2000000 DYNAMIC_DEFAULT_BROKER_CONFIG, log.segment.bytes=1073741824 DEFAULT_CONFIG",
		"retention.bytes": "log.retention.bytes=5000 STATIC_BROKER_CONFIG, log.retention.bytes=-1 DEFAULT_CONFIG",
		"segment.ms":      "log.roll.ms=604800000 DEFAULT_CONFIG",
	} {
		got := topic[name]
		if chain := describeChain(got); chain != want || *got.Value != *got.ConfigSynonyms[0].Value || got.Source != got.ConfigSynonyms[0].Source {
			t.Errorf("%s: %s = %s, chain %s\nwant chain %s", name, *got.Value, got.Source, chain, want)
		}
	}
	defaults := response.Resources[1].Configs
	if len(defaults) != 2 || defaults[0].Name != "log.retention.ms" || defaults[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		defaults[0].ReadOnly || *defaults[1].Value != "2000000" {
		t.Errorf("the cluster-wide defaults: %+v", defaults)
	}
	broker := configValues(response.Resources[2])
	if got := broker["log.retention.ms"]; *got.Value != "120000" || got.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || !got.ReadOnly {
		t.Errorf("broker 1 log.retention.ms: %+v", got)
	}
	if got := broker["log.retention.bytes"]; *got.Value != "5000" || got.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker 1 log.retention.bytes: %+v", got)
	}
}

func describeChain(config kmsg.DescribeConfigsResponseResourceConfig) string {
	var links []string
	for _, synonym := range config.ConfigSynonyms {
		links = append(links, fmt.Sprintf("%s=%s %s", synonym.Name, *synonym.Value, synonym.Source))
	}
	return strings.Join(links, ", ")
}
