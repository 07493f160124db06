package main

import (
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/server"
)

// groupOptions are the consumer groups' flags, on tide serve and tide dev
// alike: how __consumer_offsets is created, the coordinators' first
// rebalance delay, and the KIP-848 consumer groups' session timeout and
// heartbeat interval.
type groupOptions struct {
	offsetsPartitions         int
	offsetsReplicationFactor  int
	initialRebalanceDelay     time.Duration
	consumerSessionTimeout    time.Duration
	consumerHeartbeatInterval time.Duration
}

func registerGroupFlags(flags *pflag.FlagSet, o *groupOptions) {
	flags.IntVar(&o.offsetsPartitions, "offsets-topic-partitions", frontend.DefaultOffsetsTopicPartitions,
		"partitions of __consumer_offsets, created at the first FindCoordinator; changing it later moves every group (offsets.topic.num.partitions)")
	flags.IntVar(&o.offsetsReplicationFactor, "offsets-topic-replication-factor", frontend.DefaultOffsetsTopicReplicationFactor,
		"replicas of __consumer_offsets, at most the brokers registered when it is created (offsets.topic.replication.factor)")
	flags.DurationVar(&o.initialRebalanceDelay, "group-initial-rebalance-delay", 3*time.Second,
		"how long a new group's first rebalance waits for more members (group.initial.rebalance.delay.ms)")
	flags.DurationVar(&o.consumerSessionTimeout, "group-consumer-session-timeout", 45*time.Second,
		"how long a KIP-848 consumer group member may go without a heartbeat before it is fenced (group.consumer.session.timeout.ms)")
	flags.DurationVar(&o.consumerHeartbeatInterval, "group-consumer-heartbeat-interval", 5*time.Second,
		"how often KIP-848 consumer group members are told to heartbeat, which bounds how soon they learn of a new assignment (group.consumer.heartbeat.interval.ms)")
}

// groupPropertyFlags maps the properties file's group keys to their flags.
var groupPropertyFlags = map[string]string{
	"offsets.topic.num.partitions":         "offsets-topic-partitions",
	"offsets.topic.replication.factor":     "offsets-topic-replication-factor",
	"group.initial.rebalance.delay.ms":     "group-initial-rebalance-delay",
	"group.consumer.session.timeout.ms":    "group-consumer-session-timeout",
	"group.consumer.heartbeat.interval.ms": "group-consumer-heartbeat-interval",
}

func rereadGroups(flags *pflag.FlagSet) groupOptions {
	var o groupOptions
	o.offsetsPartitions, _ = flags.GetInt("offsets-topic-partitions")
	o.offsetsReplicationFactor, _ = flags.GetInt("offsets-topic-replication-factor")
	o.initialRebalanceDelay, _ = flags.GetDuration("group-initial-rebalance-delay")
	o.consumerSessionTimeout, _ = flags.GetDuration("group-consumer-session-timeout")
	o.consumerHeartbeatInterval, _ = flags.GetDuration("group-consumer-heartbeat-interval")
	return o
}

func (o groupOptions) validate() error {
	if o == (groupOptions{}) {
		return nil // not from flags (a test's options): the server's defaults, as apply takes them
	}
	if o.offsetsPartitions < 1 || o.offsetsReplicationFactor < 1 || o.offsetsReplicationFactor > math.MaxInt16 {
		return fmt.Errorf("--offsets-topic-partitions %d and --offsets-topic-replication-factor %d must be at least 1",
			o.offsetsPartitions, o.offsetsReplicationFactor)
	}
	if o.initialRebalanceDelay < 0 || o.initialRebalanceDelay > time.Hour {
		return fmt.Errorf("--group-initial-rebalance-delay %s: want 0 to 1h", o.initialRebalanceDelay)
	}
	if o.consumerHeartbeatInterval < time.Millisecond || o.consumerSessionTimeout <= o.consumerHeartbeatInterval || o.consumerSessionTimeout > time.Hour {
		return fmt.Errorf("--group-consumer-heartbeat-interval %s and --group-consumer-session-timeout %s: want 1ms <= interval < timeout <= 1h",
			o.consumerHeartbeatInterval, o.consumerSessionTimeout)
	}
	return nil
}

// apply sets the group settings of a node's configuration; validate has
// checked them.
func (o groupOptions) apply(config *server.Config) {
	if o == (groupOptions{}) {
		return // not from flags: the server's defaults
	}
	groups := group.DefaultConfig()
	groups.InitialRebalanceDelayMs = int32(o.initialRebalanceDelay.Milliseconds())
	groups.ConsumerSessionTimeoutMs = o.consumerSessionTimeout.Milliseconds()
	groups.ConsumerHeartbeatIntervalMs = int32(o.consumerHeartbeatInterval.Milliseconds())
	config.OffsetsTopicPartitions, config.OffsetsTopicReplicationFactor, config.Groups = o.offsetsPartitions, o.offsetsReplicationFactor, &groups
}
