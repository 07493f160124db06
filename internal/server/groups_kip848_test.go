package server

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// ownership records which consumer owns which partition, from franz-go's
// rebalance callbacks: a consumer owns a partition from its
// OnPartitionsAssigned until its OnPartitionsRevoked (or Lost) returns.
// KIP-848's rule revoke-before-assign says the coordinator gives a
// partition to its next owner only once the previous owner's heartbeat has
// reported it released, which franz-go sends only after the revocation
// callback: the consumers of this test share one process, so a partition
// assigned while another consumer still owns it is a broken rule.
type ownership struct {
	mu      sync.Mutex
	owners  map[int32]string
	doubled []string
}

func (o *ownership) assign(name string, partitions []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, partition := range partitions {
		if owner, owned := o.owners[partition]; owned && owner != name {
			o.doubled = append(o.doubled, fmt.Sprintf("partition %d assigned to %s while %s owns it", partition, name, owner))
		}
		o.owners[partition] = name
	}
}

func (o *ownership) release(name string, partitions []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, partition := range partitions {
		if o.owners[partition] == name {
			delete(o.owners, partition)
		}
	}
}

// split is each consumer's partitions, sorted, and the partitions owned.
func (o *ownership) split() (map[string][]int32, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byOwner := map[string][]int32{}
	for partition, owner := range o.owners {
		byOwner[owner] = append(byOwner[owner], partition)
	}
	for _, partitions := range byOwner {
		slices.Sort(partitions)
	}
	return byOwner, len(o.owners)
}

// consumer848 is a franz-go group consumer speaking KIP-848
// (kgo.ServerSideBalancer with the cooperative-sticky balancer: the
// server's "uniform" assignor), reporting its partitions to owners, and
// polling in the background, counting records per partition.
type consumer848 struct {
	name   string
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	first  map[int32]int64
	count  int
}

func newConsumer848(t *testing.T, seeds []string, name, group, topic string, owners *ownership) *consumer848 {
	t.Helper()
	c := &consumer848{name: name, done: make(chan struct{}), first: map[int32]int64{}}
	partitions := func(assigned map[string][]int32) []int32 { return assigned[topic] }
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryTimeout(20*time.Second), kgo.ClientID(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			owners.assign(name, partitions(assigned))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			owners.release(name, partitions(revoked))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			owners.release(name, partitions(lost))
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.client, c.cancel = client, cancel
	go c.poll(ctx)
	return c
}

func (c *consumer848) poll(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		c.client.PollFetches(ctx).EachRecord(func(record *kgo.Record) {
			c.mu.Lock()
			if _, seen := c.first[record.Partition]; !seen {
				c.first[record.Partition] = record.Offset
			}
			c.count++
			c.mu.Unlock()
		})
	}
}

// close stops polling and leaves the group (ConsumerGroupHeartbeat with
// member epoch -1).
func (c *consumer848) close() {
	c.cancel()
	<-c.done
	c.client.Close()
}

