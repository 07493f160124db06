package wire

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs replaces the topic's configs; a null value, an unknown
// topic, an invalid config, a broker by id and a resource named twice
// each get their code, with a message.
func TestAlterConfigs(t *testing.T) {
	for _, version := range testVersions(t, 33) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 0)
		backend.addTopic("twice", 1, 0)
		backend.topics["orders"].configs = map[string]string{"cleanup.policy": "compact"}
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrAlterConfigsRequest()
		request.Version = version
		add := func(typ kmsg.ConfigResourceType, name string, configs ...*string) {
			resource := kmsg.NewAlterConfigsRequestResource()
			resource.ResourceType, resource.ResourceName = typ, name
			for i := 0; i+1 < len(configs); i += 2 {
				config := kmsg.NewAlterConfigsRequestResourceConfig()
				config.Name, config.Value = *configs[i], configs[i+1]
				resource.Configs = append(resource.Configs, config)
			}
			request.Resources = append(request.Resources, resource)
		}
		s := kmsg.StringPtr
		add(kmsg.ConfigResourceTypeTopic, "orders", s("retention.ms"), s("1000"))
		add(kmsg.ConfigResourceTypeTopic, "missing", s("retention.ms"), s("1000"))
		add(kmsg.ConfigResourceTypeTopic, "orders-null", s("retention.ms"), nil)
		add(kmsg.ConfigResourceTypeTopic, "twice")
		add(kmsg.ConfigResourceTypeTopic, "twice")
		response := roundTrip(t, h, request).(*kmsg.AlterConfigsResponse)
		want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
		if len(response.Resources) != len(want) {
			t.Fatalf("v%d: %d resources answered, want %d", version, len(response.Resources), len(want))
		}
		for i, resource := range response.Resources {
			if resource.ErrorCode != want[i] || (want[i] != 0) != (resource.ErrorMessage != nil) {
				t.Fatalf("v%d: resource %d (%s) error %d message %v, want %d", version, i, resource.ResourceName, resource.ErrorCode, resource.ErrorMessage, want[i])
			}
		}
		if got := backend.topics["orders"].configs; len(got) != 1 || got["retention.ms"] != "1000" {
			t.Fatalf("v%d: orders configs %v, want only retention.ms=1000 (the whole set replaced)", version, got)
		}
		if len(backend.alterConfigs) != 2 {
			t.Fatalf("v%d: %d resources reached the backend, want 2", version, len(backend.alterConfigs))
		}
	}
}

// An invalid config is INVALID_CONFIG naming it; ValidateOnly changes
// nothing.
func TestAlterConfigsInvalidAndValidateOnly(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 0)
	h := newTestHandler(t, backend)
	request := kmsg.NewPtrAlterConfigsRequest()
	resource := kmsg.NewAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	config := kmsg.NewAlterConfigsRequestResourceConfig()
	config.Name, config.Value = "retention.ms", kmsg.StringPtr("soon")
	resource.Configs = append(resource.Configs, config)
	request.Resources = append(request.Resources, resource)
	response := roundTrip(t, h, request).(*kmsg.AlterConfigsResponse)
	got := response.Resources[0]
	if got.ErrorCode != kerr.InvalidConfig.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "retention.ms") {
		t.Fatalf("error %d message %v, want INVALID_CONFIG naming retention.ms", got.ErrorCode, got.ErrorMessage)
	}
	request.Resources[0].Configs[0].Value = kmsg.StringPtr("1000")
	request.ValidateOnly = true
	response = roundTrip(t, h, request).(*kmsg.AlterConfigsResponse)
	if response.Resources[0].ErrorCode != 0 || len(backend.topics["orders"].configs) != 0 {
		t.Fatalf("validate only: error %d, configs %v", response.Resources[0].ErrorCode, backend.topics["orders"].configs)
	}
}
