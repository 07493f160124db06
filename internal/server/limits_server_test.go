package server

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
)

// startLimitedNode runs one node in this process with configure's changes
// to its Config and, when fs is not nil, its partition logs on fs (a node
// swaps its FS only here, before Run, so the metadata log stays on the
// real disk). It returns the node, stopped at the end of the test.
func startLimitedNode(t *testing.T, configure func(*Config), fs disk.FS) *Server {
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
	if fs != nil {
		node.fs = fs
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
	return node
}

// stallFS is the real disk, except that while its gate is shut the
// creation of a partition's segment file waits for it to open. A roll
// creates the next segment on the node loop (the segments' and indexes'
// writes and syncs run on I/O workers), so a produce that rolls stalls the
// loop as it would on a disk that stopped answering.
type stallFS struct {
	disk.FS
	mu   sync.Mutex
	shut chan struct{} // nil when open
	// stalled receives a value each time a Create starts waiting.
	stalled chan struct{}
}

func newStallFS() *stallFS { return &stallFS{FS: disk.OS(), stalled: make(chan struct{}, 16)} }

func (fs *stallFS) closeGate() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.shut == nil {
		fs.shut = make(chan struct{})
	}
}

func (fs *stallFS) openGate() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.shut != nil {
		close(fs.shut)
		fs.shut = nil
	}
}

func (fs *stallFS) Create(name string) (disk.File, error) {
	if strings.Contains(name, "partitions") && strings.HasSuffix(name, ".log") {
		fs.waitForGate()
	}
	return fs.FS.Create(name)
}

func (fs *stallFS) waitForGate() {
	fs.mu.Lock()
	shut := fs.shut
	fs.mu.Unlock()
	if shut == nil {
		return
	}
	select {
	case fs.stalled <- struct{}{}:
	default:
	}
	<-shut
}

// produceRequestBytes is a framed Produce v7 of one partition whose
// records are size bytes (not a valid batch: it is refused once the node
// loop reads it, which is after the test).
func produceRequestBytes(topic string, size int) []byte {
	request := kmsg.NewPtrProduceRequest()
	request.SetVersion(7)
	request.Acks, request.TimeoutMillis = 1, 30000
	requestTopic := kmsg.NewProduceRequestTopic()
	requestTopic.Topic = topic
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = make([]byte, size)
	requestTopic.Partitions = append(requestTopic.Partitions, partition)
	request.Topics = append(request.Topics, requestTopic)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood")).AppendRequest(nil, request, 1)
}

// liveHeap is the Go heap that survives a collection: what the broker
// holds, not the garbage it has yet to collect.
func liveHeap() uint64 {
	runtime.GC()
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	return stats.HeapAlloc
}

// 20 connections each sending 10 MiB produces while the node loop is
// stalled (a partition write that does not return): the requests read and
// not taken stay within queued.max.request.bytes, and the broker's heap
// within that plus a bounded overhead, instead of each connection reading
// up to its in-flight limit (20 x 100 x 10 MiB). Once the loop resumes the
// broker answers again.
func TestQueuedRequestBytesBoundMemoryDuringStall(t *testing.T) {
	const (
		connections  = 20
		requestBytes = 10 << 20
		queueBytes   = 64 << 20
		// overhead is what the broker holds beyond the queue: one request
		// the stalled loop has taken, a growing body's last buffer, the
		// connections' own state.
		overhead = 2*requestBytes + 16<<20
	)
	fs := newStallFS()
	node := startLimitedNode(t, func(c *Config) {
		c.KafkaMaxRequestBytes = requestBytes + 1<<20
		c.KafkaQueuedMaxRequestBytes = queueBytes
	}, fs)
	t.Cleanup(fs.openGate) // runs before the node's cleanup stops it
	seed := node.KafkaAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("stall"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	createTopicWithConfig(ctx, t, client, "stall", "segment.bytes", "16384")

	// A topic's segment is never smaller than the largest batch (1 MiB), so
	// a first batch of 600 KiB (random bytes that no codec shrinks) and a
	// second of 600 KiB, which does not fit: its append rolls, and the roll
	// creates the next segment on the loop, which the shut gate holds.
	randomBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		return b
	}
	if err := client.ProduceSync(ctx, &kgo.Record{Value: randomBytes(600 << 10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs.closeGate()
	client.Produce(ctx, &kgo.Record{Value: randomBytes(600 << 10)}, nil)
	select {
	case <-fs.stalled:
	case <-ctx.Done():
		t.Fatal("the node loop never reached the stalled roll")
	}
	request := produceRequestBytes("stall", requestBytes) // shared by every writer: counted once
	baseline := liveHeap()
	flood, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	var writers sync.WaitGroup
	for range connections {
		c, err := net.Dial("tcp", seed)
		if err != nil {
			t.Fatal(err)
		}
		writers.Add(1)
		go func() {
			defer writers.Done()
			go func() { <-flood.Done(); c.Close() }()
			for flood.Err() == nil {
				if _, err := c.Write(request); err != nil {
					return
				}
			}
		}()
	}
	peak := uint64(0)
	for began := time.Now(); time.Since(began) < 3*time.Second; time.Sleep(50 * time.Millisecond) {
		heap := liveHeap()
		held := heap - min(baseline, heap)
		peak = max(peak, held)
		if requests, bytes := node.kafka.shared.queue.queued(); bytes > queueBytes {
			t.Fatalf("the request queue holds %d requests, %d bytes; cap %d", requests, bytes, queueBytes)
		}
		if held > queueBytes+overhead {
			stopFlood()
			t.Fatalf("the broker's heap grew by %d MiB during the stall; cap %d MiB plus %d MiB", held>>20, queueBytes>>20, overhead>>20)
		}
	}
	requests, bytes := node.kafka.shared.queue.queued()
	t.Logf("during the stall: heap grew by at most %d MiB (queue cap %d MiB); %d requests, %d MiB queued",
		peak>>20, queueBytes>>20, requests, bytes>>20)
	stopFlood()
	writers.Wait()
	fs.openGate()
	checkAnswersApiVersions(t, seed)
}

// checkAnswersApiVersions sends ApiVersions on a new connection and wants
// an answer within 10 s.
func checkAnswersApiVersions(t *testing.T, seed string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, client); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
}

// createTopicWithConfig creates a one-partition topic with one topic
// config set.
func createTopicWithConfig(ctx context.Context, t *testing.T, client *kgo.Client, name, key, value string) {
	t.Helper()
	request := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = name, 1, 1
	config := kmsg.NewCreateTopicsRequestTopicConfig()
	config.Name, config.Value = key, kmsg.StringPtr(value)
	entry.Configs = append(entry.Configs, config)
	request.Topics = append(request.Topics, entry)
	request.TimeoutMillis = 10000
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	if code := response.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics: %v", kerr.ErrorForCode(code))
	}
}
