package server

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// signal sends a signal to a running node (SIGSTOP pauses it, SIGCONT
// resumes it).
func (c *processCluster) signal(id metadata.BrokerID, sig syscall.Signal) {
	c.t.Helper()
	if err := c.processes[id].Process.Signal(sig); err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
}

// partitionView is a partition as one broker's Metadata shows it.
type partitionView struct {
	leader      metadata.BrokerID
	leaderEpoch int32
	replicas    []metadata.BrokerID
	isr         []metadata.BrokerID
}

// partitionMetadata asks one broker how it sees a partition.
func (c *processCluster) partitionMetadata(ctx context.Context, id metadata.BrokerID, topic string, partition int32) (partitionView, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[id]))
	if err != nil {
		return partitionView{}, err
	}
	defer client.Close()
	request := kmsg.NewPtrMetadataRequest()
	entry := kmsg.NewMetadataRequestTopic()
	entry.Topic = kmsg.StringPtr(topic)
	request.Topics = append(request.Topics, entry)
	response, err := client.Broker(int(id)).Request(ctx, request)
	if err != nil {
		return partitionView{}, err
	}
	for _, t := range response.(*kmsg.MetadataResponse).Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition || p.ErrorCode != 0 {
				continue
			}
			view := partitionView{leader: metadata.BrokerID(p.Leader), leaderEpoch: p.LeaderEpoch}
			for _, r := range p.Replicas {
				view.replicas = append(view.replicas, metadata.BrokerID(r))
			}
			for _, r := range p.ISR {
				view.isr = append(view.isr, metadata.BrokerID(r))
			}
			return view, nil
		}
	}
	return partitionView{}, fmt.Errorf("broker %d does not know %s-%d", id, topic, partition)
}

// waitPartition polls a broker's view of a partition until check holds.
func (c *processCluster) waitPartition(what string, id metadata.BrokerID, topic string, check func(partitionView) bool) partitionView {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last partitionView
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		view, err := c.partitionMetadata(ctx, id, topic, 0)
		cancel()
		if err == nil && check(view) {
			return view
		}
		last = view
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("after 30s, still not: %s (broker %d sees %+v)", what, id, last)
	return last
}

// electPreferred runs a preferred leader election for partition 0.
func (c *processCluster) electPreferred(ctx context.Context, through metadata.BrokerID, topic string) {
	c.t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[through]))
	if err != nil {
		c.t.Fatal(err)
	}
	defer client.Close()
	request := kmsg.NewPtrElectLeadersRequest()
	entry := kmsg.NewElectLeadersRequestTopic()
	entry.Topic, entry.Partitions = topic, []int32{0}
	request.Topics, request.TimeoutMillis = append(request.Topics, entry), 10000
	response, err := client.Broker(int(through)).Request(ctx, request)
	if err != nil {
		c.t.Fatalf("ElectLeaders: %v", err)
	}
	elected := response.(*kmsg.ElectLeadersResponse)
	if elected.ErrorCode != 0 || len(elected.Topics) != 1 || elected.Topics[0].Partitions[0].ErrorCode != 0 {
		c.t.Fatalf("ElectLeaders: %v %+v", kerr.ErrorForCode(elected.ErrorCode), elected.Topics)
	}
}

// ackedProducer produces distinct values with acks=all and idempotence,
// one every millisecond, and remembers the offset of each acknowledged one.
type ackedProducer struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]int64
	failed int
	// ackTimes are when the acknowledgements came.
	ackTimes []time.Time
}

// firstAckAfter is how long after t the first acknowledgement came.
func (p *ackedProducer) firstAckAfter(t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.ackTimes {
		if at.After(t) {
			return at.Sub(t)
		}
	}
	return -1
}

func startProducer(t *testing.T, seeds []string, topic string) *ackedProducer {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(60*time.Second),
		// kgo refreshes metadata at most every 5 s by default; a failover
		// test wants to see how soon the broker side is ready.
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &ackedProducer{client: client, cancel: cancel, done: make(chan struct{}), acked: map[string]int64{}}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			value := fmt.Sprintf("value-%07d", i)
			client.Produce(context.Background(), &kgo.Record{Value: []byte(value)}, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed++
					return
				}
				p.acked[value] = r.Offset
				p.ackTimes = append(p.ackTimes, time.Now())
			})
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

