package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tide bench produce against a served node: a throughput run of 2000
// records and a latency run of 200 count exactly what they produced, and
// the topic they created holds 2200 distinct 1 KiB values. Nothing here
// asserts a rate or a latency: a test machine's speed is not a result.
func TestBenchProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	kafka := serveNode(t)
	bootstrap := "--bootstrap=" + kafka
	throughput := runBench(t, "--mode", "throughput", "--records", "2000", "--duration", "0", "--warmup", "0", bootstrap)
	if !throughput.TopicCreated || throughput.Partitions != 3 || throughput.Latency != nil || throughput.Throughput == nil {
		t.Fatalf("throughput run: %+v", throughput)
	}
	if got := *throughput.Throughput; got.Records != 2000 || got.ValueBytes != 2000*1024 || got.Errors != 0 ||
		got.ElapsedSeconds <= 0 || got.RecordsPerSecond <= 0 || got.MiBPerSecond <= 0 {
		t.Fatalf("throughput: %+v", got)
	}
	// Another seed, so the second run's values differ from the first's.
	latency := runBench(t, "--mode", "latency", "--records", "200", "--duration", "0", "--warmup", "0", "--seed", "2", bootstrap)
	if latency.TopicCreated || latency.Throughput != nil || latency.Latency == nil {
		t.Fatalf("latency run: %+v", latency)
	}
	if got := *latency.Latency; got.Count != 200 || got.P50Ms <= 0 || got.P50Ms > got.P90Ms || got.P90Ms > got.P99Ms ||
		got.P99Ms > got.P999Ms || got.P999Ms > got.MaxMs || got.MeanMs <= 0 || got.MeanMs > got.MaxMs {
		t.Fatalf("latency: %+v", got)
	}
	checkBenchValues(t, kafka, "bench", 2200, 1024)
	checkBenchConsume(t, bootstrap, 2200, 2200*1024)

	// Both phases, keys, acks=leader (not idempotent) and the table.
	table := mustRun(t, "", "not idempotent", "bench", "produce", "--topic", "keyed", "--partitions", "1", "--acks", "leader",
		"--keys", "--size", "100", "--records", "50", "--warmup", "0", bootstrap)
	for _, want := range []string{"topic keyed (partitions 1, created), acks=leader", "throughput  records", "\n            50  ",
		"latency  count", "\n         50  "} {
		if !strings.Contains(table, want) {
			t.Fatalf("the table has no %q:\n%s", want, table)
		}
	}
	checkBenchInterrupted(t, bootstrap)
	mustFail(t, 1, "bench produce: topic bad/name: INVALID_TOPIC_EXCEPTION", "bench", "produce", "--topic", "bad/name", bootstrap)
}

// An interruption ends a run early with its figures printed and exit 0:
// what was sent before it is still waited for and counted.
func checkBenchInterrupted(t *testing.T, bootstrap string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	root := newRootCommand()
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"bench", "produce", "--topic", "interrupted", "--duration", "1h", "--warmup", "0", "--json", bootstrap})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("an interrupted bench produce: %v", err)
	}
	var report benchReport
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("an interrupted bench produce printed %q: %v", stdout.String(), err)
	}
	if !report.Interrupted || report.Throughput == nil || report.Throughput.Records == 0 || report.Throughput.Errors != 0 || report.Latency != nil {
		t.Fatalf("an interrupted bench produce: %s", stdout.String())
	}
}

func runBench(t *testing.T, args ...string) benchReport {
	t.Helper()
	out := mustRun(t, "", "", append([]string{"bench", "produce", "--json"}, args...)...)
	var report benchReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("bench produce --json printed more or other than one JSON object (%v):\n%s", err, out)
	}
	return report
}

// checkBenchValues reads the whole topic back: count records, each with a
// value of size bytes, no two alike and none with a key.
func checkBenchValues(t *testing.T, kafka, topic string, count, size int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < count && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err(); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		for _, record := range fetches.Records() {
			if len(record.Value) != size || record.Key != nil || seen[string(record.Value)] {
				t.Fatalf("record %d at %d: value of %d bytes, key %q, seen before: %t",
					record.Partition, record.Offset, len(record.Value), record.Key, seen[string(record.Value)])
			}
			seen[string(record.Value)] = true
		}
	}
	if len(seen) != count {
		t.Fatalf("read %d records back from %s, want %d", len(seen), topic, count)
	}
}

