package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// Issue 13 on real processes: a topic is created, written, and deleted
// (by id, DeleteTopics v6) while one of its replicas is down, then created
// again under its name. The re-created topic is empty on every broker, the
// broker that was down included once it restarts; every old partition
// directory is gone from every data directory, and what is left holds the
// new topic id in partition.metadata.
func TestDeletedTopicDoesNotComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	c := newProcessCluster(t, 3)
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("three brokers unfenced", 30*time.Second, all, allUnfenced(3))
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3]}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	first := createTopicForID(ctx, t, client, "ghost")
	c.waitFor("ghost on every node", 10*time.Second, all, hasTopics("ghost"))
	produceMoreRecords(ctx, t, seeds, "ghost", "the deleted record", 30)

	c.kill(3)
	deletion := kmsg.NewPtrDeleteTopicsRequest()
	deletion.Version, deletion.TimeoutMillis = 6, 10000
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = first
	deletion.Topics = append(deletion.Topics, byID)
	deleted, err := deletion.RequestWith(ctx, client)
	if err != nil || len(deleted.Topics) != 1 || deleted.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics by id: %v %+v", err, deleted)
	}
	second := createTopicForID(ctx, t, client, "ghost")
	if second == first {
		t.Fatalf("the re-created topic has the deleted topic's id %v", metadata.TopicID(first))
	}
	c.start(3)
	c.waitFor("three brokers unfenced after the restart", 30*time.Second, all, allUnfenced(3))

	for partition := int32(0); partition < 3; partition++ {
		if end := listPartitionEnd(ctx, t, client, "ghost", partition); end != 0 {
			t.Fatalf("the re-created ghost-%d has log end %d: the deleted records came back", partition, end)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		leftovers := partitionDirectoriesNotOf(t, c, "ghost", metadata.TopicID(second))
		if len(leftovers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old partition directories left: %v", leftovers)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createTopicForID creates a 3-partition, 3-replica topic with CreateTopics
// v7 and returns the id it answers.
func createTopicForID(ctx context.Context, t *testing.T, client *kgo.Client, name string) [16]byte {
	t.Helper()
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version, request.TimeoutMillis = 7, 10000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, 3, 3
	request.Topics = append(request.Topics, topic)
	response, err := request.RequestWith(ctx, client)
	if err != nil || len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics %s: %v %+v", name, err, response)
	}
	if id := metadata.TopicID(response.Topics[0].TopicID); !id.Usable() {
		t.Fatalf("CreateTopics %s answered id %v", name, id)
	}
	return response.Topics[0].TopicID
}

// listPartitionEnd is the latest offset of one partition.
func listPartitionEnd(ctx context.Context, t *testing.T, client *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	for {
		request := kmsg.NewPtrListOffsetsRequest()
		entry := kmsg.NewListOffsetsRequestTopic()
		entry.Topic = topic
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Partition, part.Timestamp = partition, -1
		entry.Partitions = append(entry.Partitions, part)
		request.Topics = append(request.Topics, entry)
		response, err := request.RequestWith(ctx, client)
		if err == nil && response.Topics[0].Partitions[0].ErrorCode == 0 {
			return response.Topics[0].Partitions[0].Offset
		}
		if ctx.Err() != nil {
			t.Fatalf("ListOffsets %s-%d: %v %+v", topic, partition, err, response)
		}
		time.Sleep(100 * time.Millisecond) // a leader not yet ready: retried
	}
}

// partitionDirectoriesNotOf lists, over every node's data directory, the
// directories of topic that do not hold id in partition.metadata, and the
// directories set aside for deletion and not yet removed.
func partitionDirectoriesNotOf(t *testing.T, c *processCluster, topic string, id metadata.TopicID) []string {
	t.Helper()
	var found []string
	want := "version: 0\ntopic_id: " + id.String()
	for node, dir := range c.dirs {
		entries, err := os.ReadDir(filepath.Join(dir, "partitions"))
		if err != nil {
			t.Fatal(err)
		}
		for _, entry := range entries {
			name := entry.Name()
			if !strings.HasPrefix(name, topic+"-") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, "partitions", name, "partition.metadata"))
			if strings.HasSuffix(name, "-delete") || err != nil || string(data) != want {
				found = append(found, fmt.Sprintf("node %d: %s (%q, %v)", node, name, data, err))
			}
		}
	}
	return found
}
