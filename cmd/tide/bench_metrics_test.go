package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// fakeMetrics serves a metrics page whose CPU counter grows by 1.5 s at
// each scrape, among other lines that look like it.
func fakeMetrics(t *testing.T) string {
	t.Helper()
	var scrapes atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		seconds := 10 + 1.5*float64(scrapes.Add(1))
		fmt.Fprintf(w, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"+
			"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total_other 99\nprocess_cpu_seconds_total %g\n"+
			"process_open_fds 12\n", seconds)
	}))
	t.Cleanup(server.Close)
	return server.URL + "/metrics"
}

func TestScrapeProcessCPU(t *testing.T) {
	endpoint := fakeMetrics(t)
	if got, err := scrapeProcessCPU(context.Background(), []string{endpoint, endpoint}); err != nil || got != 11.5+13 {
		t.Fatalf("two scrapes: %g, %v; want 24.5", got, err)
	}
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "go_goroutines 3") }))
	defer empty.Close()
	if _, err := scrapeProcessCPU(context.Background(), []string{empty.URL}); err == nil {
		t.Fatal("a page without the counter was read as one")
	}
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	if _, err := scrapeProcessCPU(context.Background(), []string{missing.URL}); err == nil {
		t.Fatal("a 404 was read as a metrics page")
	}
}

// The throughput phase reads the brokers' CPU before and after: here a
// fake endpoint that counts 1.5 s per scrape.
func TestBenchProduceBrokerMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	kafka := serveNode(t)
	report := runBench(t, "--mode", "throughput", "--records", "100", "--duration", "0", "--warmup", "0", "--size", "64",
		"--broker-metrics", fakeMetrics(t), "--bootstrap="+kafka)
	cpu := report.Throughput.BrokerCPU
	if cpu == nil || cpu.Endpoints != 1 || cpu.BrokerCPUSeconds != 1.5 || cpu.BrokerCPUSecondsPerGiB <= 0 {
		t.Fatalf("broker CPU: %+v", cpu)
	}
	mustFail(t, 2, "--broker-metrics", "bench", "produce", "--broker-metrics", "127.0.0.1:9644", "--bootstrap="+kafka)
}
