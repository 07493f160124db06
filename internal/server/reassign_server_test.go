package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// A partition moves off its leader onto the fourth broker while acks=all
// writes flow (KIP-455, rule reassignment-completes-in-isr): kadm's
// AlterPartitionAssignments moves moved-0 (replication factor 3, on three
// of the four brokers) to the broker without a replica and the two
// followers; ListPartitionReassignments shows the move until the new
// replica has caught up and joined the ISR; then the old leader leaves,
// the new replica leads (first in the target), every record acknowledged
// before, during and after the move is read back at its offset, sarama's
// ClusterAdmin lists no move left and has a size change refused, and the
// old leader no longer has the partition's directory.
func TestReassignPartitionUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 4)
	c.waitFor("four brokers registered and unfenced", 30*time.Second, []metadata.BrokerID{1, 2, 3, 4}, allUnfenced(4))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[2]), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if _, err := admin.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "moved"); err != nil {
		t.Fatal(err)
	}
	c.waitFor("every broker has the topic", 20*time.Second, []metadata.BrokerID{1, 2, 3, 4}, hasTopics("moved"))
	waitFullISR(ctx, t, admin, "moved", 0)
	topics, err := admin.ListTopics(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	before := topics["moved"].Partitions[0]
	// The target: the broker without a replica, then the two followers;
	// the leader leaves.
	var target []int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(before.Replicas, id) {
			target = append(target, id)
		}
	}
	for _, id := range before.Replicas {
		if id != before.Leader {
			target = append(target, id)
		}
	}
	t.Logf("moving moved-0 from %v (led by %d) to %v", before.Replicas, before.Leader, target)

	load := startAckedLoad(ctx, client, "moved")
	load.waitFor(t, 100)
	var move kadm.AlterPartitionAssignmentsReq
	move.Assign("moved", 0, target)
	responses, err := admin.AlterPartitionAssignments(ctx, move)
	if err != nil || responses.Error() != nil {
		t.Fatalf("AlterPartitionAssignments: %v, %v", err, responses.Error())
	}
	began := time.Now()
	sawMove := false
	for {
		listed, err := admin.ListPartitionReassignments(ctx, kadm.TopicsSet{"moved": {0: {}}})
		if err == nil && len(listed) == 0 {
			break
		}
		if err == nil && !sawMove {
			p := listed["moved"][0]
			sawMove = slices.Equal(p.AddingReplicas, target[:1]) && slices.Equal(p.RemovingReplicas, []int32{before.Leader})
		}
		if time.Since(began) > 20*time.Second {
			t.Fatalf("the move did not finish within 20 s: %v %v", listed, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("moved in %s (listed in progress: %t), %d writes acknowledged so far", time.Since(began).Round(time.Millisecond), sawMove, load.count())
	waitAssignment(ctx, t, admin, "moved", target, target[0])
	load.waitFor(t, load.count()+100)
	acked := load.stop(t)
	readBack(ctx, t, c.kafka[metadata.BrokerID(target[1])], "moved", acked)

	checkSaramaReassignments(t, c.kafka[metadata.BrokerID(target[2])], "moved", len(target))

	directory := filepath.Join(c.dirs[metadata.BrokerID(before.Leader)], "moved-0")
	for began := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(directory); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("broker %d, moved away from, still has %s", before.Leader, directory)
		}
	}
}

// checkSaramaReassignments: sarama's ClusterAdmin lists no move in
// progress, and a target of another replication factor is refused with
// Kafka's code.
func checkSaramaReassignments(t *testing.T, broker, topic string, replicationFactor int) {
	t.Helper()
	client, err := sarama.NewClient([]string{broker}, saramaConfig(sarama.V3_6_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := admin.ListPartitionReassignments(topic, []int32{0})
	if err != nil || len(listed[topic]) != 0 {
		t.Fatalf("sarama ListPartitionReassignments after the move: %v, %v", listed, err)
	}
	wrongSize := make([]int32, replicationFactor-1)
	for i := range wrongSize {
		wrongSize[i] = int32(i + 1)
	}
	err = admin.AlterPartitionReassignments(topic, [][]int32{wrongSize})
	if !errors.Is(err, sarama.ErrInvalidReplicaAssignment) {
		t.Fatalf("sarama AlterPartitionReassignments to %v: %v, want INVALID_REPLICA_ASSIGNMENT", wrongSize, err)
	}
}

// ackedLoad produces to partition 0 of a topic, one record at a time with
// acks=all, and keeps each acknowledged record's offset.
type ackedLoad struct {
	mu     sync.Mutex
	acked  map[int64]string
	failed int
	done   chan struct{}
	ended  chan struct{}
}

func startAckedLoad(ctx context.Context, client *kgo.Client, topic string) *ackedLoad {
	load := &ackedLoad{acked: map[int64]string{}, done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(load.ended)
		for i := 0; ; i++ {
			select {
			case <-load.done:
				return
			default:
			}
			value := fmt.Sprintf("record %d", i)
			result := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)})
			record, err := result.First()
			load.mu.Lock()
			if err == nil {
				load.acked[record.Offset] = value
			} else {
				load.failed++
			}
			load.mu.Unlock()
		}
	}()
	return load
}

func (l *ackedLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *ackedLoad) waitFor(t *testing.T, count int) {
	t.Helper()
	for began := time.Now(); l.count() < count; time.Sleep(10 * time.Millisecond) {
		if time.Since(began) > 20*time.Second {
			t.Fatalf("%d writes acknowledged within 20 s, want %d (%d failed)", l.count(), count, l.failed)
		}
	}
}

func (l *ackedLoad) stop(t *testing.T) map[int64]string {
	close(l.done)
	<-l.ended
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d writes acknowledged, %d failed (retried by the client until its deadline)", len(l.acked), l.failed)
	return l.acked
}

// waitAssignment waits until the partition has the replicas and leader
// given, with every replica in the ISR.
func waitAssignment(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, replicas []int32, leader int32) {
	t.Helper()
	var last kadm.PartitionDetail
	for began := time.Now(); time.Since(began) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		topics, err := admin.ListTopics(ctx, topic)
		if err != nil {
			continue
		}
		last = topics[topic].Partitions[0]
		if slices.Equal(last.Replicas, replicas) && last.Leader == leader && len(last.ISR) == len(replicas) {
			return
		}
	}
	t.Fatalf("%s-0: replicas %v isr %v leader %d, want replicas %v led by %d", topic, last.Replicas, last.ISR, last.Leader, replicas, leader)
}

// readBack consumes partition 0 from the start through a broker and checks
// that every acknowledged record is there at its offset.
func readBack(ctx context.Context, t *testing.T, broker, topic string, acked map[int64]string) {
	t.Helper()
	var last int64
	for offset := range acked {
		last = max(last, offset)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(broker),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	read := map[int64]string{}
	for len(read) == 0 || !readUpTo(read, last) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records up to offset %d before the deadline", len(read), last)
		}
		fetches.EachRecord(func(r *kgo.Record) { read[r.Offset] = string(r.Value) })
	}
	for offset, value := range acked {
		if read[offset] != value {
			t.Fatalf("offset %d: acknowledged %q, read %q", offset, value, read[offset])
		}
	}
}

func readUpTo(read map[int64]string, last int64) bool {
	_, ok := read[last]
	return ok
}
