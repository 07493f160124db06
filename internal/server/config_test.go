package server

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/metadata"
)

func TestParseControllers(t *testing.T) {
	voters, err := ParseControllers("1@127.0.0.1:9093, 2@host:9094")
	if err != nil || len(voters) != 2 || voters[2] != "host:9094" {
		t.Fatalf("got %v, %v", voters, err)
	}
	for _, bad := range []string{"", "1", "0@h:1", "x@h:1", "1@", "1@host", "1@h:1,1@h:2"} {
		if _, err := ParseControllers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{ID: 1, Controllers: map[metadata.BrokerID]string{1: "127.0.0.1:1"}, DataDir: "/tmp/x", KafkaListen: "127.0.0.1:2"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if defaults := good.withDefaults(); defaults.DefaultPartitions != 1 || defaults.DefaultReplicationFactor != 1 {
		t.Fatalf("default partitions %d and replication factor %d, want Kafka's 1 and 1", defaults.DefaultPartitions, defaults.DefaultReplicationFactor)
	}
	if defaults := good.withDefaults(); defaults.leaderRebalanceTicks() != 30000 || defaults.LeaderImbalancePercentage != 10 {
		t.Fatalf("leader rebalance every %d ticks above %d%%, want Kafka's 300 s (30000 ticks) and 10%%",
			defaults.leaderRebalanceTicks(), defaults.LeaderImbalancePercentage)
	}
	if defaults := good.withDefaults(); defaults.MetricsGroupPartitionsMax != DefaultMetricsGroupPartitionsMax {
		t.Fatalf("metrics group partitions max %d, want the default %d", defaults.MetricsGroupPartitionsMax, DefaultMetricsGroupPartitionsMax)
	}
	if off := (Config{NoAutoLeaderRebalance: true}).withDefaults(); off.leaderRebalanceTicks() != 0 {
		t.Fatalf("auto.leader.rebalance.enable=false still rebalances every %d ticks", off.leaderRebalanceTicks())
	}
	for name, change := range map[string]func(*Config){
		"id 0":            func(c *Config) { c.ID = 0 },
		"no controllers":  func(c *Config) { c.Controllers = nil },
		"no data":         func(c *Config) { c.DataDir = "" },
		"not a voter":     func(c *Config) { c.ID = 2 },
		"no kafka listen": func(c *Config) { c.KafkaListen = "" },
		"session too low": func(c *Config) { c.SessionTimeout, c.BrokerHeartbeat = 100, 200 },
		"no partitions":   func(c *Config) { c.DefaultPartitions = -1 },
		"partitions over": func(c *Config) { c.DefaultPartitions = maxDefaultPartitions + 1 },
		"no replicas":     func(c *Config) { c.DefaultReplicationFactor = -1 },
		"replicas over":   func(c *Config) { c.DefaultReplicationFactor = 1 << 15 },
		"wildcard listen": func(c *Config) { c.KafkaListen = "0.0.0.0:9092" },
		"any host listen": func(c *Config) { c.KafkaListen = ":9092" },
		"v6 wildcard":     func(c *Config) { c.KafkaListen = "[::]:9092" },
		"imbalance over":  func(c *Config) { c.LeaderImbalancePercentage = 101 },
		"imbalance below": func(c *Config) { c.LeaderImbalancePercentage = -1 },
		"check in a tick": func(c *Config) { c.LeaderImbalanceCheckInterval = time.Millisecond },
		"group rows < 0":  func(c *Config) { c.MetricsGroupPartitionsMax = -1 },
	} {
		config := good
		change(&config)
		if err := config.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A wildcard Kafka listener is fine once this node's --kafka-listeners
// entry says where clients reach it (Kafka's advertised.listeners).
func TestConfigWildcardListenerNeedsAnAdvertisedAddress(t *testing.T) {
	config := Config{ID: 1, Controllers: map[metadata.BrokerID]string{1: "127.0.0.1:1"}, DataDir: "/tmp/x", KafkaListen: "0.0.0.0:9092",
		KafkaListeners: map[metadata.BrokerID]string{1: "broker-1.example:9092"}}
	if err := config.Validate(); err != nil {
		t.Fatal(err)
	}
	config.KafkaListeners = nil
	if err := config.Validate(); err == nil || !strings.Contains(err.Error(), "--kafka-listeners 1@host:port") {
		t.Fatalf("a wildcard listener without an advertised address: %v", err)
	}
}

// The Kafka listener's address comes from --kafka-listen or, without it,
// from this node's entry in --kafka-listeners.
func TestConfigDerivesKafkaListen(t *testing.T) {
	listeners, err := ParseKafkaListeners("1@127.0.0.1:9092,2@127.0.0.1:9192")
	if err != nil {
		t.Fatal(err)
	}
	config := Config{ID: 2, Controllers: map[metadata.BrokerID]string{1: "127.0.0.1:1"}, Listen: "127.0.0.1:3", DataDir: "/tmp/x", KafkaListeners: listeners}
	if err := config.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := config.withDefaults().KafkaListen; got != "127.0.0.1:9192" {
		t.Fatalf("kafka listen %q, want this node's entry", got)
	}
}

// A frame over the limit is refused before its payload is read.
func TestFrameLimit(t *testing.T) {
	var buffer bytes.Buffer
	if err := writeFrame(&buffer, frameRaft, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readFrame(bytes.NewReader(buffer.Bytes()), 50); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("got %v", err)
	}
	kind, payload, err := readFrame(bytes.NewReader(buffer.Bytes()), 200)
	if err != nil || kind != frameRaft || len(payload) != 100 {
		t.Fatalf("got %d %d %v", kind, len(payload), err)
	}
	if _, _, err := readFrame(strings.NewReader("\x00\x00\x00\x00\x01"), 200); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("an empty frame: %v", err)
	}
}
