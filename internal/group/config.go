package group

import (
	"fmt"

	"github.com/tidelog/tide/internal/rules"
)

// Config is the coordinator's share of the broker configuration, with
// Kafka's names and defaults (DefaultConfig).
type Config struct {
	// MinSessionTimeoutMs and MaxSessionTimeoutMs are
	// group.min.session.timeout.ms and group.max.session.timeout.ms: a
	// JoinGroup asking for a session timeout outside them gets
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeoutMs int32
	MaxSessionTimeoutMs int32
	// InitialRebalanceDelayMs is group.initial.rebalance.delay.ms: the
	// first rebalance out of Empty waits this long for more members, and
	// again while new ones keep arriving, up to the rebalance timeout.
	InitialRebalanceDelayMs int32
	// NewMemberJoinTimeoutMs replaces the session timeout of a new member
	// while its JoinGroup is parked (Kafka's internal constant, 5 minutes):
	// a parked request mutes the client's heartbeats.
	NewMemberJoinTimeoutMs int32
	// MaxSize is group.max.size: JoinGroup beyond it gets
	// GROUP_MAX_SIZE_REACHED.
	MaxSize int32
	// OffsetsRetentionMs is offsets.retention.minutes in milliseconds: how
	// long the offsets of an empty group (or of a simple consumer) are kept.
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckIntervalMs is
	// offsets.retention.check.interval.ms: how often Tick looks for expired
	// offsets.
	OffsetsRetentionCheckIntervalMs int64
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: a commit whose
	// metadata is longer gets OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int32
	// MaxPendingAppends bounds the appends handed out and not yet
	// acknowledged; requests that would write beyond it are answered
	// COORDINATOR_NOT_AVAILABLE, which every client retries.
	MaxPendingAppends int
	// MaxParkedRequests bounds the JoinGroup, SyncGroup and require-stable
	// OffsetFetch requests held for later; beyond it they are answered
	// COORDINATOR_NOT_AVAILABLE.
	MaxParkedRequests int
	// ConsumerSessionTimeoutMs is group.consumer.session.timeout.ms: a
	// consumer-protocol member not heard from for this long is fenced.
	ConsumerSessionTimeoutMs int64
	// ConsumerHeartbeatIntervalMs is group.consumer.heartbeat.interval.ms,
	// sent in every ConsumerGroupHeartbeat answer.
	ConsumerHeartbeatIntervalMs int32
	// ConsumerMaxSize is group.consumer.max.size: a new member beyond it
	// gets GROUP_MAX_SIZE_REACHED.
	ConsumerMaxSize int32
	// Rules is the zero value (every rule on) except in the simulator, the
	// scenarios and tests.
	Rules rules.Rules
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeoutMs:             6000,
		MaxSessionTimeoutMs:             1800000,
		InitialRebalanceDelayMs:         3000,
		NewMemberJoinTimeoutMs:          300000,
		MaxSize:                         1<<31 - 1,
		OffsetsRetentionMs:              10080 * 60 * 1000,
		OffsetsRetentionCheckIntervalMs: 600000,
		OffsetMetadataMaxBytes:          4096,
		MaxPendingAppends:               10000,
		MaxParkedRequests:               100000,
		ConsumerSessionTimeoutMs:        45000,
		ConsumerHeartbeatIntervalMs:     5000,
		ConsumerMaxSize:                 1<<31 - 1,
	}
}

// Validate rejects a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MinSessionTimeoutMs < 1 || c.MaxSessionTimeoutMs < c.MinSessionTimeoutMs:
		return fmt.Errorf("group: session timeout bounds %d..%d", c.MinSessionTimeoutMs, c.MaxSessionTimeoutMs)
	case c.InitialRebalanceDelayMs < 0 || c.NewMemberJoinTimeoutMs < 1:
		return fmt.Errorf("group: initial rebalance delay %d ms, new member join timeout %d ms", c.InitialRebalanceDelayMs, c.NewMemberJoinTimeoutMs)
	case c.MaxSize < 1:
		return fmt.Errorf("group: group.max.size %d below 1", c.MaxSize)
	case c.OffsetsRetentionMs < 1 || c.OffsetsRetentionCheckIntervalMs < 1:
		return fmt.Errorf("group: offsets retention %d ms checked every %d ms", c.OffsetsRetentionMs, c.OffsetsRetentionCheckIntervalMs)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("group: offset.metadata.max.bytes %d", c.OffsetMetadataMaxBytes)
	case c.ConsumerSessionTimeoutMs < 1 || c.ConsumerHeartbeatIntervalMs < 1 || c.ConsumerMaxSize < 1:
		return fmt.Errorf("group: consumer session timeout %d ms, heartbeat interval %d ms, group.consumer.max.size %d",
			c.ConsumerSessionTimeoutMs, c.ConsumerHeartbeatIntervalMs, c.ConsumerMaxSize)
	case c.MaxPendingAppends < 1 || c.MaxParkedRequests < 1:
		return fmt.Errorf("group: limits of %d pending appends and %d parked requests", c.MaxPendingAppends, c.MaxParkedRequests)
	}
	return nil
}
