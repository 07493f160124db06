package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// restartableNode is one node run in this process on a data directory and
// controller address that outlive it, so a test can stop it, change its
// files, and start it again.
type restartableNode struct {
	t          testing.TB
	dataDir    string
	controller string
	kafka      string
	stop       func()
}

func newRestartableNode(t testing.TB) *restartableNode {
	n := &restartableNode{t: t, dataDir: filepath.Join(t.TempDir(), "node"), controller: freePort(t)}
	n.start()
	t.Cleanup(func() {
		if n.stop != nil {
			n.stop()
		}
	})
	return n
}

func (n *restartableNode) start() {
	n.t.Helper()
	node, err := New(Config{ID: 1, Controllers: map[metadata.BrokerID]string{1: n.controller}, KafkaListen: "127.0.0.1:0",
		DataDir: n.dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- node.Run(ctx) }()
	n.stop = func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				n.t.Errorf("run: %v", err)
			}
		case <-time.After(15 * time.Second):
			n.t.Error("the node did not stop")
		}
		n.stop = nil
	}
	waitUnfenced(n.t, node.Addr())
	n.kafka = node.KafkaAddr()
}

// hostileBatch is a CRC-valid batch whose header says what the issue 11
// client's did: the zstd attribute over garbage, lastOffsetDelta 2^31-2 and
// recordCount 2^31-1, at base offset base (zero from a client).
func hostileBatch(base int64) []byte {
	payload := bytes.Repeat([]byte{0xab}, 4)
	batch := make([]byte, 61, 61+len(payload))
	binary.BigEndian.PutUint64(batch[0:], uint64(base))
	binary.BigEndian.PutUint32(batch[8:], uint32(49+len(payload)))
	binary.BigEndian.PutUint32(batch[12:], 0) // partitionLeaderEpoch
	batch[16] = 2
	binary.BigEndian.PutUint16(batch[21:], 4) // zstd
	binary.BigEndian.PutUint32(batch[23:], math.MaxInt32-1)
	binary.BigEndian.PutUint64(batch[43:], math.MaxUint64) // producerId -1
	binary.BigEndian.PutUint16(batch[51:], math.MaxUint16) // producerEpoch -1
	binary.BigEndian.PutUint32(batch[53:], math.MaxUint32) // baseSequence -1
	binary.BigEndian.PutUint32(batch[57:], math.MaxInt32)
	batch = append(batch, payload...)
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	return batch
}

// produceTo produces count records to one partition with acks=all and
// fails the test on any error.
func produceTo(ctx context.Context, t *testing.T, seed, topic string, partition int32, count int) {
	t.Helper()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range count {
		record := &kgo.Record{Partition: partition, Value: fmt.Appendf(nil, "value-%d", i)}
		if err := producer.ProduceSync(ctx, record).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, partition, err)
		}
	}
}

// A node whose data directory holds a partition it cannot open (the
// segment the issue 11 crash left, synced below the recovery point) starts,
// takes that partition offline and serves the other. Before, recovery
// panicked on every start until the directory was deleted by hand.
func TestNodeStartsWithAnUnindexableSegment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node; skipped with -short")
	}
	node := newRestartableNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(node.kafka))
	if err != nil {
		t.Fatal(err)
	}
	createTopic(ctx, t, admin, "orders", 2)
	admin.Close()
	produceTo(ctx, t, node.kafka, "orders", 0, 3)
	node.stop()

	dir := filepath.Join(node.dataDir, "partitions", "orders-1")
	var segment []byte
	for i := range int64(3) {
		segment = append(segment, hostileBatch(i*math.MaxInt32)...)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.log", 0)), segment, 0o644); err != nil {
		t.Fatal(err)
	}
	end := 3 * int64(math.MaxInt32)
	checkpoint := fmt.Appendf(nil, "0\nhigh-watermark %d\nrecovery-point %d\nlog-start-offset 0\n", end, end)
	if err := os.WriteFile(filepath.Join(dir, "offsets-checkpoint"), checkpoint, 0o644); err != nil {
		t.Fatal(err)
	}

	node.start()
	produceTo(ctx, t, node.kafka, "orders", 0, 2)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(node.kafka), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for received := 0; received < 5; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 5 records from orders-0: %v", received, ctx.Err())
		}
		received += len(fetches.Records())
	}
}
