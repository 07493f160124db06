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

// CleanLogs runs the log cleaner: one pass over one compacted partition
// every CleanerIntervalTicks ticks, the partitions taken in turn, so the
// work per call is bounded by one log (docs/storage.md, Compaction). nowMs
// is the runtime's time in milliseconds (the wall clock in tide serve, the
// virtual clock in the simulator), for min.compaction.lag.ms and delete
// horizons. The pass never cleans at or above the replica's high watermark
// (rules.CleanBelowHighWatermark); a log that fails cleaning takes its
// partition offline, like any failed log. It returns the partition it
// cleaned, if any, and what the pass did.
func (n *Node) CleanLogs(nowMs int64) (metadata.TopicPartition, commitlog.CleanResult, bool) {
	interval := n.config.CleanerIntervalTicks
	if interval <= 0 {
		interval = CleanerIntervalTicksDefault
	}
	if n.now-n.cleanedAtTick < interval {
		return metadata.TopicPartition{}, commitlog.CleanResult{}, false
	}
	n.cleanedAtTick = n.now
	var compacted []metadata.TopicPartition
	for _, tp := range n.Partitions() {
		if _, ok := n.cleanerConfigFor(tp.Topic); ok {
			compacted = append(compacted, tp)
		}
	}
	if len(compacted) == 0 {
		return metadata.TopicPartition{}, commitlog.CleanResult{}, false
	}
	n.cleanerTurn = (n.cleanerTurn + 1) % len(compacted)
	tp := compacted[n.cleanerTurn]
	config, _ := n.cleanerConfigFor(tp.Topic)
	p := n.partitions[tp]
	upTo := p.replica.HighWatermark()
	if !n.config.Rules.On(rules.CleanBelowHighWatermark) {
		upTo = p.log.LogEndOffset() // the legacy cleaner: up to the active segment
	}
	result, err := p.log.Clean(commitlog.CleanOptions{Config: config, UpTo: upTo, NowMs: nowMs})
	if err != nil {
		n.fail(tp, fmt.Errorf("broker %d: clean %s: %w", n.config.ID, tp, err))
		return tp, result, false
	}
	return tp, result, result.Cleaned
}
