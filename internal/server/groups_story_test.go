package server

import (
	"context"
	"errors"
	"fmt"
	"net"
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
// OnPartitionsAssigned until its OnPartitionsRevoked (or Lost) returns, or
// until it is killed. The consumers of a story share one process, so a
// partition assigned while another live consumer still owns it had two
// owners at once: an eager protocol (range) revokes everything before it
// joins again, cooperative-sticky gives a partition to its next owner only
// in the rebalance after its owner revoked it (KIP-429), and KIP-848's
// coordinator only once the owner's heartbeat reported it released (rule
// revoke-before-assign), which franz-go sends after the revocation
// callback.
type ownership struct {
	mu      sync.Mutex
	owners  map[int32]string
	dead    map[string]bool
	doubled []string
}

func newOwnership() *ownership {
	return &ownership{owners: map[int32]string{}, dead: map[string]bool{}}
}

func (o *ownership) assign(name string, partitions []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead[name] {
		return
	}
	for _, partition := range partitions {
		if owner, owned := o.owners[partition]; owned && owner != name {
			o.doubled = append(o.doubled, fmt.Sprintf("partition %d assigned to %s while %s owns it", partition, name, owner))
		}
		o.owners[partition] = name
	}
}

func (o *ownership) doubledOwners() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.doubled)
}

// bury frees a killed consumer's partitions and ignores its callbacks
// from now on.
func (o *ownership) bury(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead[name] = true
	for partition, owner := range o.owners {
		if owner == name {
			delete(o.owners, partition)
		}
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

// groupProtocol is one way a franz-go consumer takes part in a group: the
// classic protocol (JoinGroup, SyncGroup, Heartbeat) with a client-side
// balancer, or KIP-848's ConsumerGroupHeartbeat with the server-side
// assignor.
type groupProtocol struct {
	name     string
	options  []kgo.Opt
	describe func(ctx context.Context, t *testing.T, seeds []string, group string, members int)
}

// groupProtocols are the protocols the group story runs with. The classic
// members' session timeout is the coordinator's least (6 s), heartbeating
// every 300 ms so that a rebalance is learnt of at once; KIP-848's session
// timeout and heartbeat interval are the broker's (its flags in the story).
var groupProtocols = []groupProtocol{
	{name: "range", options: []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}, describe: classicGroupDescribed("range")},
	{name: "cooperative-sticky", options: []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}, describe: classicGroupDescribed("cooperative-sticky")},
	{name: "kip848", options: []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())},
		describe: checkConsumerGroupDescribed},
}

// groupMember is a franz-go group consumer reporting its partitions to
// owners and polling in the background, counting records per partition.
// Its connections go through a dialer the test can sever, to kill it.
type groupMember struct {
	name   string
	client *kgo.Client
	dialer *severableDialer
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	first  map[int32]int64
	count  int
}

func newGroupMember(t *testing.T, seeds []string, protocol groupProtocol, name, group, topic string, owners *ownership) *groupMember {
	t.Helper()
	m := &groupMember{name: name, dialer: &severableDialer{}, done: make(chan struct{}), first: map[int32]int64{}}
	partitions := func(assigned map[string][]int32) []int32 { return assigned[topic] }
	options := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.Dialer(m.dialer.DialContext),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryTimeout(20 * time.Second), kgo.ClientID(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			owners.assign(name, partitions(assigned))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			owners.release(name, partitions(revoked))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			owners.release(name, partitions(lost))
		})}, protocol.options...)
	client, err := kgo.NewClient(options...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.client, m.cancel = client, cancel
	go m.poll(ctx)
	return m
}

func (m *groupMember) poll(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		m.client.PollFetches(ctx).EachRecord(func(record *kgo.Record) {
			m.mu.Lock()
			if _, seen := m.first[record.Partition]; !seen {
				m.first[record.Partition] = record.Offset
			}
			m.count++
			m.mu.Unlock()
		})
	}
}

// close stops polling and leaves the group (LeaveGroup, or a
// ConsumerGroupHeartbeat with member epoch -1).
func (m *groupMember) close() {
	m.cancel()
	<-m.done
	m.client.Close()
}

// kill models the member's process dying: its connections are closed
// under it, as the kernel closes a killed process's sockets, and it never
// reaches a broker again, so it neither leaves the group nor commits; the
// coordinator learns of its death only when its session times out. A dead
// process owns nothing, so its partitions are free from now on, and its
// client's later callbacks (it may still declare them lost) are ignored.
func (m *groupMember) kill(owners *ownership) {
	m.dialer.sever()
	owners.bury(m.name)
	m.cancel()
	<-m.done
	go m.client.Close() // its goroutines stop trying; its LeaveGroup cannot get out
}