// waitSplit waits until the consumers named own every one of the
// partitions, each at least one.
func waitSplit(t *testing.T, owners *ownership, partitions int, names ...string) map[string][]int32 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		byOwner, owned := owners.split()
		ok := owned == partitions && len(byOwner) == len(names)
		for _, name := range names {
			ok = ok && len(byOwner[name]) > 0
		}
		if ok {
			return byOwner
		}
		if time.Now().After(deadline) {
			t.Fatalf("the partitions never split over %v: %v", names, byOwner)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// franz-go's KIP-848 consumer (ConsumerGroupHeartbeat, the server-side
// uniform assignor) on a tide serve process: two consumers of a group
// split a 4-partition topic; a third joining takes partitions from them,
// and no partition is ever owned by two at once (revocation before
// assignment); the third closing hands its partitions back. The consumers
// read every record and one commits the group's offsets; after a kill -9
// and a restart of the broker, a new consumer of the group starts at the
// committed offsets. ConsumerGroupDescribe shows the group's members.
func TestKIP848GroupConsumers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newPreparedProcessCluster(t, 1, func(_ *processCluster, _ metadata.BrokerID, cmd *exec.Cmd) {
		cmd.Args = append(cmd.Args, "--offsets-topic-partitions", "3",
			"--group-consumer-heartbeat-interval", "200ms", "--group-consumer-session-timeout", "6s")
	})
	c.waitFor("the broker registered and unfenced", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group, perPartition = "kip848", "kip848-app", 25
	createPartitionedTopic(ctx, t, c.seeds(), topic, 4)
	producePartitioned(ctx, t, c.seeds(), topic, 4, perPartition)

	owners := &ownership{owners: map[int32]string{}}
	a := newConsumer848(t, c.seeds(), "a", group, topic, owners)
	b := newConsumer848(t, c.seeds(), "b", group, topic, owners)
	t.Logf("two consumers: %v", waitSplit(t, owners, 4, "a", "b"))
	third := newConsumer848(t, c.seeds(), "c", group, topic, owners)
	t.Logf("a third joined: %v", waitSplit(t, owners, 4, "a", "b", "c"))
	checkConsumerGroupDescribed(ctx, t, c.seeds(), group, 3)
	third.close()
	t.Logf("the third closed: %v", waitSplit(t, owners, 4, "a", "b"))
	if len(owners.doubled) > 0 {
		t.Fatalf("a partition had two owners: %v", owners.doubled)
	}

	// A partition handed back after the third closed is read again from
	// the start (nothing was committed yet): commit until a and b have
	// read and committed every partition to its end.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		commitAll(ctx, t, a.client, b.client)
		committed := fetchCommitted(ctx, t, c.seeds(), group, topic)
		if len(committed) == 4 && committed[0] == perPartition && committed[1] == perPartition && committed[2] == perPartition && committed[3] == perPartition {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed %v, want %d for every partition", committed, perPartition)
		}
	}
	a.close()
	b.close()

	c.kill(1)
	c.start(1)
	c.waitFor("the broker back", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	producePartitioned(ctx, t, c.seeds(), topic, 4, 2)
	resumed := newConsumer848(t, c.seeds(), "d", group, topic, owners)
	defer resumed.close()
	waitConsumed(t, 8, resumed)
	resumed.mu.Lock()
	defer resumed.mu.Unlock()
	for partition := range int32(4) {
		if resumed.first[partition] != perPartition {
			t.Fatalf("after the restart partition %d resumed at %d, committed %d", partition, resumed.first[partition], perPartition)
		}
	}
}

// waitConsumed waits until the consumers together have read want records.
func waitConsumed(t *testing.T, want int, consumers ...*consumer848) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		total := 0
		for _, consumer := range consumers {
			consumer.mu.Lock()
			total += consumer.count
			consumer.mu.Unlock()
		}
		if total >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d of %d records", total, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commitAll commits what each client has consumed, retrying while the
// group settles (a commit at a member epoch the coordinator has moved past
// is STALE_MEMBER_EPOCH).
func commitAll(ctx context.Context, t *testing.T, clients ...*kgo.Client) {
	t.Helper()
	for _, client := range clients {
		var err error
		for range 20 {
			if err = client.CommitUncommittedOffsets(ctx); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// checkConsumerGroupDescribed asks for the group with ConsumerGroupDescribe
// (key 69) until it shows members members, each with an assignment.
func checkConsumerGroupDescribed(ctx context.Context, t *testing.T, seeds []string, group string, members int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var last kmsg.ConsumerGroupDescribeResponseGroup
	for range 50 {
		request := kmsg.NewPtrConsumerGroupDescribeRequest()
		request.Groups = []string{group}
		response, err := request.RequestWith(ctx, client)
		if err == nil && len(response.Groups) == 1 {
			last = response.Groups[0]
			assigned := 0
			for _, member := range last.Members {
				if len(member.Assignment.TopicPartitions) > 0 {
					assigned++
				}
			}
			if last.ErrorCode == 0 && last.State == "Stable" && assigned == members && len(last.Members) == members {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("ConsumerGroupDescribe never showed %d stable members: %+v", members, last)
}
