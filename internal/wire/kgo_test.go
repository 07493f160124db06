package wire

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testServer frames Kafka requests off TCP connections (a 4-byte size,
// then the request) and runs them through one Handler. One goroutine per
// connection handles a request and waits for its answer before reading the
// next, so answers go out in request order; a mutex stands in for the node
// loop around the Handler and the fake Backend, and a ticker goroutine
// drives the fake's clock so long-poll fetches expire.
type testServer struct {
	mu       sync.Mutex
	handler  *Handler
	backend  *fakeBackend
	listener net.Listener
	stop     chan struct{}
	wait     sync.WaitGroup
	// seen counts the requests served, by API key and version.
	seen map[[2]int16]int
}

func startTestServer(t *testing.T) *testServer {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := newFakeBackend()
	backend.parkFetches = true
	address := listener.Addr().(*net.TCPAddr)
	backend.cluster.Brokers = []Broker{{ID: 1, Host: address.IP.String(), Port: int32(address.Port)}}
	config := testConfig()
	config.Tick = 10 * time.Millisecond
	handler, err := New(config, backend)
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{handler: handler, backend: backend, listener: listener, stop: make(chan struct{}), seen: map[[2]int16]int{}}
	s.wait.Add(2)
	go s.accept(t)
	go s.tick()
	t.Cleanup(func() {
		close(s.stop)
		listener.Close()
		s.wait.Wait()
	})
	return s
}

func (s *testServer) tick() {
	defer s.wait.Done()
	ticker := time.NewTicker(s.handler.config.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
			s.mu.Lock()
			s.backend.tick()
			s.mu.Unlock()
		}
	}
}

func (s *testServer) accept(t *testing.T) {
	defer s.wait.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.wait.Add(1)
		go func() {
			defer s.wait.Done()
			defer conn.Close()
			go func() { <-s.stop; conn.Close() }()
			if err := s.serve(conn); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.Logf("connection closed: %v", err)
			}
		}()
	}
}

// serve handles one connection's requests in order.
func (s *testServer) serve(conn net.Conn) error {
	type answer struct {
		response []byte
		err      error
	}
	answers := make(chan answer, 1)
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return err
		}
		length := binary.BigEndian.Uint32(size[:])
		if length > uint32(s.handler.config.MaxRequestBytes) {
			return fmt.Errorf("request of %d bytes", length)
		}
		request := make([]byte, length)
		if _, err := io.ReadFull(conn, request); err != nil {
			return err
		}
		s.mu.Lock()
		if len(request) >= 4 {
			s.seen[[2]int16{int16(binary.BigEndian.Uint16(request)), int16(binary.BigEndian.Uint16(request[2:]))}]++
		}
		s.handler.Handle(request, func(response []byte, err error) { answers <- answer{response, err} })
		s.mu.Unlock()
		var got answer
		select {
		case got = <-answers:
		case <-s.stop:
			return nil
		}
		if got.err != nil {
			return got.err
		}
		if got.response == nil {
			continue // acks=0
		}
		framed := binary.BigEndian.AppendUint32(nil, uint32(len(got.response)))
		if _, err := conn.Write(append(framed, got.response...)); err != nil {
			return err
		}
	}
}

// TestFranzGoClient runs franz-go's real client against the Handler: it
// negotiates versions (its newest ApiVersions, v5, gets the v0 downgrade
// answer and it retries with v3),
// creates a topic, produces with acks=all and idempotence (InitProducerId),
// and consumes everything back byte for byte from the start (ListOffsets,
// Fetch with long polls).
func TestFranzGoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a TCP listener and real clients")
	}
	s := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seed := s.listener.Addr().String()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("orders"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	createTopicWithClient(ctx, t, producer, "orders", 2)

	var sent []*kgo.Record
	for i := range 40 {
		r := &kgo.Record{Key: []byte("key-" + strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, i*7),
			Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}}, Partition: int32(i % 2)}
		sent = append(sent, r)
	}
	if err := producer.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	checkIdempotentBatches(t, s)
	received := consumeAll(ctx, t, seed, len(sent))
	checkConsumed(t, sent, received)
	checkNegotiated(t, s)
}

// checkNegotiated checks the client went through the negotiation and the
// APIs a producer and a consumer need, at the versions served.
func checkNegotiated(t *testing.T, s *testServer) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[int16]bool{}
	requests := slices.Collect(maps.Keys(s.seen))
	slices.SortFunc(requests, func(a, b [2]int16) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, request := range requests {
		t.Logf("%s v%d: %d requests", kmsg.NameForKey(request[0]), request[1], s.seen[request])
		used[request[0]] = true
	}
	above := 0
	for request, n := range s.seen {
		if request[0] == apiVersionsKey && request[1] > 3 {
			above += n
		}
	}
	if above == 0 || s.seen[[2]int16{apiVersionsKey, 3}] == 0 {
		t.Errorf("the client did not downgrade ApiVersions from its newest to v3")
	}
	for _, key := range []int16{0, 1, 2, 3, 19, 22} {
		if !used[key] {
			t.Errorf("the client never sent %s", kmsg.NameForKey(key))
		}
	}
}

func createTopicWithClient(ctx context.Context, t *testing.T, client *kgo.Client, name string, partitions int32) {
	t.Helper()
	request := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, 1
	request.Topics = append(request.Topics, topic)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	if code := response.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topics: error %d", code)
	}
}

