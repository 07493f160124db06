package server

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// What processCluster.start gives every node (--session-timeout and
// --election-timeout): a broker silent for sessionTimeout is fenced, and
// the controller then elects a new leader from the ISR at once.
const (
	testSessionTimeout  = 2 * time.Second
	testElectionTimeout = time.Second
)

// blackholes isolates `tide serve` processes on 127.0.0.1 with iptables:
// an isolated node's packets, in both directions, are dropped without a
// word (no reset, no ICMP), and its connections stay open, as when a
// machine's network goes away under it.
//
// Every process shares 127.0.0.1, so a port says which node a packet goes
// to only for the node's listeners; the node's own connections (its
// heartbeats and raft messages to the controller, its replica fetches, its
// answers) leave from ephemeral ports. So each node runs under a uid of
// its own (no /etc/passwd entry is needed), and a mangle OUTPUT rule with
// `-m owner --uid-owner` puts that uid as the conntrack mark on every
// connection the node sends a packet on, from its start. Isolating the node
// then drops, in filter INPUT, every packet of a connection with that mark
// (both directions of each of the node's connections, whoever opened it)
// and every packet to its two listening ports (a connection opened to it
// during the isolation, before the node has sent anything on it). Dropping
// in INPUT rather than OUTPUT keeps the drop silent: a packet dropped in
// OUTPUT fails the sender's own send with EPERM.
//
// Network namespaces would isolate each node too, but they take veth pairs,
// a bridge and an address per node, and the nodes would stop sharing
// 127.0.0.1, which every other process test and helper here assumes; the
// uid marks need one rule per node and nothing else.
//
// Every rule carries the comment tide-test-<pid namespace>-<pid> of the
// test binary, is inserted at the head of its chain (a firewall's earlier
// ACCEPT must not skip it), and is removed in a cleanup; rules left by a
// test binary of the same pid namespace that died are swept at the start
// (a binary in another namespace, a container sharing this network, is
// not visible in /proc, so its rules are left alone). The uids and marks
// are derived from the two numbers too, so test binaries running at once
// do not touch each other's processes.
type blackholes struct {
	t   *testing.T
	tag string
	// baseUID + id is node id's uid and conntrack mark.
	baseUID uint32
	mu      sync.Mutex
	// installed are the rules in place, in the order they went in.
	installed []iptablesRule
	marked    map[metadata.BrokerID]bool
}

// iptablesRule is one rule: its table and chain, its matches, and its
// target; the comment goes between the matches and the target.
type iptablesRule struct {
	table, chain    string
	match, target   []string
	isolationOfNode metadata.BrokerID // 0 for a marking rule
}

func (r iptablesRule) command(operation, tag string) []string {
	args := []string{"-w", "10", "-t", r.table, operation, r.chain}
	args = append(args, r.match...)
	args = append(args, "-m", "comment", "--comment", tag)
	return append(args, r.target...)
}

// newBlackholes skips the test unless it runs as root with a working
// iptables, sweeps rules left by dead test binaries, and removes its own
// rules when the test ends.
func newBlackholes(t *testing.T) *blackholes {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs each node under its own uid and drops its packets with iptables (.ci/run runs as root)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables is not installed (apt-get install iptables); .ci/run installs it")
	}
	pid, namespace := os.Getpid(), pidNamespace()
	// Below 2^32 - 1 (not a uid), 16 per test binary, well above the uids
	// a system hands out.
	base := 1_000_000 + uint32((namespace*2_654_435_761+uint64(pid))%200_000_000)*16
	b := &blackholes{t: t, tag: testRuleTag(namespace, pid), baseUID: base, marked: map[metadata.BrokerID]bool{}}
	for _, table := range []string{"mangle", "filter"} {
		if out, err := exec.Command("iptables", "-w", "10", "-t", table, "-S").CombinedOutput(); err != nil {
			t.Skipf("iptables -t %s -S does not work here: %v: %s", table, err, out)
		}
	}
	sweepTestRules(t)
	t.Cleanup(b.removeAll)
	b.probe()
	return b
}

