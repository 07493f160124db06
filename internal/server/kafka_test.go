package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// stop stops a node with SIGTERM (a controlled shutdown) and waits for it.
func (c *processCluster) stop(id metadata.BrokerID) {
	c.t.Helper()
	if err := terminate(c.processes[id]); err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
	delete(c.processes, id)
	c.logs[id].Close()
}

// One `tide serve` process answers franz-go's real client: a topic created
// with CreateTopics, 1000 records produced with acks=all and idempotence,
// consumed back in order byte for byte; Metadata, ListOffsets and
// OffsetForLeaderEpoch say what was written; after a SIGTERM and a restart
// the records are all there again.
func TestKafkaClientAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 1)
	c.waitFor("the broker registered and unfenced", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	seed := c.kafka[1]
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const topic = "orders"
	admin, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, topic, 1)
	sent := produceRecords(ctx, t, seed, topic, 1000)
	checkMetadata(ctx, t, admin, topic, seed)
	checkOffsets(ctx, t, admin, topic, 0, int64(len(sent)))
	checkConsumed(t, sent, consumeRecords(ctx, t, seed, topic, len(sent)))

	c.stop(1)
	c.start(1)
	c.waitFor("the restarted broker unfenced", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	restarted, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	checkOffsets(ctx, t, restarted, topic, 0, int64(len(sent)))
	checkConsumed(t, sent, consumeRecords(ctx, t, seed, topic, len(sent)))
	checkLongPoll(ctx, t, seed, topic, int64(len(sent)))
	checkFollowerFetchRefused(ctx, t, restarted, topic)
	checkUndecodableRequestCloses(t, seed)
}

// A request wire cannot decode (an API key it does not serve) gets no
// answer: the server closes the connection, as Kafka does.
func checkUndecodableRequestCloses(t *testing.T, seed string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", seed, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// size 10: api key 32000, version 0, correlation id 7, null client id
	if _, err := c.Write([]byte{0, 0, 0, 10, 0x7d, 0x00, 0, 0, 0, 0, 0, 7, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("read %d bytes, %v; want the connection closed without an answer", len(got), err)
	}
}

// checkLongPoll parks a consumer's fetch at the log end (MaxWait 5 s) and
// produces one record: the fetch must be woken by it, not by its MaxWait.
func checkLongPoll(ctx context.Context, t *testing.T, seed, topic string, end int64) {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.FetchMaxWait(5*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(end)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	received := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			if consumer.PollFetches(ctx).NumRecords() > 0 {
				received <- time.Now()
				return
			}
		}
	}()
	time.Sleep(700 * time.Millisecond) // the consumer's fetch is parked by now
	produced := produceMore(ctx, t, seed, topic)
	select {
	case at := <-received:
		if late := at.Sub(produced); late > time.Second {
			t.Fatalf("the record reached a waiting consumer %s after it was acknowledged", late)
		}
	case <-ctx.Done():
		t.Fatal("the waiting consumer never got the record")
	}
}

func produceMore(ctx context.Context, t *testing.T, seed, topic string) time.Time {
	t.Helper()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("wake up")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// A client may not fetch as a follower: that would move the high watermark.
func checkFollowerFetchRefused(ctx context.Context, t *testing.T, client *kgo.Client, topic string) {
	t.Helper()
	request := kmsg.NewPtrFetchRequest()
	request.Version, request.ReplicaID, request.MaxBytes = 12, 1, 1<<20
	request.ReplicaState.ID = 1 // where v15+ carries it: kgo sends the broker's highest version
	entry := kmsg.NewFetchRequestTopic()
	entry.Topic, entry.TopicID = topic, topicID(ctx, t, client, topic) // v13+ name topics by id
	part := kmsg.NewFetchRequestTopicPartition()
	part.PartitionMaxBytes = 1 << 20
	entry.Partitions = append(entry.Partitions, part)
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if code := response.Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a follower fetch from a client: %v", kerr.ErrorForCode(code))
	}
}

func createTopic(ctx context.Context, t *testing.T, client *kgo.Client, name string, partitions int32) {
	t.Helper()
	request := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = name, partitions, 1
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

func produceRecords(ctx context.Context, t *testing.T, seed, topic string, count int) []*kgo.Record {
	t.Helper()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	sent := make([]*kgo.Record, count)
	for i := range sent {
		sent[i] = &kgo.Record{Key: []byte("key-" + strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i), byte(i >> 8)}, i%50),
			Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}}}
	}
	for i, result := range producer.ProduceSync(ctx, sent...) {
		if result.Err != nil {
			t.Fatalf("record %d: %v", i, result.Err)
		}
		if result.Record.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, result.Record.Offset)
		}
	}
	return sent
}

func consumeRecords(ctx context.Context, t *testing.T, seed, topic string, want int) []*kgo.Record {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var received []*kgo.Record
	for len(received) < want {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(received), want, ctx.Err())
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Logf("fetch %s-%d: %v", topic, partition, err) })
		received = append(received, fetches.Records()...)
	}
	return received
}