func (p *ackedProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// waitAcked waits until n more records than now are acknowledged.
func (p *ackedProducer) waitAcked(t *testing.T, what string, n int) time.Duration {
	t.Helper()
	began, want := time.Now(), p.count()+n
	for p.count() < want {
		if time.Since(began) > 30*time.Second {
			t.Fatalf("%s: %d records acknowledged, waiting for %d", what, p.count(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(began)
}

// stop stops producing and waits for every record in flight to be answered.
func (p *ackedProducer) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.client.Flush(ctx); err != nil {
		t.Fatalf("flushing the producer: %v", err)
	}
	p.client.Close()
}

// checkEveryAckedRecord reads the partition from the start up to its end
// and checks that every acknowledged record is there at the offset it was
// acknowledged at, and that no value is in the log twice.
func checkEveryAckedRecord(ctx context.Context, t *testing.T, seeds []string, topic string, acked map[string]int64) int {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	end := listEnd(ctx, t, admin, topic)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]int64{}
	next := int64(0)
	for next < end {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", next, end, ctx.Err())
		}
		for _, r := range fetches.Records() {
			if r.Offset != next {
				t.Fatalf("offset %d read where %d was next", r.Offset, next)
			}
			if earlier, dup := seen[string(r.Value)]; dup {
				t.Fatalf("%s is in the log twice, at %d and %d", r.Value, earlier, r.Offset)
			}
			seen[string(r.Value)] = r.Offset
			next++
		}
	}
	for value, offset := range acked {
		if got, ok := seen[value]; !ok || got != offset {
			t.Fatalf("acknowledged %s at offset %d, the log has it at %d (present: %t)", value, offset, got, ok)
		}
	}
	return int(end)
}

func listEnd(ctx context.Context, t *testing.T, client *kgo.Client, topic string) int64 {
	t.Helper()
	request := kmsg.NewPtrListOffsetsRequest()
	entry := kmsg.NewListOffsetsRequestTopic()
	entry.Topic = topic
	part := kmsg.NewListOffsetsRequestTopicPartition()
	part.Timestamp = -1
	entry.Partitions = append(entry.Partitions, part)
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil || response.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v %+v", err, response)
	}
	return response.Topics[0].Partitions[0].Offset
}

// Three `tide serve` processes, a topic with replication factor 3 and
// min.insync.replicas 2, and franz-go producing with acks=all and
// idempotence throughout: the partition leader is killed with kill -9,
// another takes over and producing goes on; the killed broker restarts and
// catches up; a preferred election hands leadership back to it. Every
// acknowledged record is read back afterwards at its offset, none twice.
func TestProduceThroughLeaderKillAndPreferredElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 3)
	c.waitFor("every broker unfenced", 20*time.Second, []metadata.BrokerID{1, 2, 3}, allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3]}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "failover"
	createReplicatedTopic(ctx, t, admin, topic, 1, "2")
	initial := c.waitPartition("the partition has a leader and a full ISR", 1, topic, func(v partitionView) bool { return v.leader > 0 && len(v.isr) == 3 })

	producer := startProducer(t, seeds, topic)
	producer.waitAcked(t, "before the kill", 300)
	leader := initial.leader
	c.kill(leader)
	killed := time.Now()
	other := c.running()[0]
	moved := c.waitPartition("a new leader", other, topic, func(v partitionView) bool {
		return v.leader > 0 && v.leader != leader && v.leaderEpoch > initial.leaderEpoch
	})
	t.Logf("the new leader is in metadata %s after the kill", time.Since(killed).Round(time.Millisecond))
	producer.waitAcked(t, "after the kill", 300)
	t.Logf("leader %d killed; broker %d leads in epoch %d; the first acknowledgement after the kill came %s later", leader, moved.leader, moved.leaderEpoch,
		producer.firstAckAfter(killed).Round(time.Millisecond))

	c.start(leader)
	c.waitPartition("the restarted broker back in the ISR", other, topic, func(v partitionView) bool { return slices.Contains(v.isr, leader) })
	producer.waitAcked(t, "after the restart", 300)
	preferred := initial.replicas[0]
	c.electPreferred(ctx, other, topic)
	back := c.waitPartition("the preferred replica leads", other, topic, func(v partitionView) bool { return v.leader == preferred })
	producer.waitAcked(t, "after the preferred election", 300)
	producer.stop(t)
	t.Logf("preferred replica %d leads in epoch %d; %d records acknowledged, %d failed", preferred, back.leaderEpoch, len(producer.acked), producer.failed)

	end := checkEveryAckedRecord(ctx, t, seeds, topic, producer.acked)
	c.waitReplicasAgree(topic, 0, int64(end), 15*time.Second, initial.replicas...)
	t.Logf("all %d acknowledged records read back, %d in the log, replicas agree", len(producer.acked), end)
}

