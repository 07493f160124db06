package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// TestMetricsFollowTheCluster scrapes /metrics of three tide serve
// processes while acks=all records flow into a one-partition topic of
// replication factor 3: the request, fsync and partition families are
// there with plausible values, one node is the active controller, and the
// leader's under-replicated count goes to 1 when a follower is killed and
// back to 0 once it returns (issue 16's must-hold); a group's committed
// offset and lag, and the followers' fetcher lag, are there too.
func TestMetricsFollowTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	metricsAddresses := map[metadata.BrokerID]string{}
	c := newPreparedProcessCluster(t, 3, func(c *processCluster, id metadata.BrokerID, cmd *exec.Cmd) {
		if metricsAddresses[id] == "" {
			metricsAddresses[id] = freePort(t)
		}
		cmd.Args = append(cmd.Args, "--metrics-listen", metricsAddresses[id])
	})
	c.waitFor("every broker unfenced", 20*time.Second, c.running(), allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answer, err := AdminRequest(ctx, c.controllers, quorum.Request{CreateTopic: &controller.CreateTopicRequest{Name: "watched", Partitions: 1, ReplicationFactor: 3}})
	if err != nil || answer.ErrorCode != 0 {
		t.Fatalf("creating watched: %v, code %s", err, controller.CodeName(answer.ErrorCode))
	}
	c.waitFor("the topic everywhere", 10*time.Second, c.running(), hasTopics("watched"))
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[1], c.kafka[2], c.kafka[3]), kgo.DefaultProduceTopic("watched"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 50 {
		if err := client.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "record %d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	leader := metricsLeaderOf(t, metricsAddresses, "watched")
	scraped := scrapeMetrics(t, metricsAddresses[leader])
	for _, check := range []struct {
		family string
		labels map[string]string
		least  float64
	}{
		{"kafka_network_requestmetrics_requests_total", map[string]string{"request": "Produce"}, 50},
		{"kafka_network_requestmetrics_request_bytes_total", map[string]string{"request": "Produce"}, 50 * 8},
		{"kafka_network_requestmetrics_total_time_seconds", map[string]string{"request": "Produce"}, 50},
		{"kafka_log_flush_time_seconds", nil, 1},
		{"kafka_cluster_partition_high_watermark", map[string]string{"topic": "watched", "partition": "0"}, 50},
		{"kafka_log_log_log_end_offset", map[string]string{"topic": "watched", "partition": "0"}, 50},
		{"kafka_cluster_partition_in_sync_replicas_count", map[string]string{"topic": "watched", "partition": "0"}, 3},
		{"kafka_server_replicamanager_leader_count", nil, 1},
		{"go_goroutines", nil, 1},
	} {
		if got, ok := metricValue(scraped, check.family, check.labels); !ok || got < check.least {
			t.Errorf("%s%v on the leader: %v (found %v), want at least %v", check.family, check.labels, got, ok, check.least)
		}
	}
	checkOneActiveController(t, metricsAddresses)
	follower := metadata.BrokerID(1 + int(leader)%3)
	underReplicated := func() float64 {
		value, _ := metricValue(scrapeMetrics(t, metricsAddresses[leader]), "kafka_server_replicamanager_under_replicated_partitions", nil)
		return value
	}
	if got := underReplicated(); got != 0 {
		t.Fatalf("under-replicated partitions %v with every broker up", got)
	}
	c.kill(follower)
	waitForValue(t, "under-replicated partitions 1 after the follower was killed", underReplicated, 1)
	c.start(follower)
	waitForValue(t, "under-replicated partitions 0 after the follower returned", underReplicated, 0)
	checkEventsLogged(t, c, follower)
	checkEventCounts(t, metricsAddresses, follower)
	// Last: __consumer_offsets, created for the group, adds partitions the
	// leader may lead, which the counts above do not expect.
	checkGroupAndFetcherLag(t, client, metricsAddresses, leader)
}

// checkEventCounts: the active controllers counted the fencing and the ISR
// shrink and expansion they committed, all after the follower was killed,
// so on the nodes that kept running.
func checkEventCounts(t *testing.T, addresses map[metadata.BrokerID]string, follower metadata.BrokerID) {
	t.Helper()
	counts := map[string]float64{}
	for id, address := range addresses {
		if id == follower {
			continue // restarted: its counters began again
		}
		families := scrapeMetrics(t, address)
		for _, kind := range []string{"broker-fenced", "isr-shrink", "isr-expand"} {
			value, _ := metricValue(families, "kafka_controller_kafkacontroller_events_total", map[string]string{"event": kind})
			counts[kind] += value
		}
	}
	for kind, count := range counts {
		if count < 1 {
			t.Errorf("events_total{event=%q} summed over the running nodes: %v, want at least 1 (%v)", kind, count, counts)
		}
	}
}

// checkEventsLogged: the nodes' logs tell at info what happened, with
// reasons (issue 16, item 2): the topic created, the killed follower
// fenced and out of the ISR, then back in; and no line per request.
func checkEventsLogged(t *testing.T, c *processCluster, follower metadata.BrokerID) {
	t.Helper()
	var logs strings.Builder
	for id := range c.dirs {
		text, err := os.ReadFile(c.dirs[id] + ".log")
		if err != nil {
			t.Fatal(err)
		}
		logs.Write(text)
	}
	all := logs.String()
	// Each line: the message, then the node, then the event's attributes.
	for _, want := range []string{
		`msg="topic created" node=\d+ topic=watched`,
		fmt.Sprintf(`msg="broker fenced" node=\d+ broker=%d reason="it missed its session`, follower),
		fmt.Sprintf(`msg="ISR shrank" node=\d+ partition=watched-0 isr=("[^"]*"|\S+) removed=\[%d\] reason="broker %d fenced"`, follower, follower),
		fmt.Sprintf(`msg="ISR expanded: a follower caught up" node=\d+ partition=watched-0 isr=.* added=\[%d\]`, follower),
		`msg="this node is the active controller"`,
	} {
		if !regexp.MustCompile(want).MatchString(all) {
			t.Errorf("the logs lack %q:\n%s", want, all)
		}
	}
	// 50 produce requests and hundreds of fetches: none is a line at info.
	if lines := strings.Count(all, "\n"); lines > 150 {
		t.Errorf("%d log lines at info for a short run: a line per request?\n%s", lines, all)
	}
}

// metricsLeaderOf finds the broker whose metrics say it leads partition 0.
func metricsLeaderOf(t *testing.T, addresses map[metadata.BrokerID]string, topic string) metadata.BrokerID {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for id, address := range addresses {
			if _, ok := metricValue(scrapeMetrics(t, address), "kafka_cluster_partition_under_replicated", map[string]string{"topic": topic, "partition": "0"}); ok {
				return id
			}
		}
	}
	t.Fatalf("no broker's metrics show it leading %s-0", topic)
	return metadata.NoBroker
}

