package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// CreatePartitions and DescribeLogDirs on three real processes: kadm grows
// a topic (validate-only first, which adds nothing; a shrink is
// INVALID_PARTITIONS), a record produced to a new partition is consumed
// back, the new partition's replicas all join its ISR, every broker's
// DescribeLogDirs lists the partitions it holds with their sizes and its
// disk, and sarama's ClusterAdmin grows the topic again.
func TestCreatePartitionsAndDescribeLogDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 3)
	c.waitFor("three brokers registered and unfenced", 30*time.Second, []metadata.BrokerID{1, 2, 3}, allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if _, err := admin.CreateTopic(ctx, 1, 3, nil, "grown"); err != nil {
		t.Fatal(err)
	}
	// kadm counts a topic's partitions with a Metadata request to any
	// broker: wait until every broker has the topic.
	c.waitFor("every broker has the topic", 20*time.Second, []metadata.BrokerID{1, 2, 3}, hasTopics("grown"))

	checkGrow(t, "validate-only", func() (kadm.CreatePartitionsResponses, error) { return admin.ValidateCreatePartitions(ctx, 2, "grown") }, nil)
	checkGrow(t, "shrink", func() (kadm.CreatePartitionsResponses, error) { return admin.UpdatePartitions(ctx, 1, "grown") }, kerr.InvalidPartitions)
	checkGrow(t, "unknown topic", func() (kadm.CreatePartitionsResponses, error) { return admin.CreatePartitions(ctx, 1, "missing") },
		kerr.UnknownTopicOrPartition)
	if n := partitionCount(ctx, t, admin, "grown"); n != 1 {
		t.Fatalf("validate-only left %d partitions", n)
	}
	checkGrow(t, "grow", func() (kadm.CreatePartitionsResponses, error) { return admin.CreatePartitions(ctx, 2, "grown") }, nil)

	// The answer comes once the broker asked has the partitions; the
	// others learn them from the metadata log a moment later, and the
	// producer may ask any of them for the topic's partitions (with the
	// manual partitioner kgo refuses a partition its metadata lacks, at
	// once). Wait until every broker hosts the newest, as RF 3 on three
	// brokers makes each, then produce to it and consume it back.
	c.waitFor("every broker hosts grown-2", 20*time.Second, []metadata.BrokerID{1, 2, 3}, hostsPartition("grown", 2))
	record := &kgo.Record{Topic: "grown", Partition: 2, Value: []byte("on a new partition")}
	if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
		t.Fatalf("produce to grown-2: %v", err)
	}
	// A client of its own: kgo keeps the metadata its consumer fetched,
	// which before the topic existed would hide it from kadm's listing.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[3]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"grown": {2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	fetches := consumer.PollRecords(ctx, 1)
	if got := fetches.Records(); len(got) != 1 || string(got[0].Value) != "on a new partition" || got[0].Partition != 2 {
		t.Fatalf("consumed %v, errors %v", got, fetches.Errors())
	}
	waitFullISR(ctx, t, admin, "grown", 2)
	checkLogDirs(ctx, t, admin, int64(len(record.Value)))

	config := saramaConfig(sarama.V3_6_0_0)
	saramaClient, err := sarama.NewClient([]string{c.kafka[2]}, config)
	if err != nil {
		t.Fatal(err)
	}
	defer saramaClient.Close()
	clusterAdmin, err := sarama.NewClusterAdminFromClient(saramaClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := clusterAdmin.CreatePartitions("grown", 5, nil, false); err != nil {
		t.Fatalf("sarama CreatePartitions: %v", err)
	}
	if err := clusterAdmin.CreatePartitions("grown", 4, nil, false); !errors.Is(err, sarama.ErrInvalidPartitions) {
		t.Fatalf("sarama CreatePartitions to fewer: %v, want INVALID_PARTITIONS", err)
	}
	// Broker 2 answered once it had the partitions; broker 1, which kadm
	// asks, learns of them at its next metadata fetch (and kgo keeps
	// metadata it fetched for a moment).
	n := 0
	for began := time.Now(); time.Since(began) < 15*time.Second && n != 5; time.Sleep(200 * time.Millisecond) {
		n = partitionCount(ctx, t, admin, "grown")
	}
	if n != 5 {
		t.Fatalf("after sarama's CreatePartitions: %d partitions, want 5", n)
	}
	waitFullISR(ctx, t, admin, "grown", 4)
}

