package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// blackholeClient is a producer whose wait on a blackholed leader is
// measured: start begins producing to one partition, idempotent with
// acks=all, and returns what stops it.
type blackholeClient struct {
	name  string
	start func(t *testing.T, seeds []string, topic string, partition int32, since *clock) (stop func())
}

// clock is the time the isolation began, for a client's log lines; zero
// until then.
type clock struct {
	mu    sync.Mutex
	began time.Time
}

func (c *clock) set(t time.Time) { c.mu.Lock(); c.began = t; c.mu.Unlock() }

func (c *clock) since() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.began.IsZero() {
		return "before"
	}
	return "+" + time.Since(c.began).Round(time.Millisecond).String()
}

// settleTime is how long a client produces before its partition's leader
// is blackholed.
const settleTime = 10 * time.Second

// What docs/operations.md reports. Each figure is the time from the
// isolation of the partition's leader to the first record that client
// appended on the new leader.
var blackholeClients = []blackholeClient{
	{"franz-go-defaults", franzGoClient()},
	{"franz-go-request-timeout", franzGoClient(kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))},
	{"franz-go-lowered", franzGoClient(kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second),
		kgo.DialTimeout(time.Second), kgo.MetadataMinAge(250*time.Millisecond))},
	{"kcat-defaults", kcatClient()},
	{"kcat-request-timeout", kcatClient("-X", "request.timeout.ms=2000")},
	{"kcat-socket-timeout", kcatClient("-X", "socket.timeout.ms=2000")},
	{"kcat-message-timeout", kcatClient("-X", "message.timeout.ms=5000")},
}

// TestMeasureBlackholedLeaderClientWait measures how long a producer that
// has requests in flight to a partition leader waits once that leader is
// blackholed, before its records reach the partition's new leader: the
// client-side half of docs/operations.md. It runs only with
// TIDE_MEASURE_BLACKHOLE=all (or a comma-separated list of the names in
// blackholeClients), as root with iptables, and takes minutes: the clients'
// default timeouts are tens of seconds. Each client is measured
// TIDE_MEASURE_REPEAT times (3).
func TestMeasureBlackholedLeaderClientWait(t *testing.T) {
	which := os.Getenv("TIDE_MEASURE_BLACKHOLE")
	if which == "" {
		t.Skip("a measurement: set TIDE_MEASURE_BLACKHOLE=all (or some of franz-go-defaults,kcat-defaults,...)")
	}
	holes := newBlackholes(t)
	c := newPreparedProcessCluster(t, 3, holes.prepare)
	t.Cleanup(holes.healAll)
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("every broker unfenced", 30*time.Second, all, allUnfenced(3))
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3]}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, partitions = "measure", 3
	createReplicatedTopic(ctx, t, admin, topic, partitions, "2")
	repeat := 3
	if n, err := strconv.Atoi(os.Getenv("TIDE_MEASURE_REPEAT")); err == nil && n > 0 {
		repeat = n
	}
	var results []string
	for _, client := range blackholeClients {
		if which != "all" && !slices.Contains(strings.Split(which, ","), client.name) {
			continue
		}
		var waits []string
		for range repeat {
			waits = append(waits, measureClientWait(t, c, holes, client, topic, partitions).Round(100*time.Millisecond).String())
		}
		results = append(results, fmt.Sprintf("%-22s %s", client.name, strings.Join(waits, " ")))
	}
	t.Logf("time from the isolation to the client's first record on the new leader:\n%s", strings.Join(results, "\n"))
}

// measureClientWait runs one client against a healthy cluster, blackholes
// the leader of the partition it writes to, and returns how long after the
// isolation its first record was appended on the new leader.
func measureClientWait(t *testing.T, c *processCluster, holes *blackholes, client blackholeClient, topic string, partitions int32) time.Duration {
	t.Helper()
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("every broker unfenced", 30*time.Second, all, allUnfenced(3))
	views := make([]partitionView, partitions)
	for p := range partitions {
		views[p], _ = c.waitPartitionView("a full ISR", 1, topic, p, 30*time.Second, func(v partitionView) bool { return v.leader > 0 && len(v.isr) == 3 })
	}
	victim, partition := pickVictim(t, c, views)
	survivor := all[0]
	if survivor == victim {
		survivor = all[1]
	}
	var since clock
	started := time.Now()
	stop := client.start(t, []string{c.kafka[1], c.kafka[2], c.kafka[3]}, topic, partition, &since)
	defer stop()
	waitLogEndGrows(t, c, victim, topic, partition, 100, 20*time.Second)
	// A client's first metadata loads come in its first seconds (kgo
	// reloads MetadataMinAge, 5 s, after the first); one of those after
	// the isolation would drop the fenced broker and end the wait early.
	// Measure a client that has been producing for a while.
	time.Sleep(time.Until(started.Add(settleTime)))

	holes.isolate(c, victim)
	isolated := time.Now()
	since.set(isolated)
	defer holes.heal(victim)
	moved, movedAfter := c.waitPartitionView("a new leader", survivor, topic, partition, 20*time.Second, func(v partitionView) bool {
		return v.leader > 0 && v.leader != victim && v.leaderEpoch > views[partition].leaderEpoch
	})
	wait := waitLogEndGrows(t, c, moved.leader, topic, partition, 1, 150*time.Second) + movedAfter
	t.Logf("%s: broker %d blackholed; broker %d leads %s-%d %s later; the client's first record reached it %s after the isolation",
		client.name, victim, moved.leader, topic, partition, movedAfter.Round(time.Millisecond), wait.Round(time.Millisecond))
	// How long the healed broker takes to be unfenced again depends on
	// how long it was isolated: its connections' TCP retransmissions back
	// off while every packet is dropped.
	isolation := time.Since(isolated)
	holes.heal(victim)
	back := c.waitFor(fmt.Sprintf("broker %d unfenced after the heal", victim), 150*time.Second, []metadata.BrokerID{survivor}, brokerFenced(victim, false))
	t.Logf("%s: healed after %s of isolation; broker %d unfenced %s after the heal", client.name, isolation.Round(time.Millisecond), victim, back.Round(time.Millisecond))
	return wait
}

