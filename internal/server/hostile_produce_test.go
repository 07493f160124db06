package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
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

// rawProduce sends request at its own version on a fresh connection and
// decodes the answer: kgo would negotiate the version itself.
func rawProduce(t *testing.T, address string, request *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	t.Helper()
	c, err := net.DialTimeout("tcp", address, 5*time.Second)
	if err != nil {
		t.Fatalf("the node no longer accepts connections: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))
	if _, err := c.Write(formatter.AppendRequest(nil, request, 1)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("no answer to a v%d produce: %v", request.Version, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatal(err)
	}
	response := request.ResponseKind().(*kmsg.ProduceResponse)
	body := frame[4:] // the correlation id
	if response.IsFlexible() {
		body = body[1:] // an empty tag buffer in the response header
	}
	if err := response.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return response
}

// hostileRequest is a Produce at version with acks=1 carrying records to
// partition 0 of topic.
func hostileRequest(version int16, topic string, records []byte) *kmsg.ProduceRequest {
	request := kmsg.NewPtrProduceRequest()
	request.Version, request.Acks, request.TimeoutMillis = version, 1, 5000
	entry := kmsg.NewProduceRequestTopic()
	entry.Topic = topic
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = records
	entry.Partitions = append(entry.Partitions, partition)
	request.Topics = append(request.Topics, entry)
	return request
}

// Each finding of issue 11 against one real node: the hostile produce is
// refused with Kafka's code, the log end offset does not move, and the node
// serves on. Before, the first case took the node down for good.
func TestHostileProducesAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node; skipped with -short")
	}
	address := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(address))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	createTopic(ctx, t, client, "hostile", 1)
	plain := func(records ...record.Record) []byte {
		return record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: time.Now().UnixMilli(), Records: records})
	}
	lying, _ := record.ParseHeader(plain(record.Record{Value: []byte("a")}, record.Record{Value: []byte("b")}))
	lying.RecordCount, lying.LastOffsetDelta, lying.Attributes = 9, 8, int16(record.CompressionLZ4)
	lyingBatch := record.EncodeBatch(lying, recordtest.Compress(record.CompressionLZ4,
		plain(record.Record{Value: []byte("a")}, record.Record{Value: []byte("b")})[record.HeaderSize:]))
	var issue11 []byte
	for range 200 {
		issue11 = append(issue11, hostileBatch(0)...)
	}
	for _, c := range []struct {
		name    string
		version int16
		records []byte
		code    int16
	}{
		{"200 batches of 2^31-1 offsets (issue 11)", 7, issue11, kerr.InvalidRecord.Code},
		{"one batch of 2^31-1 offsets over garbage", 7, hostileBatch(0), kerr.CorruptMessage.Code},
		{"a zstd bomb", 9, recordtest.Bomb(record.CompressionZstd, 256<<20, 1), kerr.InvalidRecord.Code},
		{"a gzip bomb", 9, recordtest.Bomb(record.CompressionGzip, 128<<20, 1), kerr.InvalidRecord.Code},
		{"a gzip attribute on garbage", 9, record.EncodeBatch(record.Header{Attributes: int16(record.CompressionGzip), RecordCount: 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, []byte("plainly not gzip")), kerr.CorruptMessage.Code},
		{"a lying record count", 9, lyingBatch, kerr.InvalidRecord.Code},
		{"a control batch", 9, record.Build(record.BuildOptions{Control: true, LeaderEpoch: -1, Records: []record.Record{{Value: []byte("c")}}}),
			kerr.InvalidRecord.Code},
		{"a stray transactional bit", 9, record.Build(record.BuildOptions{Transactional: true, LeaderEpoch: -1,
			Producer: &record.ProducerState{ProducerID: 1, BaseSequence: 0}, Records: []record.Record{{Value: []byte("t")}}}),
			kerr.TransactionalIDAuthorizationFailed.Code},
		{"two batches in one partition", 9, append(plain(record.Record{Value: []byte("1")}), plain(record.Record{Value: []byte("2")})...),
			kerr.InvalidRecord.Code},
		{"zstd below v7", 6, recordtest.CompressBatch(plain(record.Record{Value: []byte("z")}), record.CompressionZstd),
			kerr.UnsupportedCompressionType.Code},
	} {
		response := rawProduce(t, address, hostileRequest(c.version, "hostile", c.records))
		if got := response.Topics[0].Partitions[0].ErrorCode; got != c.code {
			t.Errorf("%s: %s, want %s", c.name, kerr.ErrorForCode(got), kerr.ErrorForCode(c.code))
		}
		checkOffsets(ctx, t, client, "hostile", 0, 0)
	}
	// The node serves on: a producer's compressed batches go through.
	producer, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.DefaultProduceTopic("hostile"),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the hostile ones: %v", err)
	}
	checkOffsets(ctx, t, client, "hostile", 0, 1)
}
