// Package logconfig is the table of topic configs tide serves (Kafka's
// LogConfig) and their validation: a pure layer the gateway calls before a
// CreateTopics, AlterConfigs or IncrementalAlterConfigs reaches the
// controller, so a bad config gets INVALID_CONFIG naming the config and why
// and never reaches the metadata log.
package logconfig

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type is a config's type as DescribeConfigs reports it (KIP-569's
// config_type: BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7).
type Type int8

const (
	Boolean Type = 1
	String  Type = 2
	Int     Type = 3
	Long    Type = 5
	Double  Type = 6
	List    Type = 7
)

func (t Type) String() string {
	switch t {
	case Boolean:
		return "BOOLEAN"
	case String:
		return "STRING"
	case Int:
		return "INT"
	case Long:
		return "LONG"
	case Double:
		return "DOUBLE"
	case List:
		return "LIST"
	}
	return "UNKNOWN"
}

// Config describes one topic config: its type, its range or its allowed
// values, Kafka's default, and the broker config that gives the topic its
// value when the topic sets none (its synonym, KIP-226).
type Config struct {
	Name string
	Type Type
	// Min and Max bound an Int, Long or Double.
	Min, Max float64
	// Allowed lists the values of a String, or the items of a List.
	Allowed []string
	// Default is Kafka's default value, as text.
	Default string
	// Broker is the broker config name that sets the cluster default.
	Broker string
	Doc    string
}

// Kafka's defaults and ranges (LogConfig, ServerLogConfigs).
var configs = []Config{
	{Name: "cleanup.policy", Type: List, Allowed: []string{"delete", "compact"}, Default: "delete", Broker: "log.cleanup.policy",
		Doc: "delete old segments by retention, compact to the latest record per key, or both"},
	{Name: "compression.type", Type: String, Allowed: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
		Default: "producer", Broker: "compression.type", Doc: "the compression of the topic's batches; producer keeps the producer's"},
	{Name: "delete.retention.ms", Type: Long, Min: 0, Max: math.MaxInt64, Default: "86400000", Broker: "log.cleaner.delete.retention.ms",
		Doc: "how long a compacted topic keeps tombstones"},
	{Name: "max.message.bytes", Type: Int, Min: 0, Max: math.MaxInt32, Default: "1048588", Broker: "message.max.bytes",
		Doc: "the largest record batch the topic accepts"},
	{Name: "max.compaction.lag.ms", Type: Long, Min: 1, Max: math.MaxInt64, Default: "9223372036854775807", Broker: "log.cleaner.max.compaction.lag.ms",
		Doc: "the longest a record stays uncompacted on a compacted topic"},
	{Name: "message.timestamp.type", Type: String, Allowed: []string{"CreateTime", "LogAppendTime"}, Default: "CreateTime",
		Broker: "log.message.timestamp.type", Doc: "whether a record keeps the producer's timestamp or gets the append time"},
	{Name: "min.cleanable.dirty.ratio", Type: Double, Min: 0, Max: 1, Default: "0.5", Broker: "log.cleaner.min.cleanable.ratio",
		Doc: "the dirty share of a log above which the cleaner compacts it"},
	{Name: "min.compaction.lag.ms", Type: Long, Min: 0, Max: math.MaxInt64, Default: "0", Broker: "log.cleaner.min.compaction.lag.ms",
		Doc: "how long a record stays uncompacted"},
	{Name: "min.insync.replicas", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1", Broker: "min.insync.replicas",
		Doc: "the fewest in-sync replicas an acks=all produce needs"},
	{Name: "retention.bytes", Type: Long, Min: math.MinInt64, Max: math.MaxInt64, Default: "-1", Broker: "log.retention.bytes",
		Doc: "the size above which a partition deletes its oldest segments; -1 for no limit"},
	{Name: "retention.ms", Type: Long, Min: -1, Max: math.MaxInt64, Default: "604800000", Broker: "log.retention.ms",
		Doc: "how long a segment is kept; -1 for no limit"},
	{Name: "segment.bytes", Type: Int, Min: 14, Max: math.MaxInt32, Default: "1073741824", Broker: "log.segment.bytes",
		Doc: "the size at which a segment rolls"},
	{Name: "segment.ms", Type: Long, Min: 1, Max: math.MaxInt64, Default: "604800000", Broker: "log.roll.ms",
		Doc: "the age at which a segment rolls"},
	{Name: "unclean.leader.election.enable", Type: Boolean, Default: "false", Broker: "unclean.leader.election.enable",
		Doc: "whether a replica out of the ISR may become leader, losing records"},
}

