// Package replica is one partition replica's replication rules as a pure
// state machine: no goroutines, no clock, no sockets, no files. Inputs come
// in as calls with values (partition state from the metadata log, requests,
// responses, Tick, Synced); work goes out as values in a Ready (storage
// operations, messages, answers, ISR proposals), the way etcd/raft's RawNode
// works. The broker (internal/broker) drives it, in both runtimes; the
// replication tests of internal/scenario drive it directly.
//
// Each rule of docs/replication.md is here, named after the Kafka failure it
// prevents (package rules), and can be switched off only by the simulator
// and the scenarios, to show that failure come back.
package replica

import (
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/producer"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// Role is what a replica does in its current leader epoch.
type Role int

const (
	// Offline replicas have no partition state yet, or are not in the
	// assignment.
	Offline Role = iota
	Leader
	Follower
)

func (r Role) String() string {
	return [...]string{"offline", "leader", "follower"}[r]
}

// Config configures a replica. Validate rejects bad values.
type Config struct {
	Broker    metadata.BrokerID
	Partition metadata.TopicPartition
	// MinInsyncReplicas is the topic's min.insync.replicas.
	MinInsyncReplicas int
	// ReplicaLagTicks is replica.lag.time.max.ms in ticks: a follower that
	// has not caught up for longer leaves the ISR.
	ReplicaLagTicks int64
	// FetchRetryTicks is how long a follower backs off after an error
	// before it fetches again, and, unless FetchTimeoutTicks is set, how
	// long it waits for a fetch response.
	FetchRetryTicks int64
	// FetchTimeoutTicks is how long a follower waits for a fetch response
	// before it sends the fetch again; 0 means FetchRetryTicks. Over a
	// network whose leader holds fetches in a long poll it must exceed the
	// poll, or every parked fetch would be sent twice.
	FetchTimeoutTicks int64
	// ProposalRetryTicks is how long a leader waits for an AlterPartition
	// answer before it may propose again.
	ProposalRetryTicks int64
	// FlushAlways says the log syncs before data counts (flush=always).
	FlushAlways bool
	// MaxBatchBytes bounds one record batch: produced, replicated or read.
	MaxBatchBytes int
	// MaxMessageBytes is the topic's max.message.bytes when set, or 0: a
	// produced batch larger than it is MESSAGE_TOO_LARGE. It bounds only
	// what producers send; MaxBatchBytes, which the log was opened with,
	// stays the bound for batches replicated or read, and for produced
	// ones when it is the smaller.
	MaxMessageBytes int
	// Compacted says the topic's cleanup.policy holds compact: a produced
	// record without a key is INVALID_RECORD, as Kafka's LogValidator
	// refuses it (the cleaner could never tell what it supersedes).
	Compacted bool
	// Recompress and Codec are the topic's compression.type. Recompress
	// false is producer, Kafka's default: each produced batch is kept as
	// the producer compressed it. Recompress true makes the leader
	// recompress every produced batch in another codec to Codec
	// (record.CompressionNone for uncompressed) before the batch is
	// stamped and appended (record.Recompress), as Kafka's leader does.
	// Followers store the leader's bytes.
	Recompress bool
	Codec      record.Compression
	// MaxDecompressedBatchBytes bounds what a produced compressed batch may
	// inflate to while the leader checks its records: a batch that
	// inflates further is refused with INVALID_RECORD as soon as the limit
	// is passed (record.Limits.MaxDecompressedBatchBytes). Zero means
	// record.DefaultMaxDecompressedBatchBytes (64 MiB).
	MaxDecompressedBatchBytes int
	// MaxPendingProduces bounds the acks=all requests waiting for the ISR.
	MaxPendingProduces int
	// LogAppendTime is message.timestamp.type=LogAppendTime: the leader
	// stamps each produced batch with the produce's AppendTimeMs
	// (record.SetLogAppendTime). False is CreateTime, Kafka's default: the
	// producer's timestamps are kept.
	LogAppendTime bool
	// Rules is the zero value (every rule on) except in the simulator and
	// the scenarios.
	Rules rules.Rules
}

// Validate rejects configurations that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Broker < 0:
		return fmt.Errorf("replica: broker id %d", c.Broker)
	case c.MinInsyncReplicas < 1:
		return fmt.Errorf("replica: min.insync.replicas %d below 1", c.MinInsyncReplicas)
	case c.ReplicaLagTicks < 1 || c.FetchRetryTicks < 1 || c.ProposalRetryTicks < 1 || c.FetchTimeoutTicks < 0:
		return fmt.Errorf("replica: tick intervals must be positive")
	case c.MaxBatchBytes < record.HeaderSize || c.MaxPendingProduces < 1:
		return fmt.Errorf("replica: limits must be positive")
	case c.Codec < record.CompressionNone || c.Codec > record.CompressionZstd:
		return fmt.Errorf("replica: codec %d", c.Codec)
	}
	return c.producerLimits().Validate()
}

