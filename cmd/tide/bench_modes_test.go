package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A bad command line of any mode exits 2 before any connection is tried
// (port 1 would refuse one) and before any cluster is started (each case
// fails validation, so compare, which needs no --bootstrap, starts none).
func TestBenchModesFlagErrors(t *testing.T) {
	shared := [][]string{
		{"extra"}, {"--acks", "2"}, {"--size", "0"}, {"--size", "600000"}, {"--records", "0", "--duration", "0"},
		{"--records", "-1"}, {"--partitions", "0"}, {"--replication-factor", "0"}, {"--producers", "0"},
		{"--producers", "65"}, {"--consumers", "0"}, {"--records", "2", "--producers", "3"}, {"--dev", "-1"}, {"--dev", "10"},
		{"--timeout", "0s"},
	}
	modes := map[string][][]string{
		"produce": {{"--mode", "fast"}, {"--warmup", "-1s"}, {"--max-buffered-records", "0"}, {"--acks", "1", "--idempotent"}, {"--consumers", "2"}},
		"consume": {{"--producers", "2"}, {"--size", "100"}, {"--duration", "1s"}, {"--acks", "1"}},
		"e2e":     {{"--size", "7"}, {"--rate", "-1"}, {"--warmup", "-1s"}},
		"compare": {{"--size", "7"}, {"--bootstrap", "127.0.0.1:2"}, {"--rounds", "0"}, {"--rounds", "101"}, {"--dev", "0"}, {"--rate", "-1"}, {"--consume-duration", "-1s"}},
	}
	for mode, own := range modes {
		for _, args := range append(own, shared...) {
			prefix := []string{"bench", mode, "--bootstrap", "127.0.0.1:1"}
			if mode == "compare" {
				prefix = prefix[:2] // it refuses --bootstrap, and each case must fail on its own
			}
			args = append(prefix, args...)
			if _, _, err := runWithInput("", args...); err == nil || exitCode(err) != 2 {
				t.Errorf("tide %v: err %v, want a usage error (2)", args, err)
			}
		}
	}
}

// Two producers share --records exactly, in both phases, and report it.
func TestBenchProduceProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	kafka := serveNode(t)
	report := runBench(t, "--producers", "2", "--records", "101", "--duration", "0", "--warmup", "0", "--size", "64", "--bootstrap="+kafka)
	if report.Producers != 2 || report.Throughput == nil || report.Throughput.Records != 101 || report.Throughput.CPU != nil ||
		report.Latency == nil || report.Latency.Count != 101 || report.Cluster != "" {
		t.Fatalf("bench produce --producers 2 --records 101: %+v %+v %+v", report, report.Throughput, report.Latency)
	}
}

// --cpuprofile writes a profile pprof reads: a gzipped protocol buffer,
// not empty.
func TestBenchCPUProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	kafka := serveNode(t)
	path := filepath.Join(t.TempDir(), "cpu.prof")
	runBench(t, "--records", "50", "--duration", "0", "--warmup", "0", "--size", "64", "--mode", "throughput", "--cpuprofile", path, "--bootstrap="+kafka)
	profile, err := os.ReadFile(path)
	if err != nil || len(profile) < 2 || profile[0] != 0x1f || profile[1] != 0x8b {
		t.Fatalf("--cpuprofile %s: %d bytes, %v", path, len(profile), err)
	}
}

// tide bench e2e receives every record it sent; the latency counts those
// sent after the warmup, which --records bounds, and nothing else.
func TestBenchEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	kafka := serveNode(t)
	for _, args := range [][]string{
		{"--records", "300", "--duration", "0", "--rate", "3000", "--warmup", "100ms", "--producers", "2", "--consumers", "2"},
		// Again on the topic the first run filled: it starts at its end.
		{"--records", "100", "--duration", "0", "--rate", "0", "--warmup", "0", "--acks", "1", "--size", "8"},
	} {
		out := mustRun(t, "", "", append([]string{"bench", "e2e", "--json", "--bootstrap=" + kafka}, args...)...)
		var report endToEndReport
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("bench e2e --json: %v\n%s", err, out)
		}
		want := 300
		if args[1] == "100" {
			want = 100
		}
		l, a := report.Latency, report.Acknowledged
		if a.Count != want || a.P50Ms <= 0 || a.P50Ms > a.MaxMs {
			t.Fatalf("bench e2e %v: acknowledged latency: %s", args, out)
		}
		if report.Received != report.Sent || report.Sent < int64(want) || l.Count != want || report.Interrupted ||
			l.P50Ms <= 0 || l.P50Ms > l.P90Ms || l.P90Ms > l.P99Ms || l.P99Ms > l.P999Ms || l.P999Ms > l.MaxMs {
			t.Fatalf("bench e2e %v: %s", args, out)
		}
	}
	table := mustRun(t, "", "acknowledged  20", "bench", "e2e", "--records", "20", "--duration", "0", "--warmup", "0", "--bootstrap="+kafka)
	if !strings.Contains(table, "sent and acknowledged 20, received 20") {
		t.Fatalf("bench e2e's table:\n%s", table)
	}
}