// A bad command line exits 2 before any connection is tried.
func TestBenchProduceFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"extra"}, {"--mode", "fast"}, {"--acks", "2"}, {"--acks", "leader", "--idempotent"}, {"--acks", "1", "--idempotent"}, {"--size", "0"},
		{"--size", "600000"}, {"--records", "0", "--duration", "0"}, {"--records", "-1"}, {"--warmup", "-1s"},
		{"--partitions", "0"}, {"--replication-factor", "0"}, {"--max-buffered-records", "0"}, {"--size", "big"},
		{"--timeout", "0s"},
	} {
		args = append([]string{"bench", "produce", "--bootstrap", "127.0.0.1:1"}, args...)
		if _, _, err := runWithInput("", args...); err == nil || exitCode(err) != 2 {
			t.Errorf("tide %v: err %v, want a usage error (2)", args, err)
		}
	}
}

// The percentile is checked against its definition on random samples: the
// smallest sample with at least that share of all samples at or below it.
func TestPercentileIsNearestRank(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		samples := make([]time.Duration, 1+random.IntN(400))
		for i := range samples {
			samples[i] = time.Duration(random.IntN(100))
		}
		slices.Sort(samples)
		for _, perMille := range []int{1, 500, 900, 990, 999, 1000} {
			want := samples[len(samples)-1]
			for _, candidate := range samples {
				atOrBelow := 0
				for _, sample := range samples {
					if sample <= candidate {
						atOrBelow++
					}
				}
				if atOrBelow*1000 >= perMille*len(samples) {
					want = candidate
					break
				}
			}
			if got := percentile(samples, perMille); got != want {
				t.Fatalf("percentile %d‰ of %d samples: %d, want %d", perMille, len(samples), got, want)
			}
		}
	}
}

// BenchmarkBenchValues is the client's own cost per record: a value of
// 1 KiB cut from the random pool, which must stay far below the broker's cost per
// record for tide bench produce to measure the broker.
func BenchmarkBenchValues(b *testing.B) {
	values := newValueSource(1, 1024, false)
	b.SetBytes(1024)
	for b.Loop() {
		_ = values.next()
	}
}

// BenchmarkBenchProduceServed is the throughput phase against a node served
// in this process: b.N records of 1 KiB, acks=all, idempotent.
func BenchmarkBenchProduceServed(b *testing.B) {
	kafka := serveNode(b)
	options := benchOptions{benchLoad: benchLoad{clientOptions: clientOptions{bootstrap: kafka, timeout: 10 * time.Second},
		topic: "bench", partitions: 3, replicationFactor: -1, acks: "all", size: 1024, producers: 1}, idempotent: true, maxBufferedRecords: 100_000}
	ctx := context.Background()
	producers, metadata, err := options.connectProducers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer producers.close()
	if _, _, err := options.ensureTopic(ctx, producers[0].client, metadata); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1024)
	b.ResetTimer()
	if _, err := runThroughput(ctx, producers, phaseBound{records: int64(b.N)}, nil, "throughput"); err != nil {
		b.Fatal(err)
	}
}

// tide bench consume reads the whole topic back and counts it.
func checkBenchConsume(t *testing.T, bootstrap string, records, valueBytes int64) {
	t.Helper()
	out := mustRun(t, "", "", "bench", "consume", "--json", bootstrap)
	var report consumeReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("bench consume --json: %v\n%s", err, out)
	}
	if report.Topic != "bench" || report.Partitions != 3 || report.Records != records || report.ValueBytes != valueBytes ||
		report.RecordsPerSecond <= 0 || report.MiBPerSecond <= 0 || report.Interrupted {
		t.Fatalf("bench consume: %+v, want %d records of %d value bytes", report, records, valueBytes)
	}
	mustFail(t, 1, "bench consume: topic missing: UNKNOWN_TOPIC_OR_PARTITION", "bench", "consume", "--topic", "missing", bootstrap)
}
