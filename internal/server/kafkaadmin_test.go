package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// startInProcess runs one node in this process (so -race sees the loop and
// the connections) and returns its Kafka address.
func startInProcess(t testing.TB) string {
	t.Helper()
	return startInProcessWith(t, nil)
}

// startInProcessWith is startInProcess with configure changing the node's
// Config first.
func startInProcessWith(t testing.TB, configure func(*Config)) string {
	t.Helper()
	config := Config{ID: 1, Controllers: map[metadata.BrokerID]string{1: freePort(t)}, KafkaListen: "127.0.0.1:0",
		DataDir: filepath.Join(t.TempDir(), "node"), Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(&config)
	}
	node, err := New(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("the node did not stop")
		}
	})
	waitUnfenced(t, node.Addr())
	return node.KafkaAddr()
}

// waitUnfenced waits until the node's broker is registered and unfenced:
// before, no topic can be placed on it.
func waitUnfenced(t testing.TB, controller string) {
	t.Helper()
	for began := time.Now(); time.Since(began) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		client, err := Dial(ctx, controller)
		if err == nil {
			status, err := client.Status(ctx)
			client.Close()
			if err == nil && status.BrokerEpoch >= 0 && !status.Fenced && len(status.Brokers) == 1 && !status.Brokers[0].Fenced {
				cancel()
				return
			}
		}
		cancel()
	}
	t.Fatal("the broker was not unfenced within 10 s")
}

// The controller requests a client sends through a broker: CreateTopics
// (validate-only creates nothing), ElectLeaders and DeleteTopics, each
// answered once this broker's metadata shows the change.
func TestKafkaAdminRequests(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	validate := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = "checked", 2, 1
	validate.Topics, validate.ValidateOnly = append(validate.Topics, entry), true
	if response, err := validate.RequestWith(ctx, client); err != nil || response.Topics[0].ErrorCode != 0 {
		t.Fatalf("validate-only: %v %+v", err, response)
	}
	if names := topicNames(ctx, t, client); len(names) != 0 {
		t.Fatalf("validate-only created %v", names)
	}
	createTopic(ctx, t, client, "orders", 2)
	if names := topicNames(ctx, t, client); len(names) != 1 || names[0] != "orders" {
		t.Fatalf("topics after CreateTopics: %v", names)
	}

	elect := kmsg.NewPtrElectLeadersRequest()
	elect.TimeoutMillis = 5000
	electResponse, err := elect.RequestWith(ctx, client)
	if err != nil || electResponse.ErrorCode != 0 {
		t.Fatalf("ElectLeaders: %v, %v", err, kerr.ErrorForCode(electResponse.ErrorCode))
	}

	remove := kmsg.NewPtrDeleteTopicsRequest()
	named := kmsg.NewDeleteTopicsRequestTopic()
	named.Topic = kmsg.StringPtr("orders")
	remove.Topics, remove.TopicNames, remove.TimeoutMillis = append(remove.Topics, named), []string{"orders"}, 5000
	deleted, err := remove.RequestWith(ctx, client)
	if err != nil || len(deleted.Topics) != 1 || deleted.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics: %v, %+v", err, deleted)
	}
	if names := topicNames(ctx, t, client); len(names) != 0 {
		t.Fatalf("topics after DeleteTopics: %v", names)
	}
}

func topicNames(ctx context.Context, t *testing.T, client *kgo.Client) []string {
	t.Helper()
	response, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, topic := range response.Topics {
		names = append(names, *topic.Topic)
	}
	return names
}

// Producers at acks=0 and acks=1 (no idempotence) are served too: acks=0
// gets no response, and its records are in the log all the same.
func TestKafkaAcksNoneAndLeader(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, "loose", 1)
	var sent []*kgo.Record
	for _, acks := range []kgo.Acks{kgo.NoAck(), kgo.LeaderAck()} {
		producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("loose"), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		var batch []*kgo.Record
		for i := range 20 {
			batch = append(batch, &kgo.Record{Key: []byte(fmt.Sprintf("%d-%d", len(sent), i)), Value: []byte{byte(i)},
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte{byte(i)}}}})
		}
		if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		producer.Close()
		sent = append(sent, batch...)
	}
	checkConsumed(t, sent, consumeRecords(ctx, t, seed, "loose", len(sent)))
}