// Topic returns the topic config of that name.
func Topic(name string) (Config, bool) {
	i := slices.IndexFunc(configs, func(c Config) bool { return c.Name == name })
	if i < 0 {
		return Config{}, false
	}
	return configs[i], true
}

// Broker returns the topic config whose cluster default a broker config
// sets (log.retention.ms for retention.ms, ...).
func Broker(name string) (Config, bool) {
	i := slices.IndexFunc(configs, func(c Config) bool { return c.Broker == name })
	if i < 0 {
		return Config{}, false
	}
	return configs[i], true
}

// Topics returns every topic config, sorted by name.
func Topics() []Config { return slices.Clone(configs) }

// ValidateTopic checks one topic config. Rule config-known-and-valid: an
// unknown name or a value out of Kafka's type and range is refused before
// the controller writes it, so no broker ever reads a value it cannot use
// (a retention of "abc" would otherwise stop retention on every broker).
func ValidateTopic(name, value string) error {
	config, ok := Topic(name)
	if !ok {
		return fmt.Errorf("unknown topic config %s", name)
	}
	return config.Validate(value)
}

// ValidateBroker checks one cluster-wide broker default.
func ValidateBroker(name, value string) error {
	config, ok := Broker(name)
	if !ok {
		return fmt.Errorf("broker config %s is not dynamically alterable", name)
	}
	if err := config.Validate(value); err != nil {
		return fmt.Errorf("%s (for %s): %w", name, config.Name, err)
	}
	return nil
}

// Validate checks a value against the config's type and range.
func (c Config) Validate(value string) error {
	invalid := func(why string, args ...any) error {
		return fmt.Errorf("invalid value %q for configuration %s: %s", value, c.Name, fmt.Sprintf(why, args...))
	}
	trimmed := strings.TrimSpace(value)
	switch c.Type {
	case Boolean:
		if !strings.EqualFold(trimmed, "true") && !strings.EqualFold(trimmed, "false") {
			return invalid("expected value to be either true or false")
		}
	case Int, Long:
		bits := 64
		if c.Type == Int {
			bits = 32
		}
		n, err := strconv.ParseInt(trimmed, 10, bits)
		if err != nil {
			return invalid("not a number of type %s", c.Type)
		}
		if float64(n) < c.Min || float64(n) > c.Max {
			return invalid("value must be at least %.0f", c.Min)
		}
	case Double:
		f, err := strconv.ParseFloat(trimmed, 64)
		if err != nil || math.IsNaN(f) {
			return invalid("not a number of type DOUBLE")
		}
		if f < c.Min || f > c.Max {
			return invalid("value must be between %g and %g", c.Min, c.Max)
		}
	case String:
		if !slices.Contains(c.Allowed, trimmed) {
			return invalid("string must be one of: %s", strings.Join(c.Allowed, ", "))
		}
	case List:
		items := ListItems(value)
		if len(items) == 0 {
			return invalid("the list must not be empty")
		}
		for _, item := range items {
			if !slices.Contains(c.Allowed, item) {
				return invalid("%q is not one of: %s", item, strings.Join(c.Allowed, ", "))
			}
		}
	}
	return nil
}

// ListItems splits a List value on commas, trimming each item and dropping
// empty ones, as Kafka's ConfigDef does.
func ListItems(value string) []string {
	var items []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// ValidateTopicConfigs checks a topic's whole set of configs against its
// replication factor. Rule min-isr-within-replication-factor: a
// min.insync.replicas above the replication factor is refused, since no
// acks=all produce could ever succeed on such a topic.
func ValidateTopicConfigs(configs map[string]string, replicationFactor int) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		if err := ValidateTopic(name, configs[name]); err != nil {
			return err
		}
	}
	if value, ok := configs["min.insync.replicas"]; ok {
		n, _ := strconv.Atoi(strings.TrimSpace(value))
		if n > replicationFactor {
			return fmt.Errorf("min.insync.replicas %d is larger than the replication factor %d", n, replicationFactor)
		}
	}
	return validateCompactionLags(configs)
}

// validateCompactionLags refuses a max.compaction.lag.ms below the
// min.compaction.lag.ms, as Kafka's LogConfig does: no record could be
// both kept uncompacted and compacted in time. Unset ones take Kafka's
// defaults (0 and the largest long).
func validateCompactionLags(configs map[string]string) error {
	lag := func(name string) int64 {
		config, _ := Topic(name)
		value, ok := configs[name]
		if !ok {
			value = config.Default
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		return n
	}
	if minimum, maximum := lag("min.compaction.lag.ms"), lag("max.compaction.lag.ms"); maximum < minimum {
		return fmt.Errorf("max.compaction.lag.ms %d is below min.compaction.lag.ms %d", maximum, minimum)
	}
	return nil
}
