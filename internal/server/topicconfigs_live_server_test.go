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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/record"
)

// min.insync.replicas and unclean.leader.election.enable change on a live
// topic (no longer read-only), within the replication factor; the sources
// and synonym chains follow Kafka's order: the topic's value, the
// cluster-wide dynamic default, the broker's static setting, the default;
// and DescribeBrokerConfigs of the resource "" shows the dynamic defaults.
func TestKadmLiveDecisionConfigsAndSources(t *testing.T) {
	seed := startInProcessWith(t, func(config *Config) { config.RetentionMs = 5_000_000 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if created, err := admin.CreateTopic(ctx, 1, 1, nil, "live"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}}
	if responses, err := admin.AlterTopicConfigs(ctx, set, "live"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, responses)
	}
	got := describedTopicConfigs(ctx, t, admin, "live")
	for _, name := range []string{"min.insync.replicas", "unclean.leader.election.enable"} {
		if config := got[name]; config.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("%s: %+v", name, config)
		}
	}
	above := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}
	responses, _ := admin.AlterTopicConfigs(ctx, above, "live")
	if len(responses) != 1 || !errors.Is(responses[0].Err, kerr.InvalidConfig) || !strings.Contains(responses[0].ErrMessage, "replication factor") {
		t.Fatalf("min.insync.replicas above the replication factor: %+v", responses)
	}

	if retention := got["retention.ms"]; *retention.Value != "5000000" || retention.Source.String() != "STATIC_BROKER_CONFIG" ||
		chain(retention) != "log.retention.ms=5000000 STATIC_BROKER_CONFIG, log.retention.ms=604800000 DEFAULT_CONFIG" {
		t.Errorf("retention.ms with a static log.retention.ms: %s = %s, chain %s", *retention.Value, retention.Source, chain(retention))
	}
	defaults := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}}
	if responses, err := admin.AlterBrokerConfigs(ctx, defaults); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs: %v %+v", err, responses)
	}
	got = describedTopicConfigs(ctx, t, admin, "live")
	if retention := got["retention.ms"]; *retention.Value != "3600000" || retention.Source.String() != "DYNAMIC_DEFAULT_BROKER_CONFIG" ||
		!strings.HasPrefix(chain(retention), "log.retention.ms=3600000 DYNAMIC_DEFAULT_BROKER_CONFIG, log.retention.ms=5000000 STATIC_BROKER_CONFIG") {
		t.Errorf("retention.ms under a dynamic default: %s = %s, chain %s", *retention.Value, retention.Source, chain(retention))
	}
	described, err := admin.DescribeBrokerConfigs(ctx)
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("DescribeBrokerConfigs of the cluster defaults: %v %+v", err, described)
	}
	if configs := described[0].Configs; len(configs) != 1 || configs[0].Key != "log.retention.ms" || *configs[0].Value != "3600000" ||
		configs[0].Source.String() != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Errorf("the cluster defaults: %+v", configs)
	}
}

// chain is a described config's synonyms, as "name=value SOURCE, ...".
func chain(config kadm.Config) string {
	var links []string
	for _, synonym := range config.Synonyms {
		value := "<nil>"
		if synonym.Value != nil {
			value = *synonym.Value
		}
		links = append(links, synonym.Key+"="+value+" "+synonym.Source.String())
	}
	return strings.Join(links, ", ")
}

// Produce checks a topic's configs: a record batch above the topic's
// max.message.bytes, below the broker's bound, is MESSAGE_TOO_LARGE; a
// record without a key on a compacted topic is INVALID_RECORD with
// Kafka's message; raising max.message.bytes on the live topic lets the
// batch in.
func TestKgoProduceChecksTopicConfigs(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	small := map[string]*string{"max.message.bytes": kadm.StringPtr("1000")}
	compacted := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for name, configs := range map[string]map[string]*string{"small": small, "compacted": compacted} {
		if created, err := admin.CreateTopic(ctx, 1, 1, configs, name); err != nil || created.Err != nil {
			t.Fatalf("CreateTopic %s: %v %v", name, err, created.Err)
		}
	}
	big := &kgo.Record{Topic: "small", Value: make([]byte, 2000)}
	if err := client.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("2000 bytes on max.message.bytes 1000: %v, want MESSAGE_TOO_LARGE", err)
	}
	raised := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("100000")}}
	if responses, err := admin.AlterTopicConfigs(ctx, raised, "small"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, responses)
	}
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: make([]byte, 2000)}).FirstErr(); err != nil {
		t.Fatalf("2000 bytes after max.message.bytes went to 100000: %v", err)
	}
	err = client.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("a keyed record on a compacted topic: %v", err)
	}
}

// compression.type gzip: a batch the producer sent uncompressed is stored
// and fetched gzip-compressed, and a consumer reads it back unchanged;
// set back to producer, the next batch stays as sent.
func TestKgoCompressionTypeRecompresses(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ConsumeTopics("squeezed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if created, err := admin.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": kadm.StringPtr("gzip")}, "squeezed"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	value := []byte(strings.Repeat("compress me ", 100))
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "squeezed", Key: []byte("k"), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	back := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kadm.StringPtr("producer")}}
	if responses, err := admin.AlterTopicConfigs(ctx, back, "squeezed"); err != nil || responses[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, responses)
	}
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "squeezed", Value: []byte("as sent")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if codecs := fetchedCodecs(ctx, t, client, "squeezed"); len(codecs) != 2 || codecs[0] != record.CompressionGzip || codecs[1] != record.CompressionNone {
		t.Fatalf("stored codecs %v, want gzip then none", codecs)
	}
	fetches := client.PollRecords(ctx, 2)
	if records := fetches.Records(); len(records) < 1 || string(records[0].Value) != string(value) || string(records[0].Key) != "k" {
		t.Fatalf("read back %v %v", fetches.Errors(), records)
	}
}

// fetchedCodecs fetches partition 0 of topic from offset 0 with a raw
// Fetch and returns each stored batch's codec.
func fetchedCodecs(ctx context.Context, t *testing.T, client *kgo.Client, topic string) []record.Compression {
	t.Helper()
	request := kmsg.NewPtrFetchRequest()
	request.Version, request.MaxBytes, request.ReplicaID = 11, 1<<20, -1
	listed, err := kadm.NewClient(client).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	fetchTopic := kmsg.NewFetchRequestTopic()
	fetchTopic.Topic, fetchTopic.TopicID = topic, listed[topic].ID
	partition := kmsg.NewFetchRequestTopicPartition()
	partition.PartitionMaxBytes, partition.CurrentLeaderEpoch = 1<<20, -1
	fetchTopic.Partitions = append(fetchTopic.Partitions, partition)
	request.Topics = append(request.Topics, fetchTopic)
	response, err := request.RequestWith(ctx, client)
	if err != nil || len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch: %v %+v", err, response)
	}
	fetched := response.Topics[0].Partitions[0]
	var codecs []record.Compression
	iterator := record.NewIterator(fetched.RecordBatches, record.Limits{MaxBatchBytes: 1 << 20})
	for iterator.Next() {
		codecs = append(codecs, iterator.Header().Compression())
	}
	if err := iterator.Err(); err != nil || fetched.ErrorCode != 0 {
		t.Fatalf("Fetch: error %d, %d bytes: %v", fetched.ErrorCode, len(fetched.RecordBatches), err)
	}
	return codecs
}
