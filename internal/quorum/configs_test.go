package quorum

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// An AlterConfigs through the quorum is committed on every node and
// answers the resource's configs after it; a refusal answers its message.
func TestQuorumAlterConfigs(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.register(1, "first")
	if answer := createTopic(c, "events", 1, 1); answer.ErrorCode != 0 {
		t.Fatalf("create topic: %s", controller.CodeName(answer.ErrorCode))
	}
	resource := metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "events"}
	answer := c.request(c.active().id, Request{From: 1, AlterConfigs: &controller.AlterConfigsRequest{Resource: resource, Incremental: true,
		Changes: []controller.ConfigChange{{Key: "retention.ms", Value: "1000"}}}})
	want := map[string]string{"retention.ms": "1000"}
	if answer.ErrorCode != 0 || answer.AlterConfigs == nil || !maps.Equal(answer.AlterConfigs.Configs, want) {
		t.Fatalf("alter: code %d answer %+v, want configs %v", answer.ErrorCode, answer.AlterConfigs, want)
	}
	c.tick(5)
	c.requireSameImages()
	if got := c.nodes[2].q.Image().TopicConfigs("events"); !maps.Equal(got, want) {
		t.Fatalf("node 2 has configs %v, want %v", got, want)
	}
	answer = c.request(c.active().id, Request{From: 1, AlterConfigs: &controller.AlterConfigsRequest{Resource: resource, Incremental: true,
		Changes: []controller.ConfigChange{{Key: "retention.ms", Value: "soon"}}}})
	if answer.ErrorCode != kerr.InvalidConfig.Code || answer.AlterConfigs == nil || !strings.Contains(answer.AlterConfigs.Message, "retention.ms") {
		t.Fatalf("invalid alter: code %d answer %+v, want INVALID_CONFIG naming retention.ms", answer.ErrorCode, answer.AlterConfigs)
	}
}