// producerLimits are the checks a produced batch gets at the leader, the
// gateway every client batch passes before it reaches the log (STYLE rule
// 6): Kafka's LogValidator for a client's batch, compressed ones opened.
func (c Config) producerLimits() record.Limits {
	limits := record.DefaultLimits()
	limits.MaxBatchBytes = c.MaxBatchBytes
	if c.MaxMessageBytes > 0 {
		limits.MaxBatchBytes = max(min(c.MaxMessageBytes, c.MaxBatchBytes), record.HeaderSize)
	}
	if c.MaxDecompressedBatchBytes != 0 {
		limits.MaxDecompressedBatchBytes = c.MaxDecompressedBatchBytes
	}
	return limits
}

// LogState is what the replica learns from its log when it is created.
type LogState struct {
	LogStartOffset   record.Offset
	LogEndOffset     record.Offset
	DurableEndOffset record.Offset
	HighWatermark    record.Offset
	Epochs           []leaderepoch.Entry
	// ProducerBatches are the headers, in offset order, of the log's
	// batches from idempotent producers (others may be included and are
	// ignored): the replica rebuilds its producer state from them, so that
	// a retry of a batch written before a restart is still recognised as a
	// duplicate (commitlog's ReadHeaders reads them).
	ProducerBatches []record.Header
}

// logView is the replica's view of its log, which includes every storage
// operation it has handed out in a Ready.
type logView struct {
	start   record.Offset
	end     record.Offset
	durable record.Offset
	epochs  leaderepoch.Cache
	// producers is the idempotent producer state of the log as the view
	// has it, or nil after a truncation removed batches it describes,
	// until the caller hands the remaining log to RebuildProducerState.
	producers *producer.State
}

// Replica is one partition replica. It is not safe for concurrent use.
type Replica struct {
	config Config
	now    int64
	log    logView
	// highWatermark is this replica's: on a leader it never decreases; on a
	// follower it follows the leader's and may go back after a failover.
	highWatermark record.Offset
	// highestServedHighWatermark is the largest high watermark this replica
	// ever served as leader: those offsets are committed, and no truncation
	// may ever go below them.
	highestServedHighWatermark record.Offset

	role  Role
	state metadata.PartitionState
	// brokerEpoch is this broker's incarnation, sent with every fetch
	// (KIP-903).
	brokerEpoch metadata.BrokerEpoch
	// nextRequestID numbers the requests this replica sends.
	nextRequestID uint64
	// brokers is the metadata log's view of every broker, for ISR
	// eligibility (KIP-841, KIP-903).
	brokers map[metadata.BrokerID]metadata.BrokerState

	leader   leaderState
	follower followerState
	ready    Ready
}

// New returns a replica of a log in the given state, offline until the
// first partition state arrives.
func New(config Config, log LogState) (*Replica, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	epochs, err := leaderepoch.FromEntries(log.Epochs)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	producers, err := producer.Rebuild(log.ProducerBatches)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if n := len(log.ProducerBatches); n > 0 && (log.ProducerBatches[n-1].NextOffset() > log.LogEndOffset || log.ProducerBatches[0].BaseOffset < log.LogStartOffset) {
		return nil, fmt.Errorf("replica: producer batches [%d, %d) outside the log [%d, %d)", log.ProducerBatches[0].BaseOffset, log.ProducerBatches[n-1].NextOffset(), log.LogStartOffset, log.LogEndOffset)
	}
	if log.LogStartOffset > log.LogEndOffset || log.DurableEndOffset > log.LogEndOffset || log.HighWatermark > log.LogEndOffset {
		return nil, fmt.Errorf("replica: inconsistent log state %+v", log)
	}
	r := &Replica{
		config:        config,
		log:           logView{start: log.LogStartOffset, end: log.LogEndOffset, durable: log.DurableEndOffset, epochs: epochs, producers: producers},
		highWatermark: max(log.HighWatermark, log.LogStartOffset),
		brokers:       map[metadata.BrokerID]metadata.BrokerState{},
		brokerEpoch:   metadata.NoBrokerEpoch,
		state:         metadata.PartitionState{Leader: metadata.NoBroker, LeaderEpoch: record.NoLeaderEpoch, PartitionEpoch: -1},
	}
	return r, nil
}

