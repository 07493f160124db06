package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/metadata"
)

// epochFile remembers the broker epoch of the last incarnation. With
// flush=always every acknowledged write was synced before it counted, so
// a restart after any stop, kill -9 included, vouches for the log of the
// incarnation that wrote it (KIP-966's PreviousBrokerEpoch).
const epochFile = "broker-epoch"

// metadataFetchMaxWait is how long the active controller holds a broker's
// metadata fetch with nothing new (quorum.FetchMetadataRequest): a KRaft
// broker's fetch of the metadata log waits as long by default
// (replica.fetch.max.wait.ms). A committed record reaches every broker
// one round trip after it commits, whatever the wait.
const metadataFetchMaxWait = 500 * time.Millisecond

func (s *Server) openLifecycle(endpoint string) error {
	previous := metadata.NoBrokerEpoch
	if text, err := os.ReadFile(path.Join(s.config.DataDir, epochFile)); err == nil {
		epoch, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", epochFile, err)
		}
		previous = metadata.BrokerEpoch(epoch)
	}
	c := s.config
	lifecycle, err := broker.NewLifecycle(broker.LifecycleConfig{
		ID: c.ID, Incarnation: fmt.Sprintf("b%d-%d", c.ID, time.Now().UnixNano()), PreviousEpoch: previous, Endpoint: endpoint,
		Voters: c.voters(), HeartbeatTicks: c.ticks(c.BrokerHeartbeat), RequestTimeoutTicks: c.ticks(2 * c.BrokerHeartbeat),
		MaxEntries: 10000, NewNode: s.newNode, MetadataWaitTicks: c.ticks(metadataFetchMaxWait),
		// Nanoseconds since 1970 grow faster than any incarnation numbers
		// requests, so two starts never share ids.
		FirstRequestID: uint64(time.Now().UnixNano()),
		SessionLeaseMs: broker.SessionLease(c.SessionTimeout.Milliseconds(), c.Tick.Milliseconds()),
	})
	if err != nil {
		return err
	}
	s.lifecycle = lifecycle
	s.frontend, err = frontend.New(frontend.Config{ID: c.ID, ClusterID: clusterID(c.Controllers), Advertised: endpoint,
		KafkaListeners: c.KafkaListeners, DefaultPartitions: c.DefaultPartitions, DefaultReplicationFactor: c.DefaultReplicationFactor,
		AutoCreateTopics: !c.DisableAutoCreateTopics, SegmentBytes: c.segmentBytes(), MaxBatchBytes: maxBatchBytes, Wire: s.kafka.wire, Fetcher: c.fetcherConfig(),
		MaxWaitingFetches: c.KafkaMaxWaitingFetches, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes,
		StaticConfigs: c.staticConfigs(), DefaultConfigs: defaultConfigs(),
		LogDir: c.partitionsDir(), Groups: c.Groups,
		OffsetsTopicPartitions: c.OffsetsTopicPartitions, OffsetsTopicReplicationFactor: c.OffsetsTopicReplicationFactor}, lifecycle)
	return err
}

// clusterID names the cluster after its voter set, the same on every node
// and across restarts; tide keeps no cluster id of its own yet.
func clusterID(controllers map[metadata.BrokerID]string) string {
	var text strings.Builder
	for _, id := range (Config{Controllers: controllers}).voters() {
		text.WriteString(strconv.Itoa(int(id)) + "@" + controllers[id] + ",")
	}
	sum := sha256.Sum256([]byte(text.String()))
	return "tide-" + hex.EncodeToString(sum[:8])
}

// The partition logs' sizes, which DescribeConfigs reports as
// log.segment.bytes (the default; Config.SegmentBytes) and
// message.max.bytes.
const (
	segmentBytes  = 64 << 20
	maxBatchBytes = 1 << 20
)

// segmentBytes is log.segment.bytes: Config.SegmentBytes, or 64 MiB.
func (c Config) segmentBytes() int64 {
	if c.SegmentBytes > 0 {
		return c.SegmentBytes
	}
	return segmentBytes
}

// staticConfigs are the log settings this node's configuration sets, by
// Kafka's broker config names: DescribeConfigs shows them as
// STATIC_BROKER_CONFIG, between the cluster-wide dynamic defaults and the
// defaults.
func (c Config) staticConfigs() map[string]string {
	static := map[string]string{}
	set := func(name string, value int64) {
		if value != 0 {
			static[name] = strconv.FormatInt(value, 10)
		}
	}
	set("log.retention.ms", c.RetentionMs)
	set("log.retention.bytes", c.RetentionBytes)
	set("log.segment.bytes", c.SegmentBytes)
	set("log.roll.ms", c.SegmentMs)
	if c.LogAppendTime {
		static["log.message.timestamp.type"] = "LogAppendTime"
	}
	return static
}

// defaultConfigs are tide's defaults that are not Kafka's: smaller
// segments, and message.max.bytes of a whole MiB.
func defaultConfigs() map[string]string {
	return map[string]string{
		"log.segment.bytes": strconv.Itoa(segmentBytes),
		"message.max.bytes": strconv.Itoa(maxBatchBytes),
	}
}

