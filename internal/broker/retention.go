package broker

import (
	"time"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
)

// Kafka's defaults for the log settings below (LogConfig,
// ServerLogConfigs).
const (
	// DefaultRetentionMs is log.retention.hours=168: seven days.
	DefaultRetentionMs = 7 * 24 * 3600 * 1000
	// DefaultSegmentMs is log.roll.hours=168.
	DefaultSegmentMs = 7 * 24 * 3600 * 1000
	// DefaultRetentionCheckIntervalMs is
	// log.retention.check.interval.ms: five minutes.
	DefaultRetentionCheckIntervalMs = 5 * 60 * 1000
	// DefaultRetentionPartitionsPerTick bounds the partitions one Tick
	// checks for retention, so that a broker with many partitions spreads
	// the deletions of a retention pass over several ticks instead of
	// stalling one.
	DefaultRetentionPartitionsPerTick = 32
)

// LogConfig is what one topic's partition logs are kept by: Kafka's
// retention.ms, retention.bytes, segment.ms, segment.bytes and
// message.timestamp.type (LogAppendTime true, CreateTime false). A
// negative retention means no limit of that kind. Segment and timestamp
// settings take effect when a partition's log is opened.
type LogConfig struct {
	RetentionMs    int64
	RetentionBytes int64
	SegmentMs      int64
	SegmentBytes   int64
	LogAppendTime  bool
	// MaxMessageBytes is the topic's max.message.bytes, or 0 when unset
	// (the node's MaxBatchBytes bounds its batches).
	MaxMessageBytes int
}

func (c LogConfig) segmentAge() time.Duration { return time.Duration(c.SegmentMs) * time.Millisecond }

// logConfig is the log configuration of topic: the node's static settings
// (Config.RetentionMs and the rest) overridden by the topic's configs and
// the cluster-wide dynamic defaults in the metadata log (topicSetting).
func (n *Node) logConfig(topic string) LogConfig {
	config := LogConfig{
		RetentionMs: n.config.RetentionMs, RetentionBytes: n.config.RetentionBytes,
		SegmentMs: n.config.SegmentMs, SegmentBytes: n.config.SegmentBytes, LogAppendTime: n.config.LogAppendTime,
	}
	if config.RetentionMs == 0 {
		config.RetentionMs = DefaultRetentionMs
	}
	if config.RetentionBytes == 0 {
		config.RetentionBytes = -1
	}
	n.applyTopicLogConfig(topic, &config)
	if config.SegmentMs <= 0 {
		config.SegmentMs = DefaultSegmentMs
	}
	// A compacted topic's segments roll at max.compaction.lag.ms at the
	// latest (Kafka's maxSegmentMs): the cleaner never touches the active
	// segment, so an older one would hold records uncompacted past the lag.
	if cleaner, compacted := n.cleanerConfigFor(topic); compacted && cleaner.MaxCompactionLagMs > 0 {
		config.SegmentMs = min(config.SegmentMs, cleaner.MaxCompactionLagMs)
	}
	return config
}

// retentionSchedule is where the node is in its retention passes: Kafka's
// LogManager checks every log each log.retention.check.interval.ms; the
// node does the same on its Ticks, a bounded number of partitions a Tick.
type retentionSchedule struct {
	// lastPassMs is when the last pass began (by the runtime's clock), or
	// when the node first had a clock; started says it has been set.
	lastPassMs int64
	started    bool
	// pending are the partitions of the current pass not yet checked.
	pending []metadata.TopicPartition
}

// SetClock gives the node the current time, in milliseconds since the Unix
// epoch: the wall clock in tide serve, the virtual clock in the simulator.
// Retention by time (retention.ms) and the age of segments without
// timestamps (segment.ms) are measured on it; the node reads no clock.
func (n *Node) SetClock(nowMs int64) {
	n.clockMs = nowMs
	for _, tp := range n.Partitions() {
		n.partitions[tp].log.SetClock(nowMs)
	}
}

// maybeEnforceRetention checks for retention up to
// Config.RetentionPartitionsPerTick partitions of the current pass, and
// starts a pass every retention check interval. Leaders and followers
// alike run it on their own logs (Kafka's LogManager does not ask who
// leads); each moves its log start through its replica, which keeps it at
// or below its high watermark (rule log-start-below-high-watermark), so
// nothing uncommitted is deleted. A node without a clock yet runs none.
func (n *Node) maybeEnforceRetention() {
	if n.clockMs < 0 {
		return
	}
	interval := n.config.RetentionCheckIntervalMs
	if interval <= 0 {
		interval = DefaultRetentionCheckIntervalMs
	}
	if !n.retention.started {
		// The first pass comes one interval after the node has a clock,
		// as Kafka's comes after log.initial.task.delay.ms: a restarted
		// broker first catches up with its leaders.
		n.retention.started, n.retention.lastPassMs = true, n.clockMs
	}
	if len(n.retention.pending) == 0 && n.clockMs-n.retention.lastPassMs >= interval {
		n.retention.lastPassMs = n.clockMs
		n.retention.pending = n.Partitions()
	}
	budget := n.config.RetentionPartitionsPerTick
	if budget <= 0 {
		budget = DefaultRetentionPartitionsPerTick
	}
	for ; budget > 0 && len(n.retention.pending) > 0; budget-- {
		tp := n.retention.pending[0]
		n.retention.pending = n.retention.pending[1:]
		if p, ok := n.partitions[tp]; ok {
			n.enforceRetention(tp, p)
		}
	}
}

// enforceRetention moves one partition's log start to where its retention
// wants it.
func (n *Node) enforceRetention(tp metadata.TopicPartition, p *partition) {
	config := n.logConfig(tp.Topic)
	offset, err := p.log.RetentionOffset(n.clockMs, commitlog.Retention{Ms: config.RetentionMs, Bytes: config.RetentionBytes})
	if err != nil {
		n.fail(tp, err)
		return
	}
	if offset > p.replica.LogStartOffset() {
		p.replica.AdvanceLogStartOffset(offset)
		n.process(tp, p)
	}
}
