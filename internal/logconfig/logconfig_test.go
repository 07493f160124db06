package logconfig

import (
	"strings"
	"testing"
)

// Every config's Kafka type and range: the boundary values in and out.
func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"max.message.bytes", "2097152", true},
		{"max.message.bytes", "-1", false},
		{"max.message.bytes", "4294967296", false}, // over an INT
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"retention.ms", "abc", false},
		{"retention.bytes", "-1", true},
		{"retention.bytes", "1099511627776", true},
		{"segment.bytes", "14", true},
		{"segment.bytes", "13", false},
		{"segment.ms", "1", true},
		{"segment.ms", "0", false},
		{"cleanup.policy", "delete", true},
		{"cleanup.policy", "compact", true},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", " delete , compact ", true},
		{"cleanup.policy", "", false},
		{"cleanup.policy", "compact,tiered", false},
		{"min.insync.replicas", "1", true},
		{"min.insync.replicas", "0", false},
		{"unclean.leader.election.enable", "TRUE", true},
		{"unclean.leader.election.enable", "yes", false},
		{"message.timestamp.type", "LogAppendTime", true},
		{"message.timestamp.type", "logappendtime", false},
		{"delete.retention.ms", "0", true},
		{"delete.retention.ms", "-1", false},
		{"min.compaction.lag.ms", "0", true},
		{"min.compaction.lag.ms", "-5", false},
		{"min.cleanable.dirty.ratio", "0", true},
		{"min.cleanable.dirty.ratio", "1", true},
		{"min.cleanable.dirty.ratio", "1.01", false},
		{"min.cleanable.dirty.ratio", "NaN", false},
		{"compression.type", "zstd", true},
		{"compression.type", "producer", true},
		{"compression.type", "brotli", false},
		{"no.such.config", "1", false},
	} {
		err := ValidateTopic(tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: %v, want ok=%v", tc.name, tc.value, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%q: message %q does not name the config", tc.name, tc.value, err)
		}
	}
}

// Rule min-isr-within-replication-factor.
func TestMinISRWithinReplicationFactor(t *testing.T) {
	if err := ValidateTopicConfigs(map[string]string{"min.insync.replicas": "3"}, 3); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTopicConfigs(map[string]string{"min.insync.replicas": "4"}, 3); err == nil {
		t.Fatal("min.insync.replicas 4 on 3 replicas accepted")
	}
	if err := ValidateTopicConfigs(map[string]string{"retention.ms": "1", "bogus": "x"}, 1); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown config: %v", err)
	}
}

// Every topic config has a broker synonym and a default that validates.
func TestTableIsConsistent(t *testing.T) {
	for _, c := range Topics() {
		if err := c.Validate(c.Default); err != nil {
			t.Errorf("default of %s: %v", c.Name, err)
		}
		if back, ok := Broker(c.Broker); !ok || back.Name != c.Name {
			t.Errorf("%s: broker synonym %s does not map back", c.Name, c.Broker)
		}
		if c.Doc == "" {
			t.Errorf("%s has no documentation", c.Name)
		}
	}
	if err := ValidateBroker("log.retention.ms", "-1"); err != nil {
		t.Fatal(err)
	}
	if err := ValidateBroker("log.dirs", "/tmp"); err == nil {
		t.Fatal("a static broker config is not dynamically alterable")
	}
}

// max.compaction.lag.ms is served with Kafka's range and default, and may
// not be below min.compaction.lag.ms, set or defaulted.
func TestCompactionLagsAgree(t *testing.T) {
	if config, ok := Topic("max.compaction.lag.ms"); !ok || config.Default != "9223372036854775807" || config.Validate("0") == nil {
		t.Fatalf("max.compaction.lag.ms: %+v", config)
	}
	for _, configs := range []map[string]string{
		{"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "4999"},
		{"max.compaction.lag.ms": "1", "min.compaction.lag.ms": "2"},
	} {
		if err := ValidateTopicConfigs(configs, 1); err == nil || !strings.Contains(err.Error(), "max.compaction.lag.ms") {
			t.Errorf("%v: %v", configs, err)
		}
	}
	if err := ValidateTopicConfigs(map[string]string{"max.compaction.lag.ms": "1"}, 1); err != nil {
		t.Fatalf("max.compaction.lag.ms 1 over the default min of 0: %v", err)
	}
}