// probe skips the test when this kernel or iptables lacks a match or
// target the isolation needs (owner, connmark, CONNMARK), as in a
// container without them: it adds and removes one rule of each kind, for
// a uid no node runs as.
func (b *blackholes) probe() {
	b.t.Helper()
	mark := strconv.FormatUint(uint64(b.baseUID), 10)
	rules := []iptablesRule{
		{table: "mangle", chain: "OUTPUT", match: []string{"-o", "lo", "-m", "owner", "--uid-owner", mark}, target: []string{"-j", "CONNMARK", "--set-mark", mark}},
		{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-m", "connmark", "--mark", mark}, target: []string{"-j", "DROP"}},
	}
	for _, rule := range rules {
		if out, err := exec.Command("iptables", rule.command("-I", b.tag)...).CombinedOutput(); err != nil {
			b.t.Skipf("iptables cannot isolate a node here: %s: %v: %s", strings.Join(rule.command("-I", b.tag), " "), err, out)
		}
		if out, err := exec.Command("iptables", rule.command("-D", b.tag)...).CombinedOutput(); err != nil {
			b.t.Fatalf("removing the probe rule %s: %v: %s", strings.Join(rule.command("-D", b.tag), " "), err, out)
		}
	}
}

// testRuleTag is the comment on every rule a test binary adds.
func testRuleTag(namespace uint64, pid int) string {
	return fmt.Sprintf("tide-test-%d-%d", namespace, pid)
}

// pidNamespace is the inode of this process's pid namespace, 0 if unknown.
func pidNamespace() uint64 {
	link, err := os.Readlink("/proc/self/ns/pid") // pid:[4026531836]
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.Trim(strings.TrimPrefix(link, "pid:"), "[]"), 10, 64)
	return n
}

// sweepTestRules removes this pid namespace's tide-test rules whose test
// binary is no longer running (a test killed by its timeout runs no
// cleanup).
func sweepTestRules(t *testing.T) {
	prefix := fmt.Sprintf("tide-test-%d-", pidNamespace())
	for _, table := range []string{"mangle", "filter"} {
		out, _ := exec.Command("iptables", "-w", "10", "-t", table, "-S").Output()
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			index := slices.Index(fields, "--comment")
			if len(fields) < 2 || fields[0] != "-A" || index < 0 || index+1 >= len(fields) {
				continue
			}
			pid, found := strings.CutPrefix(fields[index+1], prefix)
			if !found {
				continue
			}
			if n, err := strconv.Atoi(pid); err != nil || n == os.Getpid() || processAlive(n) {
				continue
			}
			fields[0] = "-D"
			if out, err := exec.Command("iptables", append([]string{"-w", "10", "-t", table}, fields...)...).CombinedOutput(); err != nil {
				t.Logf("sweeping a leftover rule (%s): %v: %s", line, err, out)
			} else {
				t.Logf("swept a rule left by test binary %s: -t %s %s", pid, table, line)
			}
		}
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func (b *blackholes) uid(id metadata.BrokerID) uint32 { return b.baseUID + uint32(id) }

func (b *blackholes) add(rule iptablesRule) {
	b.t.Helper()
	if out, err := exec.Command("iptables", rule.command("-I", b.tag)...).CombinedOutput(); err != nil {
		b.t.Fatalf("iptables %s: %v: %s", strings.Join(rule.command("-I", b.tag), " "), err, out)
	}
	b.mu.Lock()
	b.installed = append(b.installed, rule)
	b.mu.Unlock()
}

// remove deletes the installed rules that keep picks, newest first.
func (b *blackholes) remove(keep func(iptablesRule) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.installed) - 1; i >= 0; i-- {
		rule := b.installed[i]
		if !keep(rule) {
			continue
		}
		if out, err := exec.Command("iptables", rule.command("-D", b.tag)...).CombinedOutput(); err != nil {
			b.t.Errorf("iptables %s: %v: %s", strings.Join(rule.command("-D", b.tag), " "), err, out)
		}
		b.installed = slices.Delete(b.installed, i, i+1)
	}
}

func (b *blackholes) removeAll() { b.remove(func(iptablesRule) bool { return true }) }

// healAll ends every isolation, keeping the marking rules.
func (b *blackholes) healAll() {
	b.remove(func(r iptablesRule) bool { return r.isolationOfNode != 0 })
}

