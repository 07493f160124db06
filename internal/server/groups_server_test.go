package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// newGroupCluster starts size tide serve processes whose groups rebalance
// at once (no initial delay: a test waits for no more members) on a
// __consumer_offsets of 5 partitions.
func newGroupCluster(t *testing.T, size int) *processCluster {
	c := newPreparedProcessCluster(t, size, func(_ *processCluster, _ metadata.BrokerID, cmd *exec.Cmd) {
		cmd.Args = append(cmd.Args, "--group-initial-rebalance-delay", "0s", "--offsets-topic-partitions", "5")
	})
	ids := make([]metadata.BrokerID, 0, size)
	for id := range metadata.BrokerID(size) {
		ids = append(ids, id+1)
	}
	c.waitFor("every broker registered and unfenced", 15*time.Second, ids, allUnfenced(size))
	return c
}

// seeds lists the running brokers' Kafka addresses.
func (c *processCluster) seeds() []string {
	var seeds []string
	for _, id := range c.running() {
		seeds = append(seeds, c.kafka[id])
	}
	return seeds
}

// createPartitionedTopic creates a topic of the given partitions with one
// replica each.
func createPartitionedTopic(ctx context.Context, t *testing.T, seeds []string, name string, partitions int32) {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, name, partitions)
}

// producePartitioned writes perPartition records to each partition, acks=all.
func producePartitioned(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, perPartition int) {
	t.Helper()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var records []*kgo.Record
	for partition := range partitions {
		for i := range perPartition {
			records = append(records, &kgo.Record{Partition: partition, Value: []byte(fmt.Sprintf("%d-%d", partition, i))})
		}
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// groupConsumer joins group on topic with franz-go's group consumer,
// committing nothing by itself.
func groupConsumer(t *testing.T, seeds []string, group, topic string) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// pollUntil polls until it has want records, and returns the first offset
// seen per partition and the count.
func pollUntil(ctx context.Context, t *testing.T, client *kgo.Client, want int) (map[int32]int64, int) {
	t.Helper()
	first, count := map[int32]int64{}, 0
	for count < want {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("polled %d of %d records: %v", count, want, ctx.Err())
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s-%d: %v", topic, partition, err)
			}
		})
		fetches.EachRecord(func(record *kgo.Record) {
			if _, seen := first[record.Partition]; !seen {
				first[record.Partition] = record.Offset
			}
			count++
		})
	}
	return first, count
}

// fetchCommitted asks the group's coordinator (FindCoordinator, then
// OffsetFetch) for its committed offsets of topic, retrying while the
// coordinator moves or loads; each try with a new client, which finds the
// coordinator afresh.
func fetchCommitted(ctx context.Context, t *testing.T, seeds []string, group, topic string) map[int32]int64 {
	t.Helper()
	for {
		client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		request := kmsg.NewPtrOffsetFetchRequest()
		request.Group = group
		try, cancel := context.WithTimeout(ctx, 2*time.Second)
		response, err := request.RequestWith(try, client)
		cancel()
		client.Close()
		if err == nil && response.ErrorCode == 0 {
			committed := map[int32]int64{}
			for _, answered := range response.Topics {
				for _, partition := range answered.Partitions {
					if answered.Topic == topic && partition.ErrorCode == 0 {
						committed[partition.Partition] = partition.Offset
					}
				}
			}
			return committed
		}
		if ctx.Err() != nil {
			t.Fatalf("OffsetFetch %s: %v", group, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupCoordinator is the broker FindCoordinator names for group.
func groupCoordinator(ctx context.Context, t *testing.T, client *kgo.Client, group string) metadata.BrokerID {
	t.Helper()
	for {
		request := kmsg.NewPtrFindCoordinatorRequest()
		request.CoordinatorKey = group
		response, err := request.RequestWith(ctx, client)
		if err == nil && response.ErrorCode == 0 {
			return metadata.BrokerID(response.NodeID)
		}
		if ctx.Err() != nil {
			t.Fatalf("FindCoordinator %s: %v", group, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// franz-go's group consumer on three tide serve processes: it joins,
// commits chosen offsets of a 3-partition topic and leaves; a second
// consumer of the group resumes exactly there. The coordinator's broker
// is then killed (kill -9): the offsets partition's new leader loads the
// group from __consumer_offsets and answers the same offsets, and a third
// consumer resumes there again.
func TestGroupConsumerCommitsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newGroupCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createReplicatedTopic(ctx, t, admin, "orders", 3, "1")
	producePartitioned(ctx, t, c.seeds(), "orders", 3, 100)

	first := groupConsumer(t, c.seeds(), "app", "orders")
	pollUntil(ctx, t, first, 300)
	chosen := map[int32]int64{0: 40, 1: 50, 2: 60}
	offsets := map[string]map[int32]kgo.EpochOffset{"orders": {}}
	for partition, offset := range chosen {
		offsets["orders"][partition] = kgo.EpochOffset{Epoch: -1, Offset: offset}
	}
	var commitErr error
	first.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, response *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, topic := range response.Topics {
			for _, partition := range topic.Partitions {
				if commitErr == nil && partition.ErrorCode != 0 {
					commitErr = kerr.ErrorForCode(partition.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	first.Close() // leaves the group

	resumeAt := func(what string) {
		t.Helper()
		consumer := groupConsumer(t, c.seeds(), "app", "orders")
		defer consumer.Close()
		starts, count := pollUntil(ctx, t, consumer, 300-150)
		for partition, offset := range chosen {
			if starts[partition] != offset {
				t.Fatalf("%s: partition %d resumed at %d, committed %d (%d records)", what, partition, starts[partition], offset, count)
			}
		}
		checkDescribedMember(ctx, t, c.seeds(), "app")
	}
	resumeAt("second consumer")
	if got := fetchCommitted(ctx, t, c.seeds(), "app", "orders"); !equalOffsets(got, chosen) {
		t.Fatalf("committed %v, want %v", got, chosen)
	}
	coordinator := groupCoordinator(ctx, t, admin, "app")
	c.kill(coordinator)
	killedAt := time.Now()
	if got := fetchCommitted(ctx, t, c.seeds(), "app", "orders"); !equalOffsets(got, chosen) {
		t.Fatalf("after broker %d died: committed %v, want %v", coordinator, got, chosen)
	}
	if moved := groupCoordinator(ctx, t, admin, "app"); moved == coordinator {
		t.Fatalf("FindCoordinator still names broker %d", moved)
	}
	t.Logf("broker %d killed; the new coordinator answered the offsets after %s", coordinator, time.Since(killedAt).Round(time.Millisecond))
	resumeAt("after the coordinator died")
}

func equalOffsets(got, want map[int32]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for partition, offset := range want {
		if got[partition] != offset {
			return false
		}
	}
	return true
}

// checkDescribedMember asks the group's coordinator to describe it: Stable,
// one member, whose client host is the loopback address it connected from
// and whose assignment is not empty.
func checkDescribedMember(ctx context.Context, t *testing.T, seeds []string, group string) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	request := kmsg.NewPtrDescribeGroupsRequest()
	request.Groups = []string{group}
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	described := response.Groups[0]
	if described.ErrorCode != 0 || described.State != "Stable" || len(described.Members) != 1 ||
		described.Members[0].ClientHost != "/127.0.0.1" || len(described.Members[0].MemberAssignment) == 0 {
		t.Fatalf("DescribeGroups: %+v", described)
	}
}