func checkGrow(t *testing.T, what string, grow func() (kadm.CreatePartitionsResponses, error), want error) {
	t.Helper()
	responses, err := grow()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, response := range responses {
		if !errors.Is(response.Err, want) && response.Err != want {
			t.Fatalf("%s: %s answered %v (%s), want %v", what, response.Topic, response.Err, response.ErrMessage, want)
		}
	}
}

func partitionCount(ctx context.Context, t *testing.T, admin *kadm.Client, topic string) int {
	t.Helper()
	topics, err := admin.ListTopics(ctx, topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("ListTopics %s: %v %v", topic, err, topics[topic].Err)
	}
	return len(topics[topic].Partitions)
}

// waitFullISR waits until a partition's every replica is in its ISR: the
// new partition's followers fetch from its leader and stay in sync.
func waitFullISR(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, partition int32) {
	t.Helper()
	var last kadm.PartitionDetail
	for began := time.Now(); time.Since(began) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		topics, err := admin.ListTopics(ctx, topic)
		if err != nil {
			continue
		}
		last = topics[topic].Partitions[partition]
		if len(last.Replicas) == 3 && len(last.ISR) == 3 && last.Leader >= 0 {
			return
		}
	}
	t.Fatalf("%s-%d: replicas %v isr %v leader %d", topic, partition, last.Replicas, last.ISR, last.Leader)
}

// checkLogDirs asks every broker for its log dir: each holds every
// partition of the replication-factor-3 topic, the new partition with the
// produced record in it once replicated, with no offset lag, on a volume
// of known size.
func checkLogDirs(ctx context.Context, t *testing.T, admin *kadm.Client, recordBytes int64) {
	t.Helper()
	for began := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		described, err := admin.DescribeAllLogDirs(ctx, nil)
		problem := fmt.Sprint(err)
		if err == nil {
			problem = logDirsProblem(described, recordBytes)
		}
		if problem == "" {
			return
		}
		if time.Since(began) > 20*time.Second {
			t.Fatalf("DescribeAllLogDirs: %s", problem)
		}
	}
}

func logDirsProblem(described kadm.DescribedAllLogDirs, recordBytes int64) string {
	if len(described) != 3 {
		return fmt.Sprintf("%d brokers answered", len(described))
	}
	for _, broker := range []int32{1, 2, 3} {
		dirs := described[broker]
		if len(dirs) != 1 {
			return fmt.Sprintf("broker %d: %d dirs", broker, len(dirs))
		}
		for _, dir := range dirs {
			if dir.Err != nil || dir.TotalBytes <= 0 || dir.UsableBytes <= 0 || dir.UsableBytes > dir.TotalBytes {
				return fmt.Sprintf("broker %d: dir %s err %v total %d usable %d", broker, dir.Dir, dir.Err, dir.TotalBytes, dir.UsableBytes)
			}
			var held []int32
			for _, p := range dir.Topics["grown"] {
				held = append(held, p.Partition)
				if p.OffsetLag != 0 || p.IsFuture || (p.Partition == 2 && p.Size <= recordBytes) || (p.Partition != 2 && p.Size != 0) {
					return fmt.Sprintf("broker %d: %+v", broker, p)
				}
			}
			slices.Sort(held)
			if !slices.Equal(held, []int32{0, 1, 2}) {
				return fmt.Sprintf("broker %d holds grown partitions %v", broker, held)
			}
		}
	}
	return ""
}

// hostsPartition says whether the broker hosts a replica of the
// partition, which it does only once its metadata has it.
func hostsPartition(topic string, partition int32) func(Status) bool {
	return func(s Status) bool {
		for _, p := range s.Partitions {
			if p.Topic == topic && p.Partition == partition {
				return true
			}
		}
		return false
	}
}