// prepare is the processCluster hook: node id runs as its own uid, owns
// its data directory, and every connection it sends on is marked.
func (b *blackholes) prepare(c *processCluster, id metadata.BrokerID, cmd *exec.Cmd) {
	b.t.Helper()
	uid := b.uid(id)
	if err := os.MkdirAll(c.dirs[id], 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chown(c.dirs[id], int(uid), int(uid)); err != nil {
		b.t.Fatal(err)
	}
	traversable(b.t, filepath.Dir(c.binary))
	traversable(b.t, filepath.Dir(c.dirs[id]))
	// Pdeathsig: a test binary killed by its timeout runs no cleanup, and
	// must not leave nodes running under uids nothing else knows.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}, Pdeathsig: syscall.SIGKILL}
	if !b.marked[id] {
		mark := strconv.FormatUint(uint64(uid), 10)
		b.add(iptablesRule{table: "mangle", chain: "OUTPUT", match: []string{"-o", "lo", "-m", "owner", "--uid-owner", mark},
			target: []string{"-j", "CONNMARK", "--set-mark", mark}})
		b.marked[id] = true
	}
}

// traversable lets other uids into dir and the test's directories above
// it (t.TempDir makes them 0700): the nodes run the binary and write
// their data under them.
func traversable(t *testing.T, dir string) {
	t.Helper()
	for ; dir != os.TempDir() && dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		info, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, info.Mode().Perm()|0o055); err != nil {
			t.Fatal(err)
		}
	}
}

// isolate blackholes node id: from now on none of its packets arrive
// anywhere and nothing arrives at it.
func (b *blackholes) isolate(c *processCluster, id metadata.BrokerID) {
	b.t.Helper()
	mark := strconv.FormatUint(uint64(b.uid(id)), 10)
	b.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-m", "connmark", "--mark", mark},
		target: []string{"-j", "DROP"}, isolationOfNode: id})
	for _, address := range []string{c.kafka[id], c.controllers[id]} {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			b.t.Fatal(err)
		}
		b.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-p", "tcp", "--dport", port},
			target: []string{"-j", "DROP"}, isolationOfNode: id})
	}
}

// heal ends node id's isolation; its connections carry on where they were.
func (b *blackholes) heal(id metadata.BrokerID) {
	b.remove(func(r iptablesRule) bool { return r.isolationOfNode == id })
}

// spreadProducer produces distinct values with acks=all and idempotence
// round-robin over a topic's partitions, one every millisecond, and
// remembers each acknowledged value's offset and when it was acknowledged.
type spreadProducer struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []map[string]int64
	// ackTimes[p] are when partition p's acknowledgements came.
	ackTimes [][]time.Time
	failed   int
}

func startSpreadProducer(t *testing.T, name string, seeds []string, topic string, partitions int, options ...kgo.Opt) *spreadProducer {
	t.Helper()
	options = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, options...)
	client, err := kgo.NewClient(options...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &spreadProducer{client: client, cancel: cancel, done: make(chan struct{}),
		acked: make([]map[string]int64, partitions), ackTimes: make([][]time.Time, partitions)}
	for i := range p.acked {
		p.acked[i] = map[string]int64{}
	}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			partition := int32(i % partitions)
			value := fmt.Sprintf("%s-%07d", name, i)
			client.Produce(context.Background(), &kgo.Record{Partition: partition, Value: []byte(value)}, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed++
					return
				}
				p.acked[partition][value] = r.Offset
				p.ackTimes[partition] = append(p.ackTimes[partition], time.Now())
			})
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

