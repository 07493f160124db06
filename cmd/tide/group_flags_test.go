package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The consumer group settings come from flags or Kafka's property names,
// and reach the server's configuration; a partition count of 0, or a
// KIP-848 heartbeat interval beyond the session timeout, is a usage error.
func TestServeGroupSettings(t *testing.T) {
	dir := t.TempDir()
	properties := filepath.Join(dir, "server.properties")
	text := "offsets.topic.num.partitions=7\ngroup.initial.rebalance.delay.ms=250\ngroup.consumer.heartbeat.interval.ms=300\n"
	if err := os.WriteFile(properties, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--id", "1", "--controllers", "1@127.0.0.1:9093", "--kafka-listen", "127.0.0.1:9092", "--data-dir", dir}
	command := newServeCommand()
	command.SetErr(io.Discard)
	if err := command.Flags().Parse(append(base, "--config", properties, "--offsets-topic-replication-factor", "2", "--group-consumer-session-timeout", "7s")); err != nil {
		t.Fatal(err)
	}
	if err := applyProperties(command.Flags(), properties); err != nil {
		t.Fatal(err)
	}
	config, err := reread(command.Flags(), serveOptions{}).serverConfig(command)
	if err != nil {
		t.Fatal(err)
	}
	if config.OffsetsTopicPartitions != 7 || config.OffsetsTopicReplicationFactor != 2 || config.Groups == nil ||
		config.Groups.InitialRebalanceDelayMs != 250 || config.Groups.ConsumerHeartbeatIntervalMs != 300 || config.Groups.ConsumerSessionTimeoutMs != 7000 {
		t.Fatalf("offsets topic %d x %d, groups %+v", config.OffsetsTopicPartitions, config.OffsetsTopicReplicationFactor, config.Groups)
	}
	for _, bad := range [][]string{{"--offsets-topic-partitions", "0"}, {"--group-consumer-heartbeat-interval", "50s"}} {
		command = newServeCommand()
		if err := command.Flags().Parse(append(base, bad...)); err != nil {
			t.Fatal(err)
		}
		if _, err := reread(command.Flags(), serveOptions{}).serverConfig(command); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