// Role returns the replica's role.
func (r *Replica) Role() Role { return r.role }

// State returns the partition state the replica acts on.
func (r *Replica) State() metadata.PartitionState { return r.state.Clone() }

// LeaderEpoch is the leader epoch of the partition state applied, without
// State's copy.
func (r *Replica) LeaderEpoch() record.LeaderEpoch { return r.state.LeaderEpoch }

// HighWatermark returns the replica's high watermark.
func (r *Replica) HighWatermark() record.Offset { return r.highWatermark }

// LogEndOffset returns the log end offset, including appends handed out.
func (r *Replica) LogEndOffset() record.Offset { return r.log.end }

// DurableEndOffset returns the last durable end offset reported by Synced.
func (r *Replica) DurableEndOffset() record.Offset { return r.log.durable }

// LogStartOffset returns the log start offset.
func (r *Replica) LogStartOffset() record.Offset { return r.log.start }

// Epochs returns the replica's view of its epoch cache.
func (r *Replica) Epochs() []leaderepoch.Entry { return r.log.epochs.Entries() }

// LeaderEpochStartOffset returns, on a leader, the log end offset at which
// its epoch began.
func (r *Replica) LeaderEpochStartOffset() record.Offset { return r.leader.epochStartOffset }

// HasReady reports whether Ready would return work.
func (r *Replica) HasReady() bool { return !r.ready.Empty() }

// Ready returns the work accumulated since the last call and forgets it.
func (r *Replica) Ready() Ready {
	ready := r.ready
	r.ready = Ready{}
	return ready
}

// Synced reports that the log is durable up to durableEnd. With flush=always
// this is what lets a leader's own data count toward the high watermark and
// a follower fetch past what it appended.
func (r *Replica) Synced(durableEnd record.Offset) {
	if durableEnd > r.log.end {
		r.violate(fmt.Sprintf("synced to %d beyond log end %d", durableEnd, r.log.end))
		durableEnd = r.log.end
	}
	if durableEnd <= r.log.durable {
		return
	}
	r.log.durable = durableEnd
	switch r.role {
	case Leader:
		r.maybeAdvanceHighWatermark()
		r.answerLeaderAcks()
	case Follower:
		r.maybeFetch()
	}
}

// Tick advances the replica's clock by one tick: ISR shrink on a leader,
// produce timeouts, fetch retries on a follower.
func (r *Replica) Tick() {
	r.now++
	switch r.role {
	case Leader:
		r.expireProduces()
		r.answerDeletes()
		r.maybeShrinkISR()
		r.maybeRetryProposal()
	case Follower:
		r.maybeRetryFetch()
	}
}

// SetBrokers replaces the replica's view of the cluster's brokers (from the
// metadata image), used to decide who may join the ISR.
func (r *Replica) SetBrokers(brokers []metadata.BrokerState) {
	r.brokers = make(map[metadata.BrokerID]metadata.BrokerState, len(brokers))
	for _, broker := range brokers {
		r.brokers[broker.ID] = broker
	}
}

// TopicConfig is the part of Config a topic's configs set, which can
// change while the replica lives (SetTopicConfig).
type TopicConfig struct {
	MinInsyncReplicas int
	LogAppendTime     bool
	MaxMessageBytes   int
	Compacted         bool
	Recompress        bool
	Codec             record.Compression
}

