package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every limit of the Kafka listener comes from the properties file under
// Kafka's name (tide.* where Kafka has none) and reaches the Config.
func TestServeLimitsFromProperties(t *testing.T) {
	dir := t.TempDir()
	properties := filepath.Join(dir, "server.properties")
	text := "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\nlog.dirs=" + dir + "\ntide.kafka.listen=127.0.0.1:9092\n" +
		"socket.request.max.bytes=2000000\nqueued.max.request.bytes=8000000\nqueued.max.requests=50\n" +
		"max.connections=300\nmax.connections.per.ip=20\nconnections.max.idle.ms=60000\n" +
		"tide.max.in.flight.requests.per.connection=7\nfetch.max.bytes=1000000\ntide.request.body.timeout.ms=5000\n" +
		"tide.max.topics.per.request=40\ntide.max.partitions.per.request=400\ntide.max.decompressed.batch.bytes=9000000\ntide.max.waiting.fetches=99\n" +
		"max.connections.per.ip.overrides=localhost:30,127.0.0.2:0, [::1]:50\n"
	if err := os.WriteFile(properties, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	command := newServeCommand()
	if err := command.Flags().Parse([]string{"--config", properties, "--max-connections", "400"}); err != nil {
		t.Fatal(err)
	}
	if err := applyProperties(command.Flags(), properties); err != nil {
		t.Fatal(err)
	}
	config, err := reread(command.Flags(), serveOptions{}).serverConfig(command)
	if err != nil {
		t.Fatal(err)
	}
	if config.KafkaMaxRequestBytes != 2000000 || config.KafkaQueuedMaxRequestBytes != 8000000 || config.KafkaQueuedMaxRequests != 50 ||
		config.KafkaMaxConnections != 400 || config.KafkaMaxConnectionsPerIP != 20 || config.KafkaIdleTimeout != time.Minute ||
		config.KafkaMaxInFlight != 7 || config.KafkaMaxFetchBytes != 1000000 || config.KafkaRequestBodyTimeout != 5*time.Second ||
		config.KafkaMaxTopicsPerRequest != 40 || config.KafkaMaxPartitionsPerRequest != 400 || config.MaxDecompressedBatchBytes != 9000000 ||
		config.KafkaMaxWaitingFetches != 99 {
		t.Fatalf("got %+v", config)
	}
	overrides := config.KafkaMaxConnectionsPerIPOverrides
	if overrides[netip.MustParseAddr("127.0.0.2")] != 0 || overrides[netip.MustParseAddr("::1")] != 50 ||
		overrides[netip.MustParseAddr("127.0.0.1")] != 30 {
		t.Fatalf("max.connections.per.ip.overrides: got %v", overrides)
	}
}

// A limit that cannot work is refused at start with one line naming it.
func TestServeRefusesBadLimits(t *testing.T) {
	base := []string{"serve", "--id", "1", "--controllers", "1@" + freeAddress(t), "--kafka-listen", freeAddress(t), "--data-dir", t.TempDir()}
	for _, bad := range [][]string{
		{"--queued-max-request-bytes", "1000000", "queued.max.request.bytes"},
		{"--max-connections", "0", "--max-connections"},
		{"--max-connections", "-1", "max.connections"},
		{"--max-connections-per-ip", "-1", "max.connections.per.ip"},
		{"--connections-max-idle", "10ms", "connections.max.idle.ms"},
		{"--queued-max-requests", "-5", "queued.max.requests"},
		{"--request-body-timeout", "100ms", "tide.request.body.timeout.ms"},
		{"--max-in-flight-requests-per-connection", "0", "--max-in-flight-requests-per-connection"},
		{"--max-request-bytes", "2", "socket.request.max.bytes"},
		{"--fetch-max-bytes", "-1", "fetch.max.bytes"},
		{"--max-partitions-per-request", "3", "tide.max.partitions.per.request"},
		{"--max-decompressed-batch-bytes", "-1", "tide.max.decompressed.batch.bytes"},
		{"--max-waiting-fetches", "-1", "tide.max.waiting.fetches"},
		{"--max-connections-per-ip-overrides", "127.0.0.1", "max.connections.per.ip.overrides"},
		{"--max-connections-per-ip-overrides", "127.0.0.1:-3", "max.connections.per.ip.overrides"},
		{"--max-connections-per-ip-overrides", "no-such-host.invalid:3", "max.connections.per.ip.overrides"},
	} {
		_, err := run(append(base, bad[0], bad[1])...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%s %s: err %v, want a usage error (2)", bad[0], bad[1], err)
			continue
		}
		if message := err.Error(); !strings.Contains(message, bad[2]) || strings.Contains(message, "\n") {
			t.Errorf("%s %s: %q, want one line naming %s", bad[0], bad[1], message, bad[2])
		}
	}
}