// ackedIn counts partition's acknowledgements that came in [from, to).
func (p *spreadProducer) ackedIn(partition int32, from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.ackTimes[partition] {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// firstAckAfter is how long after t partition's first acknowledgement
// came, or -1.
func (p *spreadProducer) firstAckAfter(partition int32, t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.ackTimes[partition] {
		if at.After(t) {
			return at.Sub(t)
		}
	}
	return -1
}

func (p *spreadProducer) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, acked := range p.acked {
		n += len(acked)
	}
	return n
}

// waitAcked waits until every partition has n more acknowledgements.
func (p *spreadProducer) waitAcked(t *testing.T, what string, n int, timeout time.Duration) {
	t.Helper()
	counts := func() []int {
		p.mu.Lock()
		defer p.mu.Unlock()
		var c []int
		for _, acked := range p.acked {
			c = append(c, len(acked))
		}
		return c
	}
	began, start := time.Now(), counts()
	for {
		now, done := counts(), true
		for i := range now {
			done = done && now[i] >= start[i]+n
		}
		if done {
			return
		}
		if time.Since(began) > timeout {
			t.Fatalf("%s: acknowledgements per partition went from %v to %v in %s, waiting for %d more each", what, start, now, timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops producing and waits for every record in flight to be answered.
func (p *spreadProducer) stop(t *testing.T) {
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

// waitPartitionView polls one broker's Metadata for a partition until
// check holds, and says how long that took.
func (c *processCluster) waitPartitionView(what string, id metadata.BrokerID, topic string, partition int32, timeout time.Duration,
	check func(partitionView) bool) (partitionView, time.Duration) {
	c.t.Helper()
	began := time.Now()
	var last partitionView
	var lastErr error
	for time.Since(began) < timeout {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		view, err := c.partitionMetadata(ctx, id, topic, partition)
		cancel()
		if err == nil && check(view) {
			return view, time.Since(began)
		}
		last, lastErr = view, err
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("after %s, still not: %s (broker %d sees %s-%d as %+v, %v)", timeout, what, id, topic, partition, last, lastErr)
	return last, 0
}

// partitionStatus is how broker id's replica of a partition stands.
func (c *processCluster) partitionStatus(id metadata.BrokerID, topic string, partition int32) (StatusPartition, error) {
	status, err := c.status(id)
	if err != nil {
		return StatusPartition{}, err
	}
	for _, p := range status.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p, nil
		}
	}
	return StatusPartition{}, fmt.Errorf("broker %d hosts no %s-%d", id, topic, partition)
}

// checkPartitionRecords reads a partition from its start to its end and
// checks that every acknowledged value is there at the offset it was
// acknowledged at and that no value is in the log twice; it returns the
// log end offset.
func checkPartitionRecords(ctx context.Context, t *testing.T, seeds []string, topic string, partition int32, acked map[string]int64) int64 {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	end := latestOffset(ctx, t, consumer, topic, partition)
	seen := map[string]int64{}
	for next := int64(0); next < end; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s-%d: read %d of %d records: %v", topic, partition, next, end, ctx.Err())
		}
		for _, r := range fetches.Records() {
			if r.Offset != next {
				t.Fatalf("%s-%d: offset %d read where %d was next", topic, partition, r.Offset, next)
			}
			if earlier, dup := seen[string(r.Value)]; dup {
				t.Fatalf("%s-%d: %s is in the log twice, at %d and %d", topic, partition, r.Value, earlier, r.Offset)
			}
			seen[string(r.Value)] = r.Offset
			next++
		}
	}
	for value, offset := range acked {
		if got, ok := seen[value]; !ok || got != offset {
			t.Fatalf("%s-%d: acknowledged %s at offset %d, the log has it at %d (present: %t)", topic, partition, value, offset, got, ok)
		}
	}
	return end
}

// latestOffset is a partition's log end offset as its leader answers
// ListOffsets (latest).
func latestOffset(ctx context.Context, t *testing.T, client *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	request := kmsg.NewPtrListOffsetsRequest()
	entry := kmsg.NewListOffsetsRequestTopic()
	entry.Topic = topic
	part := kmsg.NewListOffsetsRequestTopicPartition()
	part.Partition, part.Timestamp = partition, -1
	entry.Partitions = append(entry.Partitions, part)
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil || response.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d: %v %+v", topic, partition, err, response)
	}
	return response.Topics[0].Partitions[0].Offset
}

// Issue 12 item 5, between processes. Three `tide serve` nodes, a topic of
// 3 partitions with replication factor 3 and min.insync.replicas 2, and an
// idempotent acks=all franz-go producer on every partition; then the
// leader of one partition (not the active controller) is blackholed: its
// packets are dropped in both directions and its connections stay open.
//
// The broker side must hold: within the session timeout plus one election
// the controller has fenced the node and a survivor leads the partition in
// a new epoch with the other two in the ISR, and a producer with nothing
// in flight to the blackholed node (a fresh client started then, seeded
// with the survivors) gets acks=all writes committed on that partition:
// the new leader's high watermark moves while the node is still isolated.
// The first producer, which had requests in flight to the node, may wait
// on them (the client's request timeout, see docs/operations.md); the test
// only logs how long. After the heal the node comes back, unfenced and in
// every ISR, the three replicas of every partition agree, and every
// acknowledged record is in its partition once, at its offset.
func TestBlackholedLeaderIsReplacedAndCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	holes := newBlackholes(t)
	c := newPreparedProcessCluster(t, 3, holes.prepare)
	t.Cleanup(holes.healAll) // before the nodes stop: a blackholed node cannot shut down cleanly
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("every broker unfenced", 30*time.Second, all, allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3]}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic, partitions = "blackhole", 3
	createReplicatedTopic(ctx, t, admin, topic, partitions, "2")
	var initial [partitions]partitionView
	for p := range int32(partitions) {
		initial[p], _ = c.waitPartitionView("a leader and a full ISR", 1, topic, p, 20*time.Second,
			func(v partitionView) bool { return v.leader > 0 && len(v.isr) == 3 })
	}
	victim, partition := pickVictim(t, c, initial[:])
	survivors := slices.DeleteFunc(slices.Clone(all), func(id metadata.BrokerID) bool { return id == victim })

	producer := startSpreadProducer(t, "first", seeds, topic, partitions, kgo.MetadataMinAge(250*time.Millisecond))
	producer.waitAcked(t, "before the isolation", 200, 30*time.Second)
	holes.isolate(c, victim)
	isolated := time.Now()
	t.Logf("broker %d (leader of %s-%d in epoch %d) blackholed", victim, topic, partition, initial[partition].leaderEpoch)
	fresh := checkNewLeaderCommits(t, c, victim, survivors, topic, partition, initial[partition], isolated)

	// Keep the isolation on long enough to see the first producer's wait,
	// as the operator did (6 to 10 s), then heal.
	time.Sleep(time.Until(isolated.Add(6 * time.Second)))
	healed := time.Now()
	holes.heal(victim)

	c.waitFor(fmt.Sprintf("broker %d unfenced after the heal", victim), 20*time.Second, all, brokerFenced(victim, false))
	for p := range int32(partitions) {
		c.waitPartitionView("the healed broker back in the ISR", survivors[0], topic, p, 30*time.Second,
			func(v partitionView) bool { return len(v.isr) == 3 })
		t.Logf("%s-%d: full ISR again %s after the heal", topic, p, time.Since(healed).Round(time.Millisecond))
	}
	producer.waitAcked(t, "after the heal", 200, 30*time.Second)
	for p := range int32(partitions) {
		t.Logf("the first producer during the %s isolation: %s-%d got %d acknowledgements, the first %s after the isolation began",
			healed.Sub(isolated).Round(time.Millisecond), topic, p, producer.ackedIn(p, isolated, healed), producer.firstAckAfter(p, isolated).Round(time.Millisecond))
	}
	producer.stop(t)
	t.Logf("the first producer: %d acknowledged, %d failed", producer.total(), producer.failed)

	for p := range int32(partitions) {
		acked := maps.Clone(producer.acked[p])
		if p == partition {
			maps.Copy(acked, fresh.acked)
		}
		end := checkPartitionRecords(ctx, t, seeds, topic, p, acked)
		c.waitReplicasAgree(topic, p, end, 20*time.Second, all...)
		t.Logf("%s-%d: %d acknowledged records read back once each at their offsets, %d in the log, three replicas agree", topic, p, len(acked), end)
	}
}

