package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
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

// slowSyncFS makes every file's Sync take delay: a slow disk.
type slowSyncFS struct {
	disk.FS
	delay time.Duration
}

func (f slowSyncFS) Create(name string) (disk.File, error) { return f.wrap(f.FS.Create(name)) }
func (f slowSyncFS) Open(name string) (disk.File, error)   { return f.wrap(f.FS.Open(name)) }

func (f slowSyncFS) wrap(file disk.File, err error) (disk.File, error) {
	if err != nil {
		return nil, err
	}
	return slowSyncFile{File: file, delay: f.delay}, nil
}

type slowSyncFile struct {
	disk.File
	delay time.Duration
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay)
	return f.File.Sync()
}

// The node loop never waits for a disk sync: with every partition sync
// taking 200 ms and acks=all writes keeping a log dirty all the time,
// requests that need no sync (Metadata) are still answered at once, and
// the writes are acknowledged through the slow syncs. With the sync on the
// loop, each pass that wrote would hold every request for 200 ms.
func TestSlowSyncsDoNotBlockTheLoop(t *testing.T) {
	config := Config{ID: 1, Controllers: map[metadata.BrokerID]string{1: freePort(t)}, KafkaListen: "127.0.0.1:0",
		DataDir: filepath.Join(t.TempDir(), "node"), Logger: slog.New(slog.DiscardHandler)}
	node, err := New(config)
	if err != nil {
		t.Fatal(err)
	}
	node.fs = slowSyncFS{FS: node.fs, delay: 200 * time.Millisecond} // the partition logs' disk
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- node.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	waitUnfenced(t, node.Addr())
	seed := node.KafkaAddr()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("slow"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	createTopic(ctx, t, client, "slow", 1)
	var acknowledged atomic.Int64
	writing, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	go func() {
		for writing.Err() == nil {
			if client.ProduceSync(writing, &kgo.Record{Value: []byte("v")}).FirstErr() == nil {
				acknowledged.Add(1)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the writes are under way
	latencies := make([]time.Duration, 10)
	for i := range latencies {
		began := time.Now()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client); err != nil {
			t.Fatal(err)
		}
		latencies[i] = time.Since(began)
		time.Sleep(37 * time.Millisecond)
	}
	stopWriting()
	slices.Sort(latencies)
	if median := latencies[len(latencies)/2]; median > 60*time.Millisecond {
		t.Errorf("Metadata took %v (median of %v) while syncs of 200 ms ran: the loop waits for the disk", median, latencies)
	}
	if acknowledged.Load() == 0 {
		t.Error("no write was acknowledged through the slow syncs")
	}
	t.Logf("Metadata latencies %v; %d writes acknowledged", latencies, acknowledged.Load())
}
