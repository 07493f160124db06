package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The sync workers under load (run with -race): acks=all writes are
// acknowledged through syncs that complete off the node loop, a topic is
// deleted while its logs have syncs in flight, and the node stops (the
// cleanup of startInProcess) with syncs still queued: Run returns without
// an error, and no sync touches a closed file.
func TestSyncWorkersWithDeletionAndShutdown(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, "doomed", 4)
	createTopic(ctx, t, admin, "kept", 1)
	sent := produceRecords(ctx, t, seed, "kept", 500)
	checkConsumed(t, sent, consumeRecords(ctx, t, seed, "kept", len(sent)))

	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	value := make([]byte, 200)
	for i := range 2000 {
		topic := "doomed"
		if i%2 == 0 {
			topic = "kept"
		}
		producer.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(*kgo.Record, error) {})
		if i == 1000 {
			if _, err := kadm.NewClient(admin).DeleteTopics(ctx, "doomed"); err != nil {
				t.Fatalf("DeleteTopics: %v", err)
			}
		}
	}
	// A last acks=all write must still be acknowledged, through a sync.
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "kept", Value: value}).FirstErr(); err != nil {
		t.Fatalf("a write after the deletion: %v", err)
	}
	// More writes left in flight for the shutdown to meet.
	for range 500 {
		producer.Produce(ctx, &kgo.Record{Topic: "kept", Value: value}, func(*kgo.Record, error) {})
	}
}
