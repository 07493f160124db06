package server

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzRequests are kmsg-encoded requests of every API the listener serves,
// at their newest version, naming a topic that exists.
func fuzzRequests() [][]byte {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var requests []kmsg.Request
	for _, key := range []int16{0, 1, 2, 3, 18, 20, 22, 23, 32, 43, 60} {
		request := kmsg.RequestForKey(key)
		request.SetVersion(request.MaxVersion())
		requests = append(requests, request)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, -1, 100
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "fuzzed"
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = []byte("not a record batch, but where one goes")
	topic.Partitions = append(topic.Partitions, partition)
	produce.Topics = append(produce.Topics, topic)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxWaitMillis = 12, 2, 10
	fetch.ReplicaState.ID, fetch.ReplicaState.Epoch = 2, 5
	fetchTopic := kmsg.NewFetchRequestTopic()
	fetchTopic.Topic = "fuzzed"
	fetchTopic.Partitions = append(fetchTopic.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, fetchTopic)
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.Topics = []kmsg.ElectLeadersRequestTopic{}
	requests = append(requests, produce, fetch, elect)
	var seeds [][]byte
	for i, request := range requests {
		seeds = append(seeds, formatter.AppendRequest(nil, request, int32(i))[4:])
	}
	return seeds
}

// FuzzServeRequests sends arbitrary requests to a real node's Kafka
// listener: through wire to the broker, its replicas, its log and its
// controller, where wire's own fuzzer has only a fake. The node must
// survive every one: a panic anywhere on the node loop ends the test
// process, and a node that stops fails the test. (sarama found such a
// crash, an ElectLeaders naming no partitions, that FuzzHandle's fake
// Backend could not show.) CreateTopics is left out: each mutation could
// create thousands of partitions, and the controller's decisions have fuzz
// and property tests of their own.
func FuzzServeRequests(f *testing.F) {
	address := startInProcess(f)
	client, err := kgo.NewClient(kgo.SeedBrokers(address))
	if err != nil {
		f.Fatal(err)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = "fuzzed", 2, 1
	create.Topics, create.TimeoutMillis = append(create.Topics, entry), 10000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := create.RequestWith(ctx, client); err != nil {
		f.Fatal(err)
	}
	cancel()
	client.Close()
	for _, seed := range fuzzRequests() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, request []byte) {
		if len(request) >= 2 && int16(binary.BigEndian.Uint16(request)) == 19 {
			return // CreateTopics: see above
		}
		c, err := net.DialTimeout("tcp", address, time.Second)
		if err != nil {
			t.Fatalf("the node no longer accepts connections: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(200 * time.Millisecond))
		c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(request))))
		c.Write(request)
		// Whatever comes back (a response, nothing for acks=0 or a long
		// poll, a closed connection) is the protocol's business; the node
		// must only still be there for the next one.
		var prefix [4]byte
		c.Read(prefix[:])
	})
}
