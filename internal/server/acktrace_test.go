package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// BenchmarkAckedProduceLatency is the tool for the question "where does one
// acknowledged write's time go" (issue 15, docs/benchmarks.md): three
// brokers in this process on real TCP and real files, a topic of one
// partition with three replicas, and a client writing one record at a time
// with acks=all, each waiting for its answer. The runtime's trace
// (acktrace.go) marks every step of each write; the benchmark reports the
// median over the writes of when each step happened after the leader read
// the request, in microseconds, for the follower the high watermark waited
// for (the later of the two), and logs the breakdown as a table.
//
//	go test ./internal/server/ -run XXX -bench AckedProduceLatency -benchtime 1000x
func BenchmarkAckedProduceLatency(b *testing.B) {
	seed := startThreeInProcess(b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("latency"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	createReplicatedTopic(ctx, b, client, "latency", 1, "2")
	value := make([]byte, 1024)
	for range 200 { // warm up: connections, the ISR, the producer id
		if err := client.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	recorder := &ackRecorder{}
	tracer := ackTracer(recorder.record)
	ackTrace.Store(&tracer)
	defer ackTrace.Store(nil)
	var writes []ackWrite
	b.ResetTimer()
	for range b.N {
		recorder.reset()
		began := time.Now()
		if err := client.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		total := time.Since(began)
		if write, ok := recorder.write(total); ok {
			writes = append(writes, write)
		}
	}
	b.StopTimer()
	reportAckBreakdown(b, writes)
}

// startThreeInProcess runs three nodes (each a voter and a broker, topics
// of three replicas by default) in this process, as tide dev does, and
// returns the first one's Kafka address.
func startThreeInProcess(b testing.TB) string {
	b.Helper()
	const size = 3
	listeners := make([]net.Listener, 2*size)
	for i := range listeners {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		listeners[i] = l
	}
	voters, kafka := map[metadata.BrokerID]string{}, map[metadata.BrokerID]string{}
	for i := range size {
		voters[metadata.BrokerID(i+1)] = listeners[i].Addr().String()
		kafka[metadata.BrokerID(i+1)] = listeners[size+i].Addr().String()
	}
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, size)
	for i := range size {
		id := metadata.BrokerID(i + 1)
		config := Config{ID: id, Controllers: voters, Listen: voters[id], ControllerListener: listeners[i],
			KafkaListen: kafka[id], KafkaListener: listeners[size+i], KafkaListeners: kafka,
			DataDir: filepath.Join(dir, fmt.Sprintf("node-%d", id)), SessionTimeout: 3 * time.Second,
			BrokerHeartbeat: 250 * time.Millisecond, DefaultReplicationFactor: size, Logger: slog.New(slog.DiscardHandler)}
		node, err := New(config)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		go func() { stopped <- node.Run(ctx) }()
	}
	b.Cleanup(func() {
		cancel()
		for range size {
			select {
			case err := <-stopped:
				if err != nil {
					b.Errorf("run: %v", err)
				}
			case <-time.After(20 * time.Second):
				b.Error("a node did not stop")
				return
			}
		}
	})
	for _, address := range voters {
		waitUnfencedOf(b, address, size)
	}
	return kafka[1]
}

// waitUnfencedOf waits until the node at controller sees brokers unfenced
// brokers, itself among them.
func waitUnfencedOf(t testing.TB, controller string, brokers int) {
	t.Helper()
	for began := time.Now(); time.Since(began) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		client, err := Dial(ctx, controller)
		if err == nil {
			status, err := client.Status(ctx)
			client.Close()
			unfenced := 0
			for _, broker := range status.Brokers {
				if !broker.Fenced {
					unfenced++
				}
			}
			if err == nil && status.BrokerEpoch >= 0 && !status.Fenced && unfenced == brokers {
				cancel()
				return
			}
		}
		cancel()
	}
	t.Fatalf("%d brokers were not unfenced within 20 s", brokers)
}

// ackEvent is one step the trace saw.
type ackEvent struct {
	node       metadata.BrokerID
	step       ackStep
	connection string
	at         time.Time
}

// ackRecorder keeps the steps of the write in flight.
type ackRecorder struct {
	mu     sync.Mutex
	events []ackEvent
}

func (r *ackRecorder) record(node metadata.BrokerID, step ackStep, connection string) {
	at := time.Now()
	r.mu.Lock()
	r.events = append(r.events, ackEvent{node: node, step: step, connection: connection, at: at})
	r.mu.Unlock()
}

func (r *ackRecorder) reset() {
	r.mu.Lock()
	r.events = r.events[:0]
	r.mu.Unlock()
}

// ackPoint is one line of the breakdown: a step on the leader or on the
// follower the high watermark waited for.
type ackPoint struct {
	name string
	// on says whose step it is; step which one; after is the line it must
	// come after (the first such step after it counts).
	onLeader bool
	step     ackStep
	after    int
}

// ackPoints are the lines of the breakdown in the order a write takes
// them; each names the earlier line it follows.
var ackPoints = []ackPoint{
	{"leader-request-read", true, ackRequestRead, -1},
	{"leader-appended", true, ackProduceHandled, 0},
	{"leader-pass-flush", true, ackFlush, 1},
	{"leader-sync-begin", true, ackSyncBegin, 2},
	{"leader-sync-run", true, ackSyncRun, 3},
	{"leader-sync-handled", true, ackSyncHandled, 4},
	{"leader-fetch-answered", true, ackFetchAnswered, 2},
	{"leader-fetch-answer-written", true, ackFetchAnswerWritten, 6},
	{"follower-fetch-answer-read", false, ackFetchAnswerRead, 7},
	{"follower-appended", false, ackFollowerAppended, 8},
	{"follower-sync-begin", false, ackSyncBegin, 9},
	{"follower-sync-run", false, ackSyncRun, 10},
	{"follower-sync-handled", false, ackSyncHandled, 11},
	{"follower-fetch-sent", false, ackFetchSent, 9},
	{"leader-fetch-read", true, ackFetchRead, 13},
	{"leader-fetch-handled", true, ackFetchHandled, 14},
	{"leader-produce-answered", true, ackProduceAnswered, 0},
	{"leader-produce-written", true, ackProduceWritten, 16},
}

// pointFetchRead is the index in ackPoints of the leader reading a
// follower's next fetch: the later follower's is the one the write waited
// for.
const pointFetchRead = 14

// ackWrite is one write's breakdown: when each point happened after the
// leader read the request (-1 when the trace did not see it), and the
// client's whole wait.
type ackWrite struct {
	at    []time.Duration
	total time.Duration
}

// write builds the breakdown of the write just acknowledged, for each
// follower, and keeps the follower whose fetch the leader read last.
func (r *ackRecorder) write(total time.Duration) (ackWrite, bool) {
	r.mu.Lock()
	events := slices.Clone(r.events)
	r.mu.Unlock()
	start := slices.IndexFunc(events, func(e ackEvent) bool { return e.step == ackRequestRead })
	if start < 0 {
		return ackWrite{}, false
	}
	leader := events[start].node
	var kept ackWrite
	for _, follower := range followerConnections(events, leader) {
		write := ackWrite{at: make([]time.Duration, len(ackPoints)), total: total}
		indexes := make([]int, len(ackPoints))
		for i, point := range ackPoints {
			from := start
			if point.after >= 0 {
				from = indexes[point.after]
			}
			indexes[i] = findStep(events, from, point, leader, follower)
			write.at[i] = -1
			if indexes[i] >= 0 {
				write.at[i] = events[indexes[i]].at.Sub(events[start].at)
			}
		}
		if kept.at == nil || write.at[pointFetchRead] > kept.at[pointFetchRead] {
			kept = write
		}
	}
	return kept, kept.at != nil
}

// followerConnections are the followers of leader that the write's trace
// saw, each as its node and its connection to the leader.
func followerConnections(events []ackEvent, leader metadata.BrokerID) []ackEvent {
	var followers []ackEvent
	for _, e := range events {
		if e.node != leader && e.step == ackFetchAnswerRead &&
			!slices.ContainsFunc(followers, func(f ackEvent) bool { return f.node == e.node }) {
			followers = append(followers, e)
		}
	}
	return followers
}

// findStep is the index of the first event from from on that is point's
// step on its node (and connection, for the steps on one), or -1.
func findStep(events []ackEvent, from int, point ackPoint, leader metadata.BrokerID, follower ackEvent) int {
	if from < 0 {
		return -1
	}
	for i := from; i < len(events); i++ {
		e := events[i]
		switch {
		case e.step != point.step:
		case point.onLeader && e.node != leader:
		case !point.onLeader && e.node != follower.node:
		case e.connection != "" && point.step != ackRequestRead && point.step != ackProduceWritten && e.connection != follower.connection:
		default:
			return i
		}
	}
	return -1
}

// reportAckBreakdown reports the median of each point over the writes as
// a metric (microseconds after the leader read the request) and logs the
// table, with the step's own share (from the point it follows).
func reportAckBreakdown(b *testing.B, writes []ackWrite) {
	if len(writes) == 0 {
		b.Fatal("the trace saw no write")
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d writes; median microseconds after the leader read the request\n", len(writes))
	fmt.Fprintf(&table, "%-30s %8s %8s %8s\n", "step", "at p50", "at p99", "step p50")
	for i, point := range ackPoints {
		at := pointTimes(writes, func(w ackWrite) time.Duration { return w.at[i] })
		step := pointTimes(writes, func(w ackWrite) time.Duration {
			if point.after < 0 || w.at[i] < 0 || w.at[point.after] < 0 {
				return -1
			}
			return w.at[i] - w.at[point.after]
		})
		if len(at) == 0 {
			fmt.Fprintf(&table, "%-30s %8s\n", point.name, "unseen")
			continue
		}
		b.ReportMetric(microseconds(percentile(at, 50)), point.name+"-us")
		fmt.Fprintf(&table, "%-30s %8.0f %8.0f %8.0f\n", point.name, microseconds(percentile(at, 50)),
			microseconds(percentile(at, 99)), microseconds(percentile(step, 50)))
	}
	totals := pointTimes(writes, func(w ackWrite) time.Duration { return w.total })
	b.ReportMetric(microseconds(percentile(totals, 50)), "client-p50-us")
	b.ReportMetric(microseconds(percentile(totals, 99)), "client-p99-us")
	fmt.Fprintf(&table, "%-30s %8.0f %8.0f\n", "client (send to answer)", microseconds(percentile(totals, 50)),
		microseconds(percentile(totals, 99)))
	b.Log("\n" + table.String())
}

// pointTimes are the sorted durations of one point, those seen.
func pointTimes(writes []ackWrite, of func(ackWrite) time.Duration) []time.Duration {
	var times []time.Duration
	for _, w := range writes {
		if d := of(w); d >= 0 {
			times = append(times, d)
		}
	}
	slices.Sort(times)
	return times
}

// percentile is the p-th percentile of sorted durations, -1 of none.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return -time.Microsecond
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func microseconds(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