func checkOneActiveController(t *testing.T, addresses map[metadata.BrokerID]string) {
	t.Helper()
	active := 0.0
	for _, address := range addresses {
		value, ok := metricValue(scrapeMetrics(t, address), "kafka_controller_kafkacontroller_active_controller_count", nil)
		if !ok {
			t.Fatalf("%s has no active controller gauge (every node is a voter)", address)
		}
		active += value
	}
	if active != 1 {
		t.Fatalf("active controllers summed over the nodes: %v, want 1", active)
	}
}

func waitForValue(t *testing.T, what string, read func() float64, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = read(); got == want {
			return
		}
	}
	t.Fatalf("%s: still %v after 20 s", what, got)
}

// scrapeMetrics reads one node's /metrics in the text format.
func scrapeMetrics(t *testing.T, address string) map[string]*dto.MetricFamily {
	t.Helper()
	response, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", address, err)
	}
	defer response.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(response.Body)
	if err != nil {
		t.Fatalf("parse the metrics of %s: %v", address, err)
	}
	return families
}

// metricValue is a family's sample whose labels include the given ones: a
// gauge's or counter's value, a histogram's count.
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	family, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, metric := range family.Metric {
		matched := 0
		for _, pair := range metric.Label {
			if want, ok := labels[pair.GetName()]; ok && strings.EqualFold(want, pair.GetValue()) {
				matched++
			}
		}
		if matched != len(labels) {
			continue
		}
		switch {
		case metric.Gauge != nil:
			return metric.Gauge.GetValue(), true
		case metric.Counter != nil:
			return metric.Counter.GetValue(), true
		case metric.Histogram != nil:
			return float64(metric.Histogram.GetSampleCount()), true
		case metric.Untyped != nil:
			return metric.Untyped.GetValue(), true
		}
	}
	return 0, false
}