// SetTopicConfig applies a live change of the topic's configs, at once,
// as Kafka's leader reads them for each request: the next acks=all
// produce, the next high watermark step and the next produced batch see
// the new values. A lower min.insync.replicas may let the high watermark
// advance now, and the acks waiting for it be answered. The caller applies
// it before any partition state of the same metadata batch (rule
// min-isr-race): a leader must never count an ISR the controller decided
// under a higher min.insync.replicas against a lower one. A
// min.insync.replicas below 1 is a bug of the caller.
func (r *Replica) SetTopicConfig(topic TopicConfig) {
	if topic.MinInsyncReplicas < 1 {
		panic(fmt.Sprintf("replica %s: min.insync.replicas %d", r.config.Partition, topic.MinInsyncReplicas))
	}
	r.config.MinInsyncReplicas, r.config.LogAppendTime = topic.MinInsyncReplicas, topic.LogAppendTime
	r.config.MaxMessageBytes, r.config.Compacted = topic.MaxMessageBytes, topic.Compacted
	r.config.Recompress, r.config.Codec = topic.Recompress, topic.Codec
	if r.role == Leader {
		r.maybeAdvanceHighWatermark()
		r.answerLeaderAcks()
	}
}

// ApplyPartitionState applies the partition's state from the metadata log
// and reports whether it was applied. Rule kafka-4414 (ordered metadata):
// state older than the state held (by partition epoch or leader epoch) is
// ignored, because applying it would move the replica back to a leader or
// ISR the cluster has left behind. Every new leader epoch makes the replica
// become leader or follower again, also when the leader is the same broker
// (KAFKA-7164).
func (r *Replica) ApplyPartitionState(state metadata.PartitionState) bool {
	if state.TopicPartition != r.config.Partition {
		panic(fmt.Sprintf("replica %s: state for %s", r.config.Partition, state.TopicPartition))
	}
	stale := state.PartitionEpoch <= r.state.PartitionEpoch || state.LeaderEpoch < r.state.LeaderEpoch
	if stale && r.config.Rules.On(rules.OrderedMetadata) {
		return false
	}
	if state.LeaderEpoch < r.state.LeaderEpoch {
		r.violate(fmt.Sprintf("leader epoch went backwards from %d to %d", r.state.LeaderEpoch, state.LeaderEpoch))
	}
	previous := r.state
	r.state = state.Clone()
	newEpoch := state.LeaderEpoch != previous.LeaderEpoch
	switch {
	case !state.IsReplica(r.config.Broker):
		r.becomeOffline()
	case state.Leader == r.config.Broker && (newEpoch || r.role != Leader):
		r.becomeLeader()
	case state.Leader == r.config.Broker:
		r.leaderStateChanged()
	case newEpoch || r.role != Follower || r.follower.leader != state.Leader:
		r.becomeFollower()
	}
	return true
}

func (r *Replica) becomeOffline() {
	r.abandonLeadership()
	r.role = Offline
	r.follower = followerState{}
}

// violate handles a broken invariant: with every rule on it is a bug and
// panics; with a rule switched off it is the failure being demonstrated, and
// is recorded for the scenario to show.
func (r *Replica) violate(what string) {
	message := fmt.Sprintf("broker %d %s: %s", r.config.Broker, r.config.Partition, what)
	if r.config.Rules.AllOn() {
		panic("replica: invariant broken: " + message)
	}
	r.ready.Violations = append(r.ready.Violations, message)
}

// truncate hands out a truncation and applies it to the replica's view of
// the log. Truncating below a high watermark this replica served as leader
// would remove committed records: an invariant violation.
//
// Truncating at the log end offset changes only the epoch cache: it drops
// an epoch recorded there with no batch (a leader's KAFKA-7415 entry), which
// would otherwise make this follower claim an epoch the new leader never had.
func (r *Replica) truncate(to record.Offset) {
	latest, hasEpoch := r.log.epochs.Latest()
	if to > r.log.end || (to == r.log.end && (!hasEpoch || latest.StartOffset < to)) {
		return
	}
	if to < r.highestServedHighWatermark {
		r.violate(fmt.Sprintf("truncating to %d, below the high watermark %d it served as leader", to, r.highestServedHighWatermark))
	}
	r.ready.Log = append(r.ready.Log, LogOp{Kind: Truncate, Offset: to})
	if r.log.producers == nil || !r.log.producers.TruncateTo(to) {
		r.log.producers = nil
		r.ready.RebuildProducerState = true
	}
	r.log.end = to
	r.log.durable = min(r.log.durable, to)
	r.log.epochs.TruncateFromEnd(to)
	r.highWatermark = min(r.highWatermark, to)
}

