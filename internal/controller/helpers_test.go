package controller

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
)

// cluster is a test image that decisions are taken against and their
// records applied to, as the quorum will do.
type cluster struct {
	t     testing.TB
	image *metadata.Image
	// topicIDs is the controller's random source for topic ids, seeded so
	// that test output is stable.
	topicIDs io.Reader
}

func newCluster(t testing.TB) *cluster {
	return &cluster{t: t, image: metadata.NewImage(), topicIDs: seededTopicIDs(1)}
}

// seededTopicIDs is a deterministic source of topic ids for tests.
func seededTopicIDs(seed byte) io.Reader { return rand.NewChaCha8([32]byte{0: 't', 1: seed}) }

// apply appends records to the image, failing the test on any error or
// stale record: decisions must produce only records that apply.
func (c *cluster) apply(records []metadata.Record) {
	c.t.Helper()
	for _, r := range records {
		applied, err := c.image.Apply(metadata.Entry{Offset: c.image.Offset() + 1, Record: r})
		if err != nil {
			c.t.Fatal(err)
		}
		if !applied {
			c.t.Fatalf("stale record from a decision: %v", r)
		}
	}
}

// must applies a decision's records after checking it succeeded.
func (c *cluster) must(records []metadata.Record, code int16, err error) {
	c.t.Helper()
	if err != nil || code != 0 {
		c.t.Fatalf("decision failed: %s %v", CodeName(code), err)
	}
	c.apply(records)
}

// register registers and unfences brokers, each a fresh incarnation.
func (c *cluster) register(ids ...metadata.BrokerID) {
	c.t.Helper()
	for _, id := range ids {
		records, epoch, code, err := RegisterBroker(c.image, id, fmt.Sprintf("incarnation-%d-%d", id, c.image.Offset()+1), "",
			metadata.NoBrokerEpoch, c.image.Offset()+1)
		c.must(records, code, err)
		c.must(Heartbeat(c.image, id, epoch, false, true))
	}
}

func (c *cluster) epoch(id metadata.BrokerID) metadata.BrokerEpoch {
	broker, ok := c.image.Broker(id)
	if !ok {
		return metadata.NoBrokerEpoch
	}
	return broker.Epoch
}

func (c *cluster) createTopic(name string, partitions, replicationFactor, minInsyncReplicas int, unclean bool) {
	c.t.Helper()
	c.must(CreateTopic(c.image, CreateTopicRequest{
		Name: name, Partitions: partitions, ReplicationFactor: replicationFactor,
		Config: metadata.TopicConfig{MinInsyncReplicas: minInsyncReplicas, UncleanLeaderElection: unclean},
	}, c.topicIDs))
}

func (c *cluster) partition(topic string, index int32) metadata.PartitionState {
	c.t.Helper()
	partition, ok := c.image.Partition(metadata.TopicPartition{Topic: topic, Partition: index})
	if !ok {
		c.t.Fatalf("no partition %s-%d", topic, index)
	}
	return partition
}

// fence fences brokers by expiring their sessions.
func (c *cluster) fence(ids ...metadata.BrokerID) {
	c.t.Helper()
	last := map[metadata.BrokerID]int64{}
	for _, broker := range c.image.Brokers() {
		last[broker.ID] = 100
	}
	for _, id := range ids {
		last[id] = 0
	}
	records, err := FenceExpired(c.image, last, 100, 10)
	if err != nil {
		c.t.Fatal(err)
	}
	c.apply(records)
}

// alter proposes a new ISR for a partition as its leader would.
func (c *cluster) alter(topic string, index int32, isr ...metadata.BrokerID) ([]metadata.Record, AlterPartitionResult) {
	c.t.Helper()
	partition := c.partition(topic, index)
	item := AlterPartitionItem{
		TopicPartition: partition.TopicPartition,
		LeaderEpoch:    partition.LeaderEpoch, PartitionEpoch: partition.PartitionEpoch,
		LeaderRecoveryState: partition.LeaderRecoveryState,
	}
	for _, id := range isr {
		item.NewISR = append(item.NewISR, BrokerIDAndEpoch{ID: id, Epoch: c.epoch(id)})
	}
	records, response, err := AlterPartition(c.image, AlterPartitionRequest{
		BrokerID: partition.Leader, BrokerEpoch: c.epoch(partition.Leader), Partitions: []AlterPartitionItem{item},
	})
	if err != nil || response.ErrorCode != 0 {
		c.t.Fatalf("alter-partition: %s %v", CodeName(response.ErrorCode), err)
	}
	return records, response.Partitions[0]
}

// describeRecords prints records one per line, for comparisons.
func describeRecords(records []metadata.Record) string {
	var out strings.Builder
	for _, r := range records {
		out.WriteString(r.String())
		out.WriteString("\n")
	}
	return out.String()
}

func checkRecords(t *testing.T, records []metadata.Record, want string) {
	t.Helper()
	if got := describeRecords(records); got != want {
		t.Errorf("records:\n%s\nwant:\n%s", got, want)
	}
}
