package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
	"github.com/twmb/franz-go/pkg/kerr"
)

var ordersResource = metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "orders"}

// alterAndApply decides a config change, applies it, and returns the
// resource's configs after it.
func alterAndApply(t *testing.T, c *cluster, request AlterConfigsRequest) map[string]string {
	t.Helper()
	records, code, message, err := AlterConfigs(c.image, request, rules.Rules{})
	if code != 0 || err != nil {
		t.Fatalf("%s: %s %v", CodeName(code), message, err)
	}
	c.apply(records)
	if request.Resource.Type == metadata.ConfigBrokerDefault {
		return c.image.BrokerDefaultConfigs()
	}
	return c.image.TopicConfigs(request.Resource.Name)
}

// IncrementalAlterConfigs' four operations, and AlterConfigs replacing the
// whole set (KIP-339).
func TestAlterConfigsOperations(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 2, false)
	got := alterAndApply(t, c, AlterConfigsRequest{Resource: ordersResource, Incremental: true, Changes: []ConfigChange{
		{Key: "retention.ms", Op: ConfigSet, Value: "1000"}, {Key: "cleanup.policy", Op: ConfigAppend, Value: "compact"}}})
	if want := map[string]string{"retention.ms": "1000", "cleanup.policy": "delete,compact"}; !maps.Equal(got, want) {
		t.Fatalf("after SET and APPEND: %v, want %v", got, want)
	}
	got = alterAndApply(t, c, AlterConfigsRequest{Resource: ordersResource, Incremental: true, Changes: []ConfigChange{
		{Key: "cleanup.policy", Op: ConfigSubtract, Value: "delete"}, {Key: "retention.ms", Op: ConfigDelete}}})
	if want := map[string]string{"cleanup.policy": "compact"}; !maps.Equal(got, want) {
		t.Fatalf("after SUBTRACT and DELETE: %v, want %v", got, want)
	}
	got = alterAndApply(t, c, AlterConfigsRequest{Resource: ordersResource, Changes: []ConfigChange{{Key: "segment.ms", Value: "5000"}}})
	if want := map[string]string{"segment.ms": "5000"}; !maps.Equal(got, want) {
		t.Fatalf("AlterConfigs replaces the set: %v, want %v", got, want)
	}
	if records, _, _, _ := AlterConfigs(c.image, AlterConfigsRequest{Resource: ordersResource, Incremental: true,
		Changes: []ConfigChange{{Key: "segment.ms", Op: ConfigSet, Value: "5000"}}}, rules.Rules{}); len(records) != 0 {
		t.Fatalf("an unchanged value wrote %v", records)
	}
	got = alterAndApply(t, c, AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigBrokerDefault}, Incremental: true,
		Changes: []ConfigChange{{Key: "log.retention.ms", Op: ConfigSet, Value: "-1"}}})
	if got["log.retention.ms"] != "-1" {
		t.Fatalf("broker default: %v", got)
	}
}

// Rule alter-whole-or-nothing, and the codes.
func TestAlterConfigsRefusals(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 2, false)
	set := func(key, value string) ConfigChange { return ConfigChange{Key: key, Op: ConfigSet, Value: value} }
	for _, tc := range []struct {
		name    string
		request AlterConfigsRequest
		want    int16
		message string
	}{
		{"unknown topic", AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "none"},
			Changes: []ConfigChange{set("retention.ms", "1")}}, kerr.UnknownTopicOrPartition.Code, "none"},
		{"one bad change refuses all", AlterConfigsRequest{Resource: ordersResource, Incremental: true,
			Changes: []ConfigChange{set("retention.ms", "1"), set("segment.bytes", "1")}}, kerr.InvalidConfig.Code, "segment.bytes"},
		{"unknown config", AlterConfigsRequest{Resource: ordersResource, Changes: []ConfigChange{set("no.such", "1")}},
			kerr.InvalidConfig.Code, "no.such"},
		{"append to a scalar", AlterConfigsRequest{Resource: ordersResource, Incremental: true,
			Changes: []ConfigChange{{Key: "retention.ms", Op: ConfigAppend, Value: "1"}}}, kerr.InvalidConfig.Code, "not a list"},
		{"min.insync above the replication factor", AlterConfigsRequest{Resource: ordersResource, Incremental: true,
			Changes: []ConfigChange{set("min.insync.replicas", "4")}}, kerr.InvalidConfig.Code, "min.insync.replicas"},
		{"a broker default min.insync above a topic's replication factor", AlterConfigsRequest{
			Resource: metadata.ConfigResource{Type: metadata.ConfigBrokerDefault},
			Changes:  []ConfigChange{set("min.insync.replicas", "4")}}, kerr.InvalidConfig.Code, "orders"},
		{"twice", AlterConfigsRequest{Resource: ordersResource, Incremental: true,
			Changes: []ConfigChange{set("retention.ms", "1"), set("retention.ms", "2")}}, kerr.InvalidRequest.Code, "retention.ms"},
		{"unknown op", AlterConfigsRequest{Resource: ordersResource, Incremental: true,
			Changes: []ConfigChange{{Key: "retention.ms", Op: 9}}}, kerr.InvalidRequest.Code, "operation"},
		{"static broker config", AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigBrokerDefault},
			Changes: []ConfigChange{set("log.dirs", "/tmp")}}, kerr.InvalidConfig.Code, "log.dirs"},
		{"a named broker", AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigBrokerDefault, Name: "1"},
			Changes: []ConfigChange{set("log.retention.ms", "1")}}, kerr.InvalidRequest.Code, "empty name"},
	} {
		records, code, message, err := AlterConfigs(c.image, tc.request, rules.Rules{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if code != tc.want || len(records) != 0 || !strings.Contains(message, tc.message) {
			t.Errorf("%s: %s %q %v, want %s naming %q", tc.name, CodeName(code), message, records, CodeName(tc.want), tc.message)
		}
	}
	if got := c.image.TopicConfigs("orders"); len(got) != 0 {
		t.Fatalf("refused changes left %v", got)
	}
}
