package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// After tide dev restarts from --dir, leadership spreads over the brokers
// again by itself (auto.leader.rebalance.enable): within the check
// interval every partition is led by its preferred replica, with no
// tide topic elect-preferred.
func TestDevRestartRebalancesLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	dir := t.TempDir()
	const interval = 2 * time.Second
	args := []string{"--kafka-port", "0", "--dir", dir, "--leader-imbalance-check-interval", interval.String()}
	run := startDev(t, args...)
	for _, topic := range []string{"orders", "payments"} {
		createVisibleTopic(t, run.bootstrap(), topic, "6", "3")
		mustRun(t, devRecords(12), "", "produce", topic, "--key-separator", ":", "--bootstrap", run.bootstrap())
	}
	if err := run.stop(); err != nil {
		t.Fatalf("tide dev did not exit cleanly: %v\n%s", err, run.stderr)
	}

	again := startDev(t, args...)
	ready := time.Now()
	var leaders string
	for deadline := ready.Add(interval + 20*time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var balanced bool
		if leaders, balanced = preferredLeadership(t, again.bootstrap(), "orders", "payments"); balanced {
			t.Logf("every partition led by its preferred replica %s after ready", time.Since(ready).Round(100*time.Millisecond))
			if err := again.stop(); err != nil {
				t.Fatalf("the restarted cluster did not exit cleanly: %v\n%s", err, again.stderr)
			}
			return
		}
	}
	t.Fatalf("leadership did not spread back over the brokers within %s of the restart:\n%s", interval+20*time.Second, leaders)
}

// preferredLeadership describes the topics' leaders and reports whether
// every partition is led by its first replica, with each of the three
// brokers leading some.
func preferredLeadership(t *testing.T, bootstrap string, topics ...string) (string, bool) {
	t.Helper()
	client := devClient(t, bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	request := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr(name)
		request.Topics = append(request.Topics, topic)
	}
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		return err.Error(), false
	}
	var out strings.Builder
	balanced, led := true, map[int32]bool{}
	for _, topic := range response.Topics {
		if topic.ErrorCode != 0 || len(topic.Partitions) != 6 {
			return fmt.Sprintf("topic %s: code %d, %d partitions", *topic.Topic, topic.ErrorCode, len(topic.Partitions)), false
		}
		for _, p := range topic.Partitions {
			fmt.Fprintf(&out, "%s-%d: leader %d, replicas %v\n", *topic.Topic, p.Partition, p.Leader, p.Replicas)
			led[p.Leader] = true
			balanced = balanced && len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
		}
	}
	return out.String(), balanced && len(led) == 3
}
