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
	// The topic is compacted: its records need a key (INVALID_RECORD without).
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "configured", Key: []byte("k"), Value: value}).FirstErr(); err != nil {
		t.Fatalf("a 1.5 MB record on a topic with max.message.bytes 2000000: %v", err)
	}
}

// describedTopicConfigs is a topic's configs as DescribeTopicConfigs
// answers them.
func describedTopicConfigs(ctx context.Context, t *testing.T, admin *kadm.Client, topic string) map[string]kadm.Config {
	t.Helper()
	described, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	resource, err := described.On(topic, nil)
	if err != nil || resource.Err != nil {
		t.Fatalf("DescribeTopicConfigs: %v %v", err, resource.Err)
	}
	got := map[string]kadm.Config{}
	for _, config := range resource.Configs {
		got[config.Key] = config
	}
	return got
}

// kadm's AlterTopicConfigsState (AlterConfigs) replaces a topic's configs
// and AlterTopicConfigs (IncrementalAlterConfigs) sets and deletes single
// ones; DescribeTopicConfigs on the answering node sees each change at
// once, the broker's log config follows, and an invalid value or unknown
// topic gets its code.
func TestKadmAlterTopicConfigs(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	created := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if created, err := admin.CreateTopic(ctx, 1, 1, created, "altered"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	state := []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("120000")}}
	if responses, err := admin.AlterTopicConfigsState(ctx, state, "altered"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigsState: %v %+v", err, responses)
	}
	got := describedTopicConfigs(ctx, t, admin, "altered")
	if got["retention.ms"].Source.String() != "DYNAMIC_TOPIC_CONFIG" || *got["retention.ms"].Value != "120000" ||
		got["cleanup.policy"].Source.String() != "DEFAULT_CONFIG" {
		t.Fatalf("after AlterConfigs: retention.ms %+v, cleanup.policy %+v (the whole set replaced)", got["retention.ms"], got["cleanup.policy"])
	}
	incremental := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("3600000")}, {Op: kadm.DeleteConfig, Name: "retention.ms"}}
	if responses, err := admin.AlterTopicConfigs(ctx, incremental, "altered"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, responses)
	}
	got = describedTopicConfigs(ctx, t, admin, "altered")
	if *got["segment.ms"].Value != "3600000" || got["retention.ms"].Source.String() != "DEFAULT_CONFIG" {
		t.Fatalf("after SET and DELETE: segment.ms %+v, retention.ms %+v", got["segment.ms"], got["retention.ms"])
	}
	bad := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}
	responses, _ := admin.AlterTopicConfigs(ctx, bad, "altered")
	if len(responses) != 1 || !errors.Is(responses[0].Err, kerr.InvalidConfig) || !strings.Contains(responses[0].ErrMessage, "retention.ms") {
		t.Fatalf("invalid retention.ms: %+v", responses)
	}
	responses, _ = admin.AlterTopicConfigs(ctx, incremental[:1], "missing")
	if len(responses) != 1 || !errors.Is(responses[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %+v", responses)
	}
}

// A retention.ms lowered by IncrementalAlterConfigs reaches the broker's
// log config: the next retention check deletes the expired records, and
// the log start offset moves. The topic is created with segment.bytes 14,
// Kafka's smallest, which must still open (rule segment-holds-a-batch).
func TestAlteredRetentionReachesTheLog(t *testing.T) {
	seed := startInProcessWith(t, func(config *Config) { config.RetentionCheckInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if created, err := admin.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("14")}, "expiring"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	for i := range 3 {
		if err := client.ProduceSync(ctx, &kgo.Record{Topic: "expiring", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	startOffset := func() int64 {
		listed, err := admin.ListStartOffsets(ctx, "expiring")
		if err != nil {
			t.Fatal(err)
		}
		offset, _ := listed.Lookup("expiring", 0)
		return offset.Offset
	}
	time.Sleep(200 * time.Millisecond) // several retention checks at seven days' retention
	if offset := startOffset(); offset != 0 {
		t.Fatalf("log start offset %d before retention.ms changed", offset)
	}
	lowered := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}
	if responses, err := admin.AlterTopicConfigs(ctx, lowered, "expiring"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, responses)
	}
	for began := time.Now(); startOffset() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Since(began) > 10*time.Second {
			t.Fatal("the log start offset did not move after retention.ms=1")
		}
	}
}

// The cluster-wide broker defaults (BROKER with an empty name) are
// alterable; a broker named by id is INVALID_REQUEST, since tide keeps no
// per-broker dynamic configs.
func TestKadmAlterBrokerDefaults(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	defaults := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}}
	if responses, err := admin.AlterBrokerConfigs(ctx, defaults); err != nil || len(responses) != 1 || responses[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs of the cluster defaults: %v %+v", err, responses)
	}
	responses, _ := admin.AlterBrokerConfigs(ctx, defaults, 1)
	if len(responses) != 1 || !errors.Is(responses[0].Err, kerr.InvalidRequest) {
		t.Fatalf("AlterBrokerConfigs of broker 1: %+v", responses)
	}
}
