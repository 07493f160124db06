package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// checkGroupAndFetcherLag, from TestMetricsFollowTheCluster: with 100
// records in watched-0, a group that committed 40 shows, on the broker
// that coordinates it and only there, committed offset 40 and lag 60 (its
// replica's high watermark 100 less 40), the leader alone exports the
// partition's current offset 100; and each follower of watched-0
// exports its fetcher lag, 0 once caught up, and the largest of them.
func checkGroupAndFetcherLag(t *testing.T, client *kgo.Client, addresses map[metadata.BrokerID]string, leader metadata.BrokerID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 50 {
		if err := client.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "more %d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "watched", Partition: 0, At: 40, LeaderEpoch: -1})
	if err := kadm.NewClient(client).CommitAllOffsets(ctx, "watchers", offsets); err != nil {
		t.Fatalf("commit 40 for watchers: %v", err)
	}
	group := map[string]string{"consumergroup": "watchers", "topic": "watched", "partition": "0"}
	summed := func(family string, labels map[string]string) func() float64 {
		return func() float64 {
			total := 0.0
			for _, address := range addresses {
				value, _ := metricValue(scrapeMetrics(t, address), family, labels)
				total += value
			}
			return total
		}
	}
	waitForValue(t, "watchers' lag summed over the brokers", summed("kafka_consumergroup_lag", group), 60)
	waitForValue(t, "watchers' committed offset summed over the brokers", summed("kafka_consumergroup_current_offset", group), 40)
	waitForValue(t, "watchers' lag on watched summed over the brokers",
		summed("kafka_consumergroup_lag_sum", map[string]string{"consumergroup": "watchers", "topic": "watched"}), 60)
	// The leader alone exports the partition's end offset, for a join
	// with the committed offset from whichever broker coordinates.
	waitForValue(t, "watched-0's current offset summed over the brokers",
		summed("kafka_topic_partition_current_offset", map[string]string{"topic": "watched", "partition": "0"}), 100)
	exporting := 0
	for _, address := range addresses {
		if _, ok := metricValue(scrapeMetrics(t, address), "kafka_consumergroup_lag", group); ok {
			exporting++
		}
	}
	if exporting != 1 {
		t.Fatalf("%d brokers export watchers' lag; want its coordinator only", exporting)
	}
	for id, address := range addresses {
		families := scrapeMetrics(t, address)
		if _, ok := metricValue(families, "kafka_server_replicafetchermanager_maxlag", map[string]string{"clientid": "Replica"}); !ok {
			t.Errorf("broker %d exports no fetcher max lag", id)
		}
		lag, ok := metricValue(families, "kafka_server_fetcherlagmetrics_consumerlag", map[string]string{"topic": "watched", "partition": "0"})
		switch {
		case id == leader && ok:
			t.Errorf("the leader, broker %d, exports a fetcher lag for watched-0", id)
		case id != leader && (!ok || lag < 0 || lag > 100):
			t.Errorf("follower %d: fetcher lag of watched-0 %v (found %t), want 0 to 100", id, lag, ok)
		}
	}
}
