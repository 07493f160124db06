package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs translates each operation to the Backend's; SET
// with a null value is INVALID_REQUEST, DELETE with one is not.
func TestIncrementalAlterConfigs(t *testing.T) {
	for _, version := range testVersions(t, 44) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 0)
		backend.topics["orders"].configs = map[string]string{"cleanup.policy": "compact"}
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrIncrementalAlterConfigsRequest()
		request.Version = version
		add := func(name string, changes ...kmsg.IncrementalAlterConfigsRequestResourceConfig) {
			resource := kmsg.NewIncrementalAlterConfigsRequestResource()
			resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, name
			resource.Configs = changes
			request.Resources = append(request.Resources, resource)
		}
		change := func(name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
			config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			config.Name, config.Op, config.Value = name, op, value
			return config
		}
		add("orders", change("retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1000")),
			change("cleanup.policy", kmsg.IncrementalAlterConfigOpDelete, nil))
		add("missing", change("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil))
		response := roundTrip(t, h, request).(*kmsg.IncrementalAlterConfigsResponse)
		want := []int16{0, kerr.InvalidRequest.Code}
		for i, resource := range response.Resources {
			if resource.ErrorCode != want[i] {
				t.Fatalf("v%d: resource %d error %d, want %d", version, i, resource.ErrorCode, want[i])
			}
		}
		if got := backend.topics["orders"].configs; len(got) != 1 || got["retention.ms"] != "1000" {
			t.Fatalf("v%d: orders configs %v, want only retention.ms=1000", version, got)
		}
		sent := backend.alterConfigs
		if len(sent) != 1 || !sent[0].Incremental || sent[0].Changes[1].Op != controller.ConfigDelete {
			t.Fatalf("v%d: backend got %+v, want one incremental request with a DELETE", version, sent)
		}
	}
}