// newNode starts the broker once its incarnation is registered.
func (s *Server) newNode(epoch metadata.BrokerEpoch) *broker.Node {
	if err := s.writeEpoch(epoch); err != nil {
		s.fatal = err
	}
	s.log.Info("registered", "broker-epoch", int64(epoch))
	c := s.config
	return broker.New(broker.Config{
		ID: c.ID, FS: s.fs, Dir: c.partitionsDir(), FlushAlways: true,
		SegmentBytes: c.segmentBytes(), MaxBatchBytes: maxBatchBytes,
		// A follower backs off 100 ms after an error, and gives a fetch up
		// well past the leader's long poll (replicaFetchMaxWait); the
		// fetcher fails requests on a broken connection before that.
		ReplicaLagTicks: c.ticks(30 * time.Second), FetchRetryTicks: c.ticks(100 * time.Millisecond),
		FetchTimeoutTicks:  c.ticks(replicaFetchMaxWait + 2*replicaRequestTimeout),
		ProposalRetryTicks: c.ticks(5 * time.Second), MaxPendingProduces: 10000,
		ZeroCopyReads: !c.CopyFetches, MaxDecompressedBatchBytes: c.MaxDecompressedBatchBytes,
		RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes, SegmentMs: c.SegmentMs, LogAppendTime: c.LogAppendTime,
		RetentionCheckIntervalMs: c.RetentionCheckInterval.Milliseconds(),
	}, epoch)
}

// writeEpoch replaces the epoch file durably.
func (s *Server) writeEpoch(epoch metadata.BrokerEpoch) error {
	return disk.WriteFileAtomically(s.fs, s.config.DataDir, epochFile, []byte(strconv.FormatInt(int64(epoch), 10)+"\n"))
}

// StatusBroker is one broker as a node's metadata has it.
type StatusBroker struct {
	ID           int32  `json:"id"`
	Epoch        int64  `json:"epoch"`
	Fenced       bool   `json:"fenced"`
	ShuttingDown bool   `json:"shutting_down"`
	Endpoint     string `json:"endpoint,omitempty"`
}

// Status is a node's view of the cluster, for operators and tests.
type Status struct {
	ID               int32  `json:"id"`
	Controller       bool   `json:"controller"`
	Active           bool   `json:"active"`
	Term             uint64 `json:"term"`
	Leader           int32  `json:"leader"`
	RaftApplied      uint64 `json:"raft_applied"`
	ControllerOffset int64  `json:"controller_metadata_offset"`
	BrokerEpoch      int64  `json:"broker_epoch"`
	BrokerOffset     int64  `json:"broker_metadata_offset"`
	Fenced           bool   `json:"fenced"`
	// Topics are the topics the broker's metadata holds, and Brokers the
	// brokers.
	Topics  []string       `json:"topics"`
	Brokers []StatusBroker `json:"brokers"`
	// Metadata is the broker's image as text (metadata.Image.Describe).
	Metadata string `json:"metadata"`
	// Partitions are the replicas this broker hosts.
	Partitions []StatusPartition `json:"partitions"`
	// FetchErrors counts the partition errors this broker's fetchers got
	// from leaders, by Kafka error name (FENCED_LEADER_EPOCH: a zombie
	// follower was turned away).
	FetchErrors map[string]int64 `json:"fetch_errors"`
}

// StatusPartition is one hosted replica.
type StatusPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Role          string `json:"role"`
	LeaderEpoch   int32  `json:"leader_epoch"`
	HighWatermark int64  `json:"high_watermark"`
	LogEndOffset  int64  `json:"log_end_offset"`
}

func (s *Server) status() []byte {
	status := Status{ID: int32(s.config.ID), Controller: s.quorum != nil, Leader: -1, BrokerEpoch: int64(s.lifecycle.Epoch()), BrokerOffset: -1}
	if s.quorum != nil {
		status.Active, status.Term, status.Leader = s.quorum.Active(), s.quorum.Term(), int32(s.quorum.Leader())
		status.RaftApplied, status.ControllerOffset = s.quorum.AppliedIndex(), s.quorum.Image().Offset()
	}
	if node := s.lifecycle.Node(); node != nil {
		img := node.Image()
		status.BrokerOffset, status.Topics, status.Metadata = img.Offset(), img.Topics(), img.Describe()
		for _, b := range img.Brokers() {
			status.Brokers = append(status.Brokers, StatusBroker{ID: int32(b.ID), Epoch: int64(b.Epoch), Fenced: b.Fenced, ShuttingDown: b.ShuttingDown,
				Endpoint: img.Endpoint(b.ID)})
		}
		if state, ok := img.Broker(s.config.ID); ok {
			status.Fenced = state.Fenced || state.Epoch != s.lifecycle.Epoch()
		}
		for _, tp := range node.Partitions() {
			r, _, _ := node.Replica(tp)
			status.Partitions = append(status.Partitions, StatusPartition{Topic: tp.Topic, Partition: tp.Partition,
				Role: r.Role().String(), LeaderEpoch: int32(r.State().LeaderEpoch),
				HighWatermark: int64(r.HighWatermark()), LogEndOffset: int64(r.LogEndOffset())})
		}
	}
	status.FetchErrors = s.frontend.FetchErrors()
	text, _ := json.Marshal(status)
	return text
}