// tide bench consume --dev starts a cluster, fills the topic and reads it
// all back, with up to two consumers (kgo's sticky partitioner may have
// put every record in one partition, and an empty one gets no consumer),
// and measures the process's CPU; --cpuprofile profiles the read.
func TestBenchConsumeDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster; skipped with -short")
	}
	profilePath := filepath.Join(t.TempDir(), "read.prof")
	out := mustRun(t, "", "", "bench", "consume", "--dev", "1", "--records", "500", "--duration", "0", "--consumers", "2", "--size", "100", "--json",
		"--cpuprofile", profilePath)
	var report consumeReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("bench consume --json: %v\n%s", err, out)
	}
	if report.Cluster == "" || report.Fill == nil || report.Fill.Records != 500 || report.Records != 500 || report.ValueBytes != 500*100 ||
		report.Consumers < 1 || report.Consumers > 2 || report.Partitions != 3 || report.Passes != 1 || report.CPU == nil || report.CPU.ProcessCPUSeconds <= 0 {
		t.Fatalf("bench consume --dev 1: %s", out)
	}
	// The profile of the read alone, started and stopped by consume itself.
	if profile, err := os.ReadFile(profilePath); err != nil || len(profile) < 2 || profile[0] != 0x1f || profile[1] != 0x8b {
		t.Fatalf("bench consume --cpuprofile %s: %d bytes, %v", profilePath, len(profile), err)
	}
}

// tide bench compare runs every phase on both clusters and pools one
// value per round and figure; the figures themselves are not judged. The
// consume phase reads the small topic again until --consume-duration has
// passed in reads, so it reads it more than once.
func TestBenchCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters; skipped with -short")
	}
	out := mustRun(t, "", "", "bench", "compare", "--dev", "1", "--rounds", "1", "--records", "200", "--duration", "0",
		"--warmup", "0", "--rate", "0", "--size", "64", "--consume-duration", "300ms", "--json")
	var report compareReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("bench compare --json: %v\n%s", err, out)
	}
	if report.Rounds != 1 || report.Brokers != 1 || len(report.Figures) != len(compareFigureNames) {
		t.Fatalf("bench compare: %s", out)
	}
	for _, figure := range report.Figures {
		if len(figure.Tide) != 1 || len(figure.Kfake) != 1 || figure.TideMedian <= 0 || figure.KfakeMedian <= 0 {
			t.Fatalf("bench compare, figure %s: %+v", figure.Name, figure)
		}
		least := map[string]float64{"consume passes": 2, "consume seconds read": 0.3}[figure.Name]
		if figure.TideMedian < least || figure.KfakeMedian < least {
			t.Fatalf("bench compare --consume-duration 300ms, figure %s: %+v, want at least %g", figure.Name, figure, least)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		values []float64
		want   float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.values); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.values, got, c.want)
		}
	}
}

// The progress line rewrites itself on its writer once a second, counting
// what it is given, and clears itself at the end; a nil one is silent.
func TestBenchProgressLine(t *testing.T) {
	var silent *benchProgress
	silent.begin("nothing", func() int64 { return 0 })
	silent.end()
	var out bytes.Buffer
	progress := &benchProgress{out: &out}
	progress.begin("throughput", func() int64 { return 1234 })
	time.Sleep(benchProgressInterval + benchProgressInterval/4)
	progress.end()
	line := out.String()
	if !strings.HasPrefix(line, "\r\x1b[Kthroughput: 1s, 1234 records, ") || !strings.HasSuffix(line, "records/s\r\x1b[K") {
		t.Fatalf("progress line %q", line)
	}
}