// waitLogEndGrows waits until broker id's log end offset of the partition
// has grown by n, and says how long that took.
func waitLogEndGrows(t *testing.T, c *processCluster, id metadata.BrokerID, topic string, partition int32, n int64, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	first, err := c.partitionStatus(id, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	for time.Since(began) < timeout {
		if now, err := c.partitionStatus(id, topic, partition); err == nil && now.LogEndOffset >= first.LogEndOffset+n {
			return time.Since(began)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("broker %d's log end of %s-%d did not grow by %d in %s", id, topic, partition, n, timeout)
	return 0
}

// franzGoClient produces with kgo (idempotent, acks=all, its defaults but
// for options) and logs when a connection to a broker closes, which is
// how kgo gives up on a request: a read past its deadline closes the
// connection and fails every request on it.
func franzGoClient(options ...kgo.Opt) func(*testing.T, []string, string, int32, *clock) func() {
	return func(t *testing.T, seeds []string, topic string, partition int32, since *clock) func() {
		options := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(disconnectLogger{t, since}),
			kgo.WithLogger(kgoLogger{t, since})}, options...)
		client, err := kgo.NewClient(options...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				client.Produce(ctx, &kgo.Record{Partition: partition, Value: []byte("measure")}, func(_ *kgo.Record, err error) {
					if err != nil && ctx.Err() == nil {
						t.Logf("franz-go %s: a record failed: %v", since.since(), err)
					}
				})
				time.Sleep(2 * time.Millisecond)
			}
		}()
		return func() {
			cancel()
			<-done
			flush, cancelFlush := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancelFlush()
			client.Flush(flush)
			client.Close()
		}
	}
}

// kgoLogger logs kgo's info and warnings (a metadata update and why, a
// produce request that failed) with the time since the isolation.
type kgoLogger struct {
	t     *testing.T
	since *clock
}

// TIDE_MEASURE_KGO_DEBUG=1 adds kgo's debug lines but those of every
// request written and read.
func (l kgoLogger) Level() kgo.LogLevel {
	if os.Getenv("TIDE_MEASURE_KGO_DEBUG") == "1" {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}

func (l kgoLogger) Log(level kgo.LogLevel, message string, keyvals ...any) {
	if level == kgo.LogLevelDebug && (strings.HasPrefix(message, "wrote ") || strings.HasPrefix(message, "read ") || message == "produced") {
		return
	}
	l.t.Logf("franz-go %s: %s: %s %v", l.since.since(), level, message, keyvals)
}

type disconnectLogger struct {
	t     *testing.T
	since *clock
}

func (l disconnectLogger) OnBrokerDisconnect(meta kgo.BrokerMetadata, _ net.Conn) {
	l.t.Logf("franz-go %s: connection to broker %d closed", l.since.since(), meta.NodeID)
}

// kcatClient produces with kcat (librdkafka), idempotent with acks=all,
// fed a line every 2 ms; librdkafka's own log lines (request timeouts,
// disconnects) are logged with the time since the isolation.
func kcatClient(settings ...string) func(*testing.T, []string, string, int32, *clock) func() {
	return func(t *testing.T, seeds []string, topic string, partition int32, since *clock) func() {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat is not installed")
		}
		args := append([]string{"-P", "-b", strings.Join(seeds, ","), "-t", topic, "-p", fmt.Sprint(partition),
			"-X", "acks=all", "-X", "enable.idempotence=true"}, settings...)
		cmd := exec.Command(kcat, args...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logged := make(chan struct{})
		go func() {
			defer close(logged)
			lines := bufio.NewScanner(stderr)
			for lines.Scan() {
				t.Logf("kcat %s: %s", since.since(), lines.Text())
			}
		}()
		stopFeeding := make(chan struct{})
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			for {
				select {
				case <-stopFeeding:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if _, err := io.WriteString(stdin, "measure\n"); err != nil {
					return
				}
			}
		}()
		return func() {
			close(stopFeeding)
			<-fed
			stdin.Close()
			exited := make(chan error, 1)
			go func() { <-logged; exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Logf("kcat: %v", err)
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Logf("kcat did not exit within 60 s of its input's end: killed")
				<-exited
			}
		}
	}
}
