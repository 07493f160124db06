package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// A broker restarted after kill -9 serves no Kafka client until it has
// caught up with the metadata log: before, its image is empty, and it
// answered Metadata and Produce for a topic that exists with
// UNKNOWN_TOPIC_OR_PARTITION (found by tide chaos). Its listener now
// closes every connection until then, as Kafka keeps its client listener
// shut; the test asks the restarted broker alone, as fast as it answers,
// and fails on any answer that does not know the topic.
func TestRestartedBrokerServesNoStaleMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	c := newProcessCluster(t, 3)
	c.waitFor("three brokers unfenced", 30*time.Second, c.running(), allUnfenced(3))
	c.createTopic("orders")
	c.waitFor("the topic on every broker", 10*time.Second, c.running(), hasTopics("orders"))
	victim := metadata.BrokerID(1)
	if c.active() == victim {
		victim = 2
	}
	c.kill(victim)
	c.start(victim)
	deadline := time.Now().Add(12 * time.Second)
	refused := 0
	for time.Now().Before(deadline) {
		topic, err := askMetadata(c.kafka[victim], "orders")
		if err != nil {
			refused++ // not listening yet, or closed at once: not serving
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if topic.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("the restarted broker answered UNKNOWN_TOPIC_OR_PARTITION for a topic that exists (after %d refused connections)", refused)
		}
		if topic.ErrorCode == 0 && len(topic.Partitions) == 3 {
			t.Logf("served the topic after %d refused connections", refused)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the restarted broker never served the topic within 12 s (%d refused connections)", refused)
}

// askMetadata sends one Metadata v4 request for topic over a connection
// of its own and answers the topic's part of the response.
func askMetadata(address, topic string) (kmsg.MetadataResponseTopic, error) {
	conn, err := net.DialTimeout("tcp", address, time.Second)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	request := kmsg.NewPtrMetadataRequest()
	request.Version = 4
	name := topic
	request.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, request, 1)); err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil || len(body) < 4 {
		return kmsg.MetadataResponseTopic{}, errors.Join(err, io.ErrUnexpectedEOF)
	}
	response := request.ResponseKind().(*kmsg.MetadataResponse)
	response.Version = 4
	if err := response.ReadFrom(body[4:]); err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	if len(response.Topics) != 1 {
		return kmsg.MetadataResponseTopic{}, errors.New("no topic in the response")
	}
	return response.Topics[0], nil
}