func checkConsumed(t *testing.T, sent, received []*kgo.Record) {
	t.Helper()
	if len(received) != len(sent) {
		t.Fatalf("consumed %d records, produced %d", len(received), len(sent))
	}
	for i, r := range received {
		want := sent[i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "n" || !bytes.Equal(r.Headers[0].Value, want.Headers[0].Value) {
			t.Fatalf("record %d: offset %d key %q, want key %q", i, r.Offset, r.Key, want.Key)
		}
	}
}

func checkMetadata(ctx context.Context, t *testing.T, client *kgo.Client, topic, seed string) {
	t.Helper()
	request := kmsg.NewPtrMetadataRequest()
	entry := kmsg.NewMetadataRequestTopic()
	entry.Topic = kmsg.StringPtr(topic)
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(seed)
	if len(response.Brokers) != 1 || response.Brokers[0].NodeID != 1 || response.Brokers[0].Host != host ||
		fmt.Sprint(response.Brokers[0].Port) != port || response.ControllerID != 1 || response.ClusterID == nil {
		t.Fatalf("metadata brokers %+v, controller %d, cluster %v", response.Brokers, response.ControllerID, response.ClusterID)
	}
	if len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 || len(response.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata topics %+v", response.Topics)
	}
	partition := response.Topics[0].Partitions[0]
	if partition.ErrorCode != 0 || partition.Leader != 1 || len(partition.Replicas) != 1 || len(partition.ISR) != 1 {
		t.Fatalf("metadata partition %+v", partition)
	}
}

// checkOffsets asks for the earliest and latest offsets, and where the
// partition's current leader epoch ends (the log end offset, KIP-101).
func checkOffsets(ctx context.Context, t *testing.T, client *kgo.Client, topic string, start, end int64) {
	t.Helper()
	for timestamp, want := range map[int64]int64{-2: start, -1: end} {
		request := kmsg.NewPtrListOffsetsRequest()
		entry := kmsg.NewListOffsetsRequestTopic()
		entry.Topic = topic
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Timestamp = timestamp
		entry.Partitions = append(entry.Partitions, part)
		request.Topics = append(request.Topics, entry)
		response, err := request.RequestWith(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		got := response.Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != want {
			t.Fatalf("ListOffsets %d: offset %d, error %v; want %d", timestamp, got.Offset, kerr.ErrorForCode(got.ErrorCode), want)
		}
	}
	request := kmsg.NewPtrOffsetForLeaderEpochRequest()
	request.ReplicaID = -1
	entry := kmsg.NewOffsetForLeaderEpochRequestTopic()
	entry.Topic = topic
	part := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	part.CurrentLeaderEpoch, part.LeaderEpoch = -1, 0
	entry.Partitions = append(entry.Partitions, part)
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	got := response.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.EndOffset != end || got.LeaderEpoch != 0 {
		t.Fatalf("OffsetForLeaderEpoch 0: end %d in epoch %d, error %v; want %d", got.EndOffset, got.LeaderEpoch, kerr.ErrorForCode(got.ErrorCode), end)
	}
}

// kafkaAcrossBrokers creates a topic with a partition on each of three
// brokers (replication factor 1) through a broker that is not the active
// controller (it forwards CreateTopics over its link), and produces to and
// consumes from every partition: the client finds each partition's leader
// at the address --kafka-listeners gives Metadata.
func (c *processCluster) kafkaAcrossBrokers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const topic, count = "spread", 30
	seed := metadata.BrokerID(1)
	if c.active() == seed {
		seed = 2
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[seed]), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	brokers, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	if err != nil || len(brokers.Brokers) != 3 {
		t.Fatalf("metadata lists brokers %+v (%v), want all three", brokers.Brokers, err)
	}
	// Straight to the seed: a client sends CreateTopics to the controller
	// Metadata names, which would skip the forwarding.
	create := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = topic, 3, 1
	create.Topics, create.TimeoutMillis = append(create.Topics, entry), 10000
	created, err := client.Broker(int(seed)).Request(ctx, create)
	if err != nil || created.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics through broker %d: %v %+v", seed, err, created)
	}
	var records []*kgo.Record
	for i := range count {
		records = append(records, &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 3)})
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("producing to three brokers: %v", err)
	}
	received := 0
	for received < count && ctx.Err() == nil {
		received += client.PollFetches(ctx).NumRecords()
	}
	if received != count {
		t.Fatalf("consumed %d of %d records from three brokers", received, count)
	}
}

// topicID asks Metadata for a topic's id (KIP-516).
func topicID(ctx context.Context, t *testing.T, client *kgo.Client, topic string) [16]byte {
	t.Helper()
	request := kmsg.NewPtrMetadataRequest()
	asked := kmsg.NewMetadataRequestTopic()
	asked.Topic = kmsg.StringPtr(topic)
	request.Topics = append(request.Topics, asked)
	response, err := request.RequestWith(ctx, client)
	if err != nil || len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata %s: %v %+v", topic, err, response)
	}
	return response.Topics[0].TopicID
}