// checkIdempotentBatches checks the producer used its producer id: every
// stored batch carries the id the fake handed out.
func checkIdempotentBatches(t *testing.T, s *testServer) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.backend.topics["orders"].partitions {
		for _, batch := range p.batches {
			if producerID := int64(binary.BigEndian.Uint64(batch[43:51])); producerID != int64(s.backend.producerID) {
				t.Fatalf("batch with producer id %d, want the idempotent producer's %d", producerID, s.backend.producerID)
			}
		}
	}
}

func consumeAll(ctx context.Context, t *testing.T, seed string, want int) []*kgo.Record {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var received []*kgo.Record
	for len(received) < want {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(received), want, err)
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, partition, err) })
		received = append(received, fetches.Records()...)
	}
	return received
}

func checkConsumed(t *testing.T, sent, received []*kgo.Record) {
	t.Helper()
	if len(received) != len(sent) {
		t.Fatalf("received %d records, sent %d", len(received), len(sent))
	}
	byPartition := map[metadata.TopicPartition][]*kgo.Record{}
	for _, r := range received {
		key := metadata.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		byPartition[key] = append(byPartition[key], r)
	}
	next := map[int32]int{}
	for _, want := range sent {
		got := byPartition[metadata.TopicPartition{Topic: "orders", Partition: want.Partition}][next[want.Partition]]
		if got.Offset != int64(next[want.Partition]) {
			t.Fatalf("partition %d: record at offset %d, want %d", want.Partition, got.Offset, next[want.Partition])
		}
		next[want.Partition]++
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) ||
			len(got.Headers) != 1 || !bytes.Equal(got.Headers[0].Value, want.Headers[0].Value) {
			t.Fatalf("record %s came back as key %q, %d value bytes", want.Key, got.Key, len(got.Value))
		}
	}
}

// TestFranzGoLongPollAndAcks starts a consumer on an empty topic, so its
// fetches are held by the fake's long poll, then produces with acks=1 and
// acks=0 (which gets no response), and checks the consumer is woken with
// every record.
func TestFranzGoLongPollAndAcks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a TCP listener and real clients")
	}
	s := startTestServer(t)
	s.mu.Lock()
	s.backend.addTopic("orders", 2, 0)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seed := s.listener.Addr().String()
	var sent []*kgo.Record
	for i := range 20 {
		sent = append(sent, &kgo.Record{Key: []byte("key-" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "n", Value: []byte{byte(i)}}}, Partition: int32(i % 2)})
	}
	consumed := make(chan []*kgo.Record, 1)
	go func() { consumed <- consumeAllQuietly(ctx, seed, len(sent)) }()
	time.Sleep(200 * time.Millisecond) // let the consumer's first fetches park
	for _, acks := range []kgo.Acks{kgo.LeaderAck(), kgo.NoAck()} {
		producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("orders"), kgo.RequiredAcks(acks),
			kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		half := sent[:10]
		if acks == kgo.NoAck() {
			half = sent[10:]
		}
		if err := producer.ProduceSync(ctx, half...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		producer.Close()
	}
	checkConsumed(t, sent, <-consumed)
}

// consumeAllQuietly is consumeAll for another goroutine: it returns what
// it got by the deadline instead of failing the test.
func consumeAllQuietly(ctx context.Context, seed string, want int) []*kgo.Record {
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(5*time.Second))
	if err != nil {
		return nil
	}
	defer consumer.Close()
	var received []*kgo.Record
	for len(received) < want && ctx.Err() == nil {
		received = append(received, consumer.PollFetches(ctx).Records()...)
	}
	return received
}

// TestFranzGoLeaderEpochChange bumps the partition's leader epoch under a
// consuming kgo client, as a re-election of the same leader does
// (KAFKA-7164): the client's next fetch carries the old epoch and is
// FENCED_LEADER_EPOCH; kgo refreshes its metadata, validates its position
// with OffsetForLeaderEpoch (KIP-320), finds no truncation, and goes on
// consuming from where it was.
func TestFranzGoLeaderEpochChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a TCP listener and real clients")
	}
	s := startTestServer(t)
	s.mu.Lock()
	s.backend.addTopic("orders", 1, 0)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seed := s.listener.Addr().String()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var sent, received []*kgo.Record
	for round := range 2 {
		batch := make([]*kgo.Record, 10)
		for i := range batch {
			batch[i] = &kgo.Record{Key: []byte(fmt.Sprintf("round-%d-%d", round, i)), Value: []byte{byte(round), byte(i)},
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte{byte(i)}}}}
		}
		if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		sent = append(sent, batch...)
		for len(received) < len(sent) && ctx.Err() == nil {
			received = append(received, consumer.PollFetches(ctx).Records()...)
		}
		if round == 0 {
			s.mu.Lock()
			s.backend.topics["orders"].partitions[0].becomeLeader(1)
			s.mu.Unlock()
		}
	}
	checkConsumed(t, sent, received)
	s.mu.Lock()
	defer s.mu.Unlock()
	validated := 0
	for request, n := range s.seen {
		if request[0] == 23 {
			validated += n
		}
	}
	if validated == 0 {
		t.Fatalf("kgo never validated its position with OffsetForLeaderEpoch")
	}
}