// appendBatches hands out stamped batches and applies them to the view.
func (r *Replica) appendBatches(batches []byte, headers []record.Header) {
	for _, header := range headers {
		if header.BaseOffset != r.log.end {
			panic(fmt.Sprintf("replica %s: batch at %d appended at log end %d", r.config.Partition, header.BaseOffset, r.log.end))
		}
		if r.log.epochs.LatestEpoch() != header.PartitionLeaderEpoch {
			r.log.epochs.Assign(header.PartitionLeaderEpoch, header.BaseOffset)
		}
		r.log.end = header.NextOffset()
		r.producerState().Update(header)
	}
	r.ready.Log = append(r.ready.Log, LogOp{Kind: Append, Batches: batches, Headers: headers})
	if r.config.FlushAlways {
		r.ready.Sync = true
	} else {
		r.log.durable = r.log.end
	}
}

// producerState is the producer state of the log. Using it while a
// rebuild is outstanding is a bug of the caller, which must hand the log to
// RebuildProducerState as soon as a Ready asks: a state that still holds
// truncated batches would answer a retry of one as a duplicate, and
// acknowledge records the log no longer has.
func (r *Replica) producerState() *producer.State {
	if r.log.producers == nil {
		panic(fmt.Sprintf("replica %s: producer state used before RebuildProducerState after a truncation", r.config.Partition))
	}
	return r.log.producers
}

// RebuildProducerState replaces the producer state with one rebuilt from
// the headers, in offset order, of the log's batches (those of idempotent
// producers suffice), as the log is after the truncation a Ready asked it
// for with RebuildProducerState. Headers beyond the replica's log end offset
// mean the caller read another log, and are an error.
func (r *Replica) RebuildProducerState(headers []record.Header) error {
	if n := len(headers); n > 0 && headers[n-1].NextOffset() > r.log.end {
		return fmt.Errorf("replica %s: producer batches end at %d, beyond the log end offset %d", r.config.Partition, headers[n-1].NextOffset(), r.log.end)
	}
	state, err := producer.Rebuild(headers)
	if err != nil {
		return fmt.Errorf("replica %s: %w", r.config.Partition, err)
	}
	r.log.producers = state
	return nil
}

// ProducerState returns the idempotent producer entries, for inspection, or
// false while a rebuild is outstanding.
func (r *Replica) ProducerState() ([]producer.Entry, bool) {
	if r.log.producers == nil {
		return nil, false
	}
	return r.log.producers.Entries(), true
}

// countableEnd is how far this replica's own log counts toward the high
// watermark. Rule unsynced-ack (committed means durable): with flush=always
// only synced data counts, so a power loss of every replica cannot take back
// an acknowledged write.
func (r *Replica) countableEnd() record.Offset {
	if r.config.FlushAlways && r.config.Rules.On(rules.CommittedMeansDurable) {
		return r.log.durable
	}
	return r.log.end
}

// setHighWatermark records a new high watermark and hands it out.
func (r *Replica) setHighWatermark(offset record.Offset) {
	if offset == r.highWatermark {
		return
	}
	r.highWatermark = offset
	value := offset
	r.ready.HighWatermark = &value
}

func containsBroker(list []metadata.BrokerID, id metadata.BrokerID) bool {
	return slices.Contains(list, id)
}

// FollowerLogEndOffset is, on a leader, how far it knows a follower has the
// log in this epoch; false until the follower has fetched in it.
func (r *Replica) FollowerLogEndOffset(id metadata.BrokerID) (record.Offset, bool) {
	if r.role != Leader {
		return 0, false
	}
	progress, ok := r.leader.followers[id]
	if !ok || progress.logEndOffset < 0 {
		return 0, false
	}
	return progress.logEndOffset, true
}

// Debug describes the replica's internal state, for debugging.
func (r *Replica) Debug() string {
	return fmt.Sprintf("leader{%s pending=%v} follower{%s}", r.leader.String(), r.leader.pending, r.follower.String())
}