// checkNewLeaderCommits checks, while victim is isolated, that a survivor
// leads the partition in a newer epoch without victim in its ISR, and that
// a fresh producer gets acks=all writes committed on it within the
// session timeout plus an election (and 2 s of margin) of the isolation.
func checkNewLeaderCommits(t *testing.T, c *processCluster, victim metadata.BrokerID, survivors []metadata.BrokerID, topic string, partition int32,
	initial partitionView, isolated time.Time) freshProduce {
	t.Helper()
	moved, movedAfter := c.waitPartitionView("a new leader from the survivors, the isolated broker out of the ISR", survivors[0], topic, partition,
		20*time.Second, func(v partitionView) bool {
			return v.leader > 0 && v.leader != victim && v.leaderEpoch > initial.leaderEpoch && !slices.Contains(v.isr, victim)
		})
	t.Logf("broker %d leads in epoch %d with ISR %v, %s after the isolation", moved.leader, moved.leaderEpoch, moved.isr, movedAfter.Round(time.Millisecond))
	// The fresh producer must have nothing to send to the isolated broker:
	// its first request (Metadata, then InitProducerId to any broker it
	// knows) goes wherever its seeds' metadata says, so both survivors
	// must have it fenced (Metadata lists unfenced brokers only).
	c.waitFor(fmt.Sprintf("broker %d fenced on both survivors", victim), 10*time.Second, survivors, brokerFenced(victim, true))
	before, err := c.partitionStatus(moved.leader, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	bound := testSessionTimeout + testElectionTimeout + 2*time.Second
	fresh := produceFresh(t, c, survivors, victim, topic, partition, 200, isolated, bound)
	t.Logf("a fresh producer's first acks=all write on %s-%d committed %s after the isolation (bound %s), %d in all at offsets %d..%d",
		topic, partition, fresh.firstAck.Sub(isolated).Round(time.Millisecond), bound, len(fresh.acked), fresh.lowest, fresh.highest)
	after, err := c.partitionStatus(moved.leader, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	if after.HighWatermark <= before.HighWatermark || after.HighWatermark <= fresh.highest {
		t.Fatalf("the new leader's high watermark went from %d to %d with writes acknowledged up to offset %d", before.HighWatermark, after.HighWatermark, fresh.highest)
	}
	t.Logf("the new leader's high watermark went %d -> %d while broker %d was isolated (%s in)", before.HighWatermark, after.HighWatermark, victim,
		time.Since(isolated).Round(time.Millisecond))
	return fresh
}

// pickVictim chooses a broker that leads a partition and is not the
// active controller (isolating the controller would add a raft election
// to what the test measures), and that partition.
func pickVictim(t *testing.T, c *processCluster, views []partitionView) (metadata.BrokerID, int32) {
	t.Helper()
	active := c.active()
	for p, view := range views {
		if view.leader != active {
			return view.leader, int32(p)
		}
	}
	t.Fatalf("every partition is led by the active controller %d: %+v", active, views)
	return 0, 0
}

// freshProduce is what a producer started during the isolation got.
type freshProduce struct {
	acked           map[string]int64
	firstAck        time.Time
	lowest, highest int64
}

// produceFresh starts a new idempotent acks=all client seeded with the
// given brokers and produces count records to partition one at a time. It
// fails the test when the first record is not acknowledged within bound
// of since, or the rest within 20 s more: an idempotent producer never
// gives up a record it sent without an answer that settles it (a
// REQUEST_TIMED_OUT does not), so the client is closed at the deadline to
// end the wait.
func produceFresh(t *testing.T, c *processCluster, survivors []metadata.BrokerID, victim metadata.BrokerID, topic string, partition int32, count int,
	since time.Time, bound time.Duration) freshProduce {
	t.Helper()
	dials := &dialsTo{address: c.kafka[victim]}
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[survivors[0]], c.kafka[survivors[1]]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.Dialer(dials.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	deadline := time.AfterFunc(time.Until(since.Add(bound)), client.Close)
	defer deadline.Stop()
	result := freshProduce{acked: map[string]int64{}, lowest: -1}
	for i := range count {
		value := fmt.Sprintf("fresh-%07d", i)
		r, err := client.ProduceSync(context.Background(), &kgo.Record{Partition: partition, Value: []byte(value)}).First()
		switch {
		case err != nil && i == 0:
			for _, id := range survivors {
				status, err := c.partitionStatus(id, topic, partition)
				t.Logf("broker %d: %+v %v", id, status, err)
			}
			t.Fatalf("a fresh producer's first acks=all write to %s-%d was not acknowledged within %s of the isolation "+
				"(the session timeout %s, an election %s, and 2 s): %v; it dialed the isolated broker %d times",
				topic, partition, bound, testSessionTimeout, testElectionTimeout, err, dials.count())
		case err != nil:
			t.Fatalf("a fresh producer's record %d to %s-%d: %v", i, topic, partition, err)
		case i == 0:
			result.firstAck, result.lowest = time.Now(), r.Offset
			deadline.Reset(20 * time.Second)
		}
		result.acked[value], result.highest = r.Offset, r.Offset
	}
	if n := dials.count(); n > 0 {
		t.Fatalf("the fresh producer dialed the isolated broker %d times", n)
	}
	return result
}

// dialsTo is a kgo dialer that counts the dials to one address.
type dialsTo struct {
	address string
	mu      sync.Mutex
	dialed  int
}

func (d *dialsTo) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if host == d.address {
		d.mu.Lock()
		d.dialed++
		d.mu.Unlock()
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, host)
}

func (d *dialsTo) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dialed
}
