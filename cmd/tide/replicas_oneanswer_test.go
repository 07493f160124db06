package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Under a steady produce, every replica's row comes from one answer of its
// broker (wire.LogEndOffsetTag), so its high watermark is never above its
// log end offset. Taking the log end from the ListOffsets that places the
// Fetch, as describe did, showed a high watermark above it whenever records
// were committed between the two answers.
func TestReplicaStatesFromOneAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	bootstrap := serveNode(t)
	mustRun(t, "", "created topic busy", "topic", "create", "busy", "--partitions", "3", "--bootstrap", bootstrap)
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("busy"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, stop := context.WithCancel(context.Background())
	var producing sync.WaitGroup
	producing.Go(func() {
		for ctx.Err() == nil {
			producer.ProduceSync(ctx, &kgo.Record{Value: []byte("x")})
		}
	})
	defer func() { stop(); producing.Wait() }()

	options := clientOptions{bootstrap: bootstrap, timeout: 5 * time.Second}
	client, metadata, err := options.connect(context.Background(), []string{"busy"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic, err := topicMetadata(metadata, "busy")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 100 {
		states := options.replicaStates(context.Background(), client, metadata, topic)
		if len(states) != 3 {
			t.Fatalf("round %d: %d replica states, want 3", round, len(states))
		}
		for key, state := range states {
			if state.unreachable != nil || state.failure != nil || !state.oneAnswer {
				t.Fatalf("round %d, partition %d: %+v", round, key.partition, state)
			}
			if state.highWatermark > state.logEndOffset {
				t.Fatalf("round %d, partition %d: high watermark %d above log end offset %d",
					round, key.partition, state.highWatermark, state.logEndOffset)
			}
		}
	}
}