// Five `tide serve` processes and a topic with replication factor 3: one of
// its followers is paused with SIGSTOP, and while it sleeps the leadership
// changes twice (the leader is paused until it is fenced, and a preferred
// election gives leadership back once it has caught up). Resumed, the
// zombie's fetches carry its old leader epoch and are refused with
// FENCED_LEADER_EPOCH (KAFKA-6880's zombie, fenced by KIP-320); it then
// learns the new epoch from the metadata log, reconciles and catches up:
// every replica has the same log, byte for byte, below the high watermark.
func TestZombieFollowerIsFencedAndReconciles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 5)
	all := []metadata.BrokerID{1, 2, 3, 4, 5}
	c.waitFor("every broker unfenced", 30*time.Second, all, allUnfenced(5))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3], c.kafka[4], c.kafka[5]}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "zombie"
	createReplicatedTopic(ctx, t, admin, topic, 1, "1")
	initial := c.waitPartition("the partition has a leader and a full ISR", 1, topic, func(v partitionView) bool { return v.leader > 0 && len(v.isr) == 3 })
	leader := initial.leader
	var zombie, other metadata.BrokerID
	for _, id := range initial.replicas {
		switch {
		case id == leader:
		case zombie == 0:
			zombie = id
		default:
			other = id
		}
	}
	observer := metadata.BrokerID(1)
	for slices.Contains(initial.replicas, observer) {
		observer++
	}
	sent := produceRecords(ctx, t, seeds[0], topic, 100)

	c.signal(zombie, syscall.SIGSTOP)
	c.waitPartition("the zombie out of the ISR", observer, topic, func(v partitionView) bool { return !slices.Contains(v.isr, zombie) })
	produceMoreRecords(ctx, t, seeds, topic, "while the zombie sleeps", 100)

	c.signal(leader, syscall.SIGSTOP)
	second := c.waitPartition("a second leader", observer, topic, func(v partitionView) bool { return v.leader == other })
	produceMoreRecords(ctx, t, seeds, topic, "under the second leader", 100)
	c.signal(leader, syscall.SIGCONT)
	c.waitPartition("the first leader back in the ISR", observer, topic, func(v partitionView) bool { return slices.Contains(v.isr, leader) })
	c.electPreferred(ctx, observer, topic)
	third := c.waitPartition("the first leader leads again", observer, topic, func(v partitionView) bool { return v.leader == leader })
	produceMoreRecords(ctx, t, seeds, topic, "under the third leadership", 100)
	t.Logf("zombie %d paused; leader %d (epoch %d), then %d (epoch %d), then %d again (epoch %d)", zombie, leader, initial.leaderEpoch,
		second.leader, second.leaderEpoch, third.leader, third.leaderEpoch)

	// Woken, the zombie either sends a fetch of its stale leadership, which
	// the leader refuses with FENCED_LEADER_EPOCH (rule kafka-6880), or
	// learns the third leadership from the metadata first (its next fetch
	// waits for its sync's completion, an event of its own, so the two
	// race) and fetches in the current epoch. Either way it must not take
	// a stale leader's answer for the current one: the logs must agree.
	c.signal(zombie, syscall.SIGCONT)
	fenced := false
	c.waitFor("the zombie fenced or in the third leadership", 15*time.Second, []metadata.BrokerID{zombie}, func(s Status) bool {
		fenced = s.FetchErrors["FENCED_LEADER_EPOCH"] > 0
		for _, p := range s.Partitions {
			if p.Topic == topic && p.LeaderEpoch >= int32(third.leaderEpoch) {
				return true
			}
		}
		return fenced
	})
	t.Logf("the zombie woke: its stale fetches refused with FENCED_LEADER_EPOCH: %t", fenced)
	const total = 400
	c.waitReplicasAgree(topic, 0, total, 20*time.Second, initial.replicas...)
	c.waitPartition("the zombie back in the ISR", observer, topic, func(v partitionView) bool { return len(v.isr) == 3 })
	first := consumeRecords(ctx, t, seeds[0], topic, total)
	checkConsumed(t, sent, first[:len(sent)])

	for _, id := range all {
		c.stop(id)
	}
	checkLogsAgree(t, c, topic, initial.replicas, total)
}

// produceMoreRecords produces 100 distinct records with acks=all.
func produceMoreRecords(ctx context.Context, t *testing.T, seeds []string, topic, what string, count int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var records []*kgo.Record
	for i := range count {
		records = append(records, &kgo.Record{Value: fmt.Appendf(nil, "%s %d", what, i)})
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("producing %s: %v", what, err)
	}
}

// checkLogsAgree opens each replica's log of partition 0, once its process
// stopped, and compares the bytes below end.
func checkLogsAgree(t *testing.T, c *processCluster, topic string, replicas []metadata.BrokerID, end int64) {
	t.Helper()
	var reference []byte
	for _, id := range replicas {
		log, err := commitlog.Open(commitlog.Config{FS: disk.OS(), Dir: filepath.Join(c.dirs[id], "partitions", topic+"-0"), RetentionBytes: -1})
		if err != nil {
			t.Fatalf("broker %d: %v", id, err)
		}
		result, err := log.Read(0, 64<<20, record.Offset(end))
		if err != nil {
			t.Fatalf("broker %d: read: %v", id, err)
		}
		bytes0, err := result.AppendTo(nil)
		log.Close()
		if err != nil {
			t.Fatalf("broker %d: read: %v", id, err)
		}
		if reference == nil {
			reference = bytes0
			continue
		}
		if !bytes.Equal(reference, bytes0) {
			t.Fatalf("broker %d's log differs from broker %d's below offset %d (%d and %d bytes)", id, replicas[0], end, len(bytes0), len(reference))
		}
	}
}
