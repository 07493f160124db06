package broker

import (
	"fmt"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// CleanerIntervalTicksDefault is how many ticks apart a node runs a
// cleaning pass when Config.CleanerIntervalTicks is zero.
const CleanerIntervalTicksDefault = 100

// cleanerLogsPerPass bounds the cleaner's work per tick: a pass, at most one
// every CleanerIntervalTicks, cleans this many compacted partitions, taken
// in turn, so no Tick does more than rewrite one log.
const cleanerLogsPerPass = 1

// CleanReport is what one cleaning pass did to one partition, for an
// observer (ObserveCleaner).
type CleanReport struct {
	Partition metadata.TopicPartition
	Result    commitlog.CleanResult
}

// ObserveCleaner has observer see every pass that cleaned a log: the
// simulator's trace and statistics.
func (n *Node) ObserveCleaner(observer func(CleanReport)) { n.cleanerObserver = observer }

// cleanerConfigFor is the one seam where a topic's configuration becomes
// the cleaner's: the topic's cleanup.policy, delete.retention.ms,
// min.compaction.lag.ms and min.cleanable.dirty.ratio from the metadata log
// (topicCleanerConfig) when it sets a cleanup.policy, else the node's
// Config.CleanerConfigs (a topic absent there is not compacted).
func (n *Node) cleanerConfigFor(topic string) (commitlog.CleanerConfig, bool) {
	if config, ok := n.topicCleanerConfig(topic); ok {
		return config, config.Compact
	}
	config, ok := n.config.CleanerConfigs[topic]
	return config, ok && config.Compact
}

// maybeCleanLogs runs the log cleaner from Tick, in both runtimes: a pass
// over cleanerLogsPerPass compacted partitions every CleanerIntervalTicks
// ticks, the partitions taken in turn (docs/storage.md, Compaction), on the
// runtime's clock (SetClock: the wall clock in tide serve, the virtual
// clock in the simulator), for min.compaction.lag.ms and delete horizons.
// A topic is compacted when its cleanup.policy (from the metadata log) or
// Config.CleanerConfigs says so. The pass never cleans at or above the
// replica's high watermark (rules.CleanBelowHighWatermark); a log that
// fails cleaning takes its partition offline, like any failed log.
func (n *Node) maybeCleanLogs() {
	interval := n.config.CleanerIntervalTicks
	if interval <= 0 {
		interval = CleanerIntervalTicksDefault
	}
	if n.clockMs < 0 || n.now-n.cleanedAtTick < interval {
		return
	}
	n.cleanedAtTick = n.now
	var compacted []metadata.TopicPartition
	for _, tp := range n.Partitions() {
		if _, ok := n.cleanerConfigFor(tp.Topic); ok {
			compacted = append(compacted, tp)
		}
	}
	for range min(cleanerLogsPerPass, len(compacted)) {
		n.cleanerTurn = (n.cleanerTurn + 1) % len(compacted)
		n.cleanLog(compacted[n.cleanerTurn])
	}
}

// cleanLog runs one cleaning pass over one partition's log.
func (n *Node) cleanLog(tp metadata.TopicPartition) {
	config, _ := n.cleanerConfigFor(tp.Topic)
	p := n.partitions[tp]
	upTo := p.replica.HighWatermark()
	if !n.config.Rules.On(rules.CleanBelowHighWatermark) {
		upTo = p.log.LogEndOffset() // the legacy cleaner: up to the active segment
	}
	result, err := p.log.Clean(commitlog.CleanOptions{Config: config, UpTo: upTo, NowMs: n.clockMs})
	if err != nil {
		n.fail(tp, fmt.Errorf("broker %d: clean %s: %w", n.config.ID, tp, err))
		return
	}
	if result.Cleaned && n.cleanerObserver != nil {
		n.cleanerObserver(CleanReport{Partition: tp, Result: result})
	}
}
