package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// createReplicatedTopic creates a topic with replication factor 3 through
// the Kafka listener.
func createReplicatedTopic(ctx context.Context, t testing.TB, client *kgo.Client, name string, partitions int32, minInsync string) {
	t.Helper()
	request := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = name, partitions, 3
	config := kmsg.NewCreateTopicsRequestTopicConfig()
	config.Name, config.Value = "min.insync.replicas", kmsg.StringPtr(minInsync)
	entry.Configs = append(entry.Configs, config)
	request.Topics, request.TimeoutMillis = append(request.Topics, entry), 10000
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	if code := response.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics: %v", kerr.ErrorForCode(code))
	}
}

// replicasAgree reports whether every broker named (every running one by
// default) hosts the partition with the same log end offset and high
// watermark, at least end.
func (c *processCluster) replicasAgree(topic string, partition int32, end int64, ids ...metadata.BrokerID) (bool, string) {
	var seen []string
	agree, first := true, int64(-1)
	if len(ids) == 0 {
		ids = c.running()
	}
	for _, id := range ids {
		status, err := c.status(id)
		if err != nil {
			return false, err.Error()
		}
		found := false
		for _, p := range status.Partitions {
			if p.Topic != topic || p.Partition != partition {
				continue
			}
			found = true
			seen = append(seen, fmt.Sprintf("broker %d %s epoch %d HW %d LEO %d", id, p.Role, p.LeaderEpoch, p.HighWatermark, p.LogEndOffset))
			if first < 0 {
				first = p.LogEndOffset
			}
			agree = agree && p.LogEndOffset == first && p.HighWatermark == first && first >= end
		}
		agree = agree && found
	}
	return agree, fmt.Sprint(seen)
}

// waitReplicasAgree waits until replicasAgree holds.
func (c *processCluster) waitReplicasAgree(topic string, partition int32, end int64, timeout time.Duration, ids ...metadata.BrokerID) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := c.replicasAgree(topic, partition, end, ids...)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s-%d: replicas do not agree at %d or more after %s: %s", topic, partition, end, timeout, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Three `tide serve` processes replicate a topic with replication factor 3
// over the Kafka protocol: acks=all produce completes (the followers'
// fetches carry the high watermark), every replica ends with the same log
// end offset and high watermark, and the records read back are the ones
// written.
func TestReplicationBetweenServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 3)
	c.waitFor("every broker unfenced", 20*time.Second, []metadata.BrokerID{1, 2, 3}, allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seed := c.kafka[1]
	admin, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "replicated"
	createReplicatedTopic(ctx, t, admin, topic, 1, "2")
	start := time.Now()
	sent := produceRecords(ctx, t, seed, topic, 1000)
	t.Logf("1000 records acknowledged by three replicas in %s", time.Since(start).Round(time.Millisecond))
	c.waitReplicasAgree(topic, 0, int64(len(sent)), 10*time.Second)
	for _, id := range c.running() {
		status, _ := c.status(id)
		t.Logf("broker %d: partitions %+v, fetch errors %v", id, status.Partitions, status.FetchErrors)
	}
	checkConsumed(t, sent, consumeRecords(ctx, t, seed, topic, len(sent)))
}