// severableDialer dials the brokers until it is severed, then closes the
// connections it made and refuses to dial again.
type severableDialer struct {
	mu          sync.Mutex
	connections []net.Conn
	severed     bool
}

func (d *severableDialer) DialContext(ctx context.Context, network, host string) (net.Conn, error) {
	connection, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.severed {
		connection.Close()
		return nil, errors.New("the process is dead")
	}
	d.connections = append(d.connections, connection)
	return connection, nil
}

func (d *severableDialer) sever() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.severed = true
	for _, connection := range d.connections {
		connection.Close()
	}
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

// TestGroupConsumerStory runs one story with franz-go's group consumers,
// unchanged, once per protocol: the classic protocol with the range and
// cooperative-sticky balancers, and KIP-848's (ConsumerGroupHeartbeat, the
// server-side uniform assignor). On a tide serve process, two consumers of
// a group split a 4-partition topic; a third joining takes partitions from
// them, and no partition is ever owned by two at once; the third is killed
// (its connections cut, no LeaveGroup) and, once its session times out,
// its partitions go to the other two. They read every record and commit;
// after a kill -9 and a restart of the broker, a new consumer of the
// group starts at the committed offsets. DescribeGroups or
// ConsumerGroupDescribe shows the group's three members stable.
func TestGroupConsumerStory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	for _, protocol := range groupProtocols {
		t.Run(protocol.name, func(t *testing.T) {
			t.Parallel()
			runGroupStory(t, protocol)
		})
	}
}

func runGroupStory(t *testing.T, protocol groupProtocol) {
	c := newPreparedProcessCluster(t, 1, func(_ *processCluster, _ metadata.BrokerID, cmd *exec.Cmd) {
		cmd.Args = append(cmd.Args, "--offsets-topic-partitions", "3", "--group-initial-rebalance-delay", "0s",
			"--group-consumer-heartbeat-interval", "200ms", "--group-consumer-session-timeout", "6s")
	})
	c.waitFor("the broker registered and unfenced", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, perPartition = "story", 25
	group := "story-" + protocol.name
	createPartitionedTopic(ctx, t, c.seeds(), topic, 4)
	producePartitioned(ctx, t, c.seeds(), topic, 4, perPartition)

	owners := newOwnership()
	a := newGroupMember(t, c.seeds(), protocol, "a", group, topic, owners)
	b := newGroupMember(t, c.seeds(), protocol, "b", group, topic, owners)
	t.Logf("two consumers: %v", waitSplit(t, owners, 4, "a", "b"))
	third := newGroupMember(t, c.seeds(), protocol, "c", group, topic, owners)
	t.Logf("a third joined: %v", waitSplit(t, owners, 4, "a", "b", "c"))
	protocol.describe(ctx, t, c.seeds(), group, 3)
	third.kill(owners)
	t.Logf("the third was killed: %v", waitSplit(t, owners, 4, "a", "b"))
	if doubled := owners.doubledOwners(); len(doubled) > 0 {
		t.Fatalf("a partition had two owners: %v", doubled)
	}

	// A partition handed over from the killed consumer is read again from
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
	resumed := newGroupMember(t, c.seeds(), protocol, "d", group, topic, owners)
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
func waitConsumed(t *testing.T, want int, consumers ...*groupMember) {
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

// classicGroupDescribed checks a classic group with DescribeGroups (key
// 15) until it shows members members, Stable, on the protocol (the
// balancer) named.
func classicGroupDescribed(protocol string) func(context.Context, *testing.T, []string, string, int) {
	return func(ctx context.Context, t *testing.T, seeds []string, group string, members int) {
		t.Helper()
		client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		var last kmsg.DescribeGroupsResponseGroup
		for range 50 {
			request := kmsg.NewPtrDescribeGroupsRequest()
			request.Groups = []string{group}
			response, err := request.RequestWith(ctx, client)
			if err == nil && len(response.Groups) == 1 {
				last = response.Groups[0]
				if last.ErrorCode == 0 && last.State == "Stable" && last.Protocol == protocol && len(last.Members) == members {
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("DescribeGroups never showed %d stable members on %s: %+v", members, protocol, last)
	}
}
