package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic created through kadm with configs keeps them in the metadata
// log: DescribeTopicConfigs answers them as DYNAMIC_TOPIC_CONFIG, an
// invalid config is INVALID_CONFIG naming it, and a topic with a
// max.message.bytes above the broker's accepts a record of about that size.
func TestKadmTopicConfigs(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second), kgo.ProducerBatchMaxBytes(2_000_000),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	configs := map[string]*string{"retention.ms": kadm.StringPtr("60000"), "cleanup.policy": kadm.StringPtr("compact,delete"),
		"max.message.bytes": kadm.StringPtr("2000000")}
	if created, err := admin.CreateTopic(ctx, 1, 1, configs, "configured"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	described, err := admin.DescribeTopicConfigs(ctx, "configured")
	if err != nil {
		t.Fatal(err)
	}
	resource, err := described.On("configured", nil)
	if err != nil || resource.Err != nil {
		t.Fatalf("DescribeTopicConfigs: %v %v", err, resource.Err)
	}
	got := map[string]kadm.Config{}
	for _, config := range resource.Configs {
		got[config.Key] = config
	}
	for key, want := range configs {
		if config := got[key]; config.Value == nil || *config.Value != *want || config.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("%s: %+v", key, config)
		}
	}
	if config := got["segment.ms"]; config.Value == nil || *config.Value != "604800000" {
		t.Errorf("segment.ms default: %+v", config)
	}

	// kadm returns the topic's error as the call's error too.
	bad, _ := admin.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1")}, "refused")
	if !errors.Is(bad.Err, kerr.InvalidConfig) || !strings.Contains(bad.ErrMessage, "segment.bytes") {
		t.Fatalf("invalid config: %v %q", bad.Err, bad.ErrMessage)
	}

	value := make([]byte, 1_500_000)
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "configured", Value: value}).FirstErr(); err != nil {
		t.Fatalf("a 1.5 MB record on a topic with max.message.bytes 2000000: %v", err)
	}
}
