package broker

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// topicSetting is a topic's value of a topic config as the metadata log
// sets it: the topic's own config, else the cluster-wide dynamic default
// of its broker synonym (KIP-226's order), else not set, and the caller
// falls back to the node's static configuration and Kafka's default.
func (n *Node) topicSetting(topic, name string) (string, bool) {
	if value, ok := n.image.TopicConfigValue(topic, name); ok {
		return strings.TrimSpace(value), true
	}
	if config, ok := logconfig.Topic(name); ok {
		if value, ok := n.image.BrokerDefault(config.Broker); ok {
			return strings.TrimSpace(value), true
		}
	}
	return "", false
}

// topicInt is topicSetting parsed as an integer; the controller wrote only
// validated values, so one that does not parse is treated as not set.
func (n *Node) topicInt(topic, name string) (int64, bool) {
	value, ok := n.topicSetting(topic, name)
	if !ok {
		return 0, false
	}
	parsed, err := strconv.ParseInt(value, 10, 64)
	return parsed, err == nil
}

// cleanupPolicy is the topic's cleanup.policy items, if set.
func (n *Node) cleanupPolicy(topic string) ([]string, bool) {
	value, ok := n.topicSetting(topic, "cleanup.policy")
	return logconfig.ListItems(value), ok
}

// applyTopicLogConfig overrides the node's log settings with the topic's
// configs. A cleanup.policy without delete keeps every segment: Kafka runs
// retention only for topics whose policy contains delete.
func (n *Node) applyTopicLogConfig(topic string, config *LogConfig) {
	if v, ok := n.topicInt(topic, "retention.ms"); ok {
		config.RetentionMs = v
	}
	if v, ok := n.topicInt(topic, "retention.bytes"); ok {
		config.RetentionBytes = v
	}
	if v, ok := n.topicInt(topic, "segment.ms"); ok {
		config.SegmentMs = v
	}
	if v, ok := n.topicInt(topic, "segment.bytes"); ok {
		config.SegmentBytes = v
	}
	if v, ok := n.topicSetting(topic, "message.timestamp.type"); ok {
		config.LogAppendTime = v == "LogAppendTime"
	}
	if v, ok := n.topicInt(topic, "max.message.bytes"); ok {
		config.MaxMessageBytes = int(v)
	}
	if policy, ok := n.cleanupPolicy(topic); ok && !slices.Contains(policy, "delete") {
		config.RetentionMs, config.RetentionBytes = -1, -1
	}
}

// topicCleanerConfig is the cleaner config a topic's configs give it, or
// false when the metadata log sets no cleanup.policy for it. compact and
// "compact,delete" are both compacted (retention still applies to the
// second, applyTopicLogConfig).
func (n *Node) topicCleanerConfig(topic string) (commitlog.CleanerConfig, bool) {
	policy, ok := n.cleanupPolicy(topic)
	if !ok {
		return commitlog.CleanerConfig{}, false
	}
	config := commitlog.DefaultCleanerConfig()
	config.Compact = slices.Contains(policy, "compact")
	if v, ok := n.topicInt(topic, "delete.retention.ms"); ok {
		config.DeleteRetentionMs = v
	}
	if v, ok := n.topicInt(topic, "min.compaction.lag.ms"); ok {
		config.MinCompactionLagMs = v
	}
	if v, ok := n.topicInt(topic, "max.compaction.lag.ms"); ok && v < math.MaxInt64 {
		config.MaxCompactionLagMs = v
	}
	if value, ok := n.topicSetting(topic, "min.cleanable.dirty.ratio"); ok {
		if ratio, err := strconv.ParseFloat(value, 64); err == nil {
			config.MinCleanableDirtyRatio = ratio
		}
	}
	return config, true
}

// noteConfigured adds the topics a config record reaches to configured:
// the topic, or for a cluster-wide default every topic.
func (n *Node) noteConfigured(resource metadata.ConfigResource, configured map[string]bool) {
	if resource.Type == metadata.ConfigTopic {
		configured[resource.Name] = true
		return
	}
	for _, topic := range n.image.Topics() {
		configured[topic] = true
	}
}

// applyTopicConfigs hands the hosted partitions of the configured topics
// their configs as the image now has them, at once: Kafka's leader reads a
// topic's config for each request, and an operator who changes one expects
// it to hold from then on, not from the next restart.
func (n *Node) applyTopicConfigs(configured map[string]bool) {
	if len(configured) == 0 {
		return
	}
	for _, tp := range n.Partitions() {
		if !configured[tp.Topic] {
			continue
		}
		config, ok := n.image.TopicConfig(tp.Topic)
		if !ok {
			continue
		}
		p := n.partitions[tp]
		p.replica.SetTopicConfig(n.replicaTopicConfig(tp.Topic, config))
		logConfig := n.logConfig(tp.Topic)
		if err := p.log.SetSegmentLimits(logConfig.SegmentBytes, logConfig.segmentAge()); err != nil {
			// A bug: the controller wrote only validated values, and the
			// log raises a small segment to its batch bound.
			panic(fmt.Sprintf("broker %d: %s: %v", n.config.ID, tp, err))
		}
		n.process(tp, p)
	}
}

// replicaTopicConfig is what a replica reads of its topic's configs: the
// controller's min.insync.replicas, and the log settings the metadata log
// and the node's own configuration give.
func (n *Node) replicaTopicConfig(topic string, config metadata.TopicConfig) replica.TopicConfig {
	logConfig := n.logConfig(topic)
	_, compacted := n.cleanerConfigFor(topic)
	topicConfig := replica.TopicConfig{
		MinInsyncReplicas: config.MinInsyncReplicas, LogAppendTime: logConfig.LogAppendTime,
		MaxMessageBytes: logConfig.MaxMessageBytes, Compacted: compacted,
	}
	if value, ok := n.topicSetting(topic, "compression.type"); ok {
		topicConfig.Codec, topicConfig.Recompress = topicCodec(value)
	}
	return topicConfig
}

// topicCodec maps a compression.type to the codec the leader recompresses
// produced batches to, or false for producer (keep the producer's).
func topicCodec(compressionType string) (record.Compression, bool) {
	switch compressionType {
	case "uncompressed":
		return record.CompressionNone, true
	case "gzip":
		return record.CompressionGzip, true
	case "snappy":
		return record.CompressionSnappy, true
	case "lz4":
		return record.CompressionLZ4, true
	case "zstd":
		return record.CompressionZstd, true
	}
	return record.CompressionNone, false
}
