package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/tidelog/tide/internal/group"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/wire"
)

// Config configures one node. Validate rejects bad values; zero durations
// and limits take the defaults.
type Config struct {
	// ID is the node's id (Kafka's node.id), its broker's and, when it is
	// a voter, its controller's.
	ID metadata.BrokerID
	// Controllers is the voter set: id to the host:port of its controller
	// listener. A node in it runs a controller (Kafka's combined mode).
	Controllers map[metadata.BrokerID]string
	// Listen is the address to serve the controller listener on; by
	// default the node's own entry in Controllers.
	Listen string
	// DataDir holds the raft log (metadata/) and the partition logs
	// (partitions/).
	DataDir string
	// Tick is the length of one tick of the cores' clocks.
	Tick time.Duration
	// ElectionTimeout and RaftHeartbeat are the quorum's.
	ElectionTimeout time.Duration
	RaftHeartbeat   time.Duration
	// SessionTimeout is broker.session.timeout.ms: a broker silent for
	// longer is fenced. BrokerHeartbeat is broker.heartbeat.interval.ms.
	SessionTimeout  time.Duration
	BrokerHeartbeat time.Duration
	// ShutdownTimeout bounds a controlled shutdown.
	ShutdownTimeout time.Duration
	// KafkaListen is the address of the Kafka listener, where clients
	// connect; by default this node's entry in KafkaListeners. One of the
	// two is required: a broker clients cannot reach serves nothing.
	KafkaListen string
	// KafkaListeners are brokers' Kafka addresses as clients reach them,
	// id to host:port. This node's entry, if any, is what it advertises
	// (Kafka's advertised.listeners); without one it advertises the
	// address its Kafka listener bound. Each broker registers the address
	// it advertises with the controller, as Kafka's BrokerRegistration
	// carries its listeners, and Metadata lists every broker at its
	// registered address; the other entries here only stand in for a
	// broker that registered none. A broker with neither is left out of
	// Metadata and its replicas reported offline.
	KafkaListeners map[metadata.BrokerID]string
	// ControllerListener and KafkaListener, when set, are listeners
	// already bound to Listen and KafkaListen, which the node serves
	// instead of binding its own: a caller that chose free ports keeps
	// them (tide dev), rather than releasing them for another process to
	// take before the node binds them again. The node closes them.
	ControllerListener net.Listener
	KafkaListener      net.Listener
	// MetricsListen is the address to serve Prometheus metrics on
	// (/metrics), or "" for none; MetricsListener, when set, is a listener
	// already bound to it, as for the two above.
	MetricsListen   string
	MetricsListener net.Listener
	// HTTPListen is the address to serve the web console on, or "" for
	// none; HTTPListener, when set, is a listener already bound to it.
	HTTPListen   string
	HTTPListener net.Listener
	// MetricsGroupPartitionsMax bounds the consumer group series a scrape
	// exports and the console's groups page shows: group partitions (a
	// committed offset of a group; a group with none counts one), whole
	// groups in coordinator then id order, the rest counted in
	// kafka_consumergroup_partitions_omitted. Zero: 10000.
	MetricsGroupPartitionsMax int
	// CopyFetches reads every fetched record into memory, as for records
	// above the high watermark, instead of sending committed ones with
	// sendfile: only to measure what sendfile saves.
	CopyFetches bool
	// DefaultPartitions and DefaultReplicationFactor are what a topic
	// created without them gets (num.partitions and
	// default.replication.factor; KIP-464 lets CreateTopics send -1 for
	// either). A replication factor above the brokers registered at the
	// time refuses the topic with INVALID_REPLICATION_FACTOR, as in Kafka.
	DefaultPartitions        int
	DefaultReplicationFactor int
	// DisableAutoCreateTopics is auto.create.topics.enable=false: by
	// default, as in Kafka, a Metadata request naming a topic that does not
	// exist (and allowing it) creates it with the two defaults above.
	DisableAutoCreateTopics bool
	// OffsetsTopicPartitions and OffsetsTopicReplicationFactor are what
	// __consumer_offsets is created with (offsets.topic.num.partitions and
	// offsets.topic.replication.factor; zero: Kafka's 50 and 3, the factor
	// lowered to the brokers registered when there are fewer). Groups
	// configures the group coordinators (nil: Kafka's defaults,
	// group.DefaultConfig).
	OffsetsTopicPartitions        int
	OffsetsTopicReplicationFactor int
	Groups                        *group.Config
	// NoAutoLeaderRebalance turns off the active controller's leader
	// rebalance (auto.leader.rebalance.enable=false; Kafka's default, and
	// tide's, is on): every LeaderImbalanceCheckInterval
	// (leader.imbalance.check.interval.seconds, zero: Kafka's 300 s) it
	// elects back the preferred replicas of each broker whose share of
	// preferred partitions led by another is above
	// LeaderImbalancePercentage (leader.imbalance.per.broker.percentage,
	// 1 to 100; zero: Kafka's 10). controller.Rebalance is the rule.
	NoAutoLeaderRebalance        bool
	LeaderImbalanceCheckInterval time.Duration
	LeaderImbalancePercentage    int
	// KafkaIdleTimeout closes a Kafka connection that sends no request for
	// that long (connections.max.idle.ms); KafkaMaxInFlight bounds the
	// requests one connection has read and not yet been answered.
	KafkaIdleTimeout time.Duration
	KafkaMaxInFlight int
	// KafkaRequestBodyTimeout closes a connection whose request body
	// stops arriving: each MiB of it must come within this time, since
	// the body holds its room in the request queue from its size prefix
	// on (tide.request.body.timeout.ms; Kafka has none).
	KafkaRequestBodyTimeout time.Duration
	// KafkaMaxConnections bounds the Kafka connections open at once
	// (max.connections), KafkaMaxConnectionsPerIP those from one client
	// address (max.connections.per.ip; 0, the default, sets none, as in
	// Kafka: clients behind one NAT or proxy share an address, and a
	// limit that refuses them is hard to tell from an outage). A
	// connection over either is accepted and closed at once.
	KafkaMaxConnections      int
	KafkaMaxConnectionsPerIP int
	// KafkaMaxConnectionsPerIPOverrides replaces KafkaMaxConnectionsPerIP
	// for the addresses it names (max.connections.per.ip.overrides; 0
	// refuses every connection from that address), so a known proxy or
	// a trusted host can have more than everyone else, or a noisy one
	// fewer.
	KafkaMaxConnectionsPerIPOverrides map[netip.Addr]int
	// KafkaQueuedMaxRequestBytes and KafkaQueuedMaxRequests bound, over
	// every connection, the requests read and not yet taken by the node
	// loop (queued.max.request.bytes, queued.max.requests): at the limit
	// connections stop reading until the loop catches up. Kafka's
	// default for the bytes is no limit; tide's, 256 MiB, holds two
	// requests of the largest size with room to spare, while no stall of
	// the node loop can make requests take more.
	KafkaQueuedMaxRequestBytes int64
	KafkaQueuedMaxRequests     int
	// MaxDecompressedBatchBytes bounds what a produced compressed batch may
	// inflate to (tide.max.decompressed.batch.bytes; a zip bomb is refused
	// with INVALID_RECORD once past it); zero means
	// record.DefaultMaxDecompressedBatchBytes.
	MaxDecompressedBatchBytes int
	// RetentionMs, RetentionBytes and SegmentMs are the broker's
	// log.retention.ms, log.retention.bytes and log.roll.ms for every
	// topic (broker.Config; zero: Kafka's seven days, no limit, seven
	// days), RetentionCheckInterval log.retention.check.interval.ms (zero:
	// five minutes).
	RetentionMs            int64
	RetentionBytes         int64
	SegmentMs              int64
	RetentionCheckInterval time.Duration
	// SegmentBytes is log.segment.bytes (zero: 64 MiB); at least
	// message.max.bytes, 1 MiB, since a segment holds any batch.
	SegmentBytes int64
	// LogAppendTime is log.message.timestamp.type=LogAppendTime for every
	// topic; false is CreateTime.
	LogAppendTime bool
	// KafkaMaxRequestBytes (socket.request.max.bytes), KafkaMaxFetchBytes
	// (fetch.max.bytes), KafkaMaxTopicsPerRequest and
	// KafkaMaxPartitionsPerRequest are wire's limits (wire.Config).
	KafkaMaxRequestBytes         int
	KafkaMaxFetchBytes           int32
	KafkaMaxTopicsPerRequest     int
	KafkaMaxPartitionsPerRequest int
	// KafkaMaxWaitingFetches bounds the fetches the front end holds in a
	// long poll at once (tide.max.waiting.fetches); past it a fetch is
	// answered at once with what there is, still a valid answer.
	KafkaMaxWaitingFetches int
	// MaxFrameBytes bounds one frame on the controller listener; QueueLength
	// bounds each connection's send queue.
	MaxFrameBytes int
	QueueLength   int
	Logger        *slog.Logger
}

// ParseControllers parses Kafka's controller.quorum.voters form:
// "1@host:port,2@host:port,3@host:port".
func ParseControllers(text string) (map[metadata.BrokerID]string, error) {
	return parseAddresses(text, "controller")
}

// ParseKafkaListeners parses the brokers' Kafka addresses in the same form:
// "1@host:9092,2@host:9192".
func ParseKafkaListeners(text string) (map[metadata.BrokerID]string, error) {
	return parseAddresses(text, "kafka listener")
}

func parseAddresses(text, what string) (map[metadata.BrokerID]string, error) {
	addresses := map[metadata.BrokerID]string{}
	for _, item := range strings.Split(text, ",") {
		idText, address, ok := strings.Cut(strings.TrimSpace(item), "@")
		id, err := strconv.Atoi(idText)
		if !ok || err != nil || id < 1 || address == "" || !strings.Contains(address, ":") {
			return nil, fmt.Errorf("%s %q: want id@host:port with id >= 1", what, item)
		}
		if _, twice := addresses[metadata.BrokerID(id)]; twice {
			return nil, fmt.Errorf("%s %d listed twice", what, id)
		}
		addresses[metadata.BrokerID(id)] = address
	}
	return addresses, nil
}

func (c Config) withDefaults() Config {
	defaults := []struct {
		field *time.Duration
		value time.Duration
	}{
		{&c.Tick, 10 * time.Millisecond}, {&c.ElectionTimeout, time.Second}, {&c.RaftHeartbeat, 100 * time.Millisecond},
		{&c.SessionTimeout, 9 * time.Second}, {&c.BrokerHeartbeat, 500 * time.Millisecond}, {&c.ShutdownTimeout, 30 * time.Second},
		{&c.LeaderImbalanceCheckInterval, DefaultLeaderImbalanceCheckInterval},
	}
	for _, d := range defaults {
		if *d.field == 0 {
			*d.field = d.value
		}
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 64 << 20
	}
	if c.QueueLength == 0 {
		c.QueueLength = 4096
	}
	if c.Listen == "" {
		c.Listen = c.Controllers[c.ID]
	}
	if c.KafkaListen == "" {
		c.KafkaListen = c.KafkaListeners[c.ID]
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1 // Kafka's num.partitions
	}
	if c.MetricsGroupPartitionsMax == 0 {
		c.MetricsGroupPartitionsMax = DefaultMetricsGroupPartitionsMax
	}
	if c.LeaderImbalancePercentage == 0 {
		c.LeaderImbalancePercentage = controller.DefaultLeaderImbalancePercentage
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = 1 // Kafka's default.replication.factor
	}
	c = c.withKafkaDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// DefaultMetricsGroupPartitionsMax is MetricsGroupPartitionsMax's
// default: 10000 group partitions are four series each (lag, committed
// offset and, per topic, their sums), a scrape of well under a megabyte.
const DefaultMetricsGroupPartitionsMax = 10000

// DefaultLeaderImbalanceCheckInterval is Kafka's
// leader.imbalance.check.interval.seconds.
const DefaultLeaderImbalanceCheckInterval = 300 * time.Second

// leaderRebalanceTicks is the quorum's LeaderRebalanceTicks: 0, never,
// when the rebalance is off.
func (c Config) leaderRebalanceTicks() int64 {
	if c.NoAutoLeaderRebalance {
		return 0
	}
	return c.ticks(c.LeaderImbalanceCheckInterval)
}

// Defaults for the Kafka listener's limits, Kafka's where Kafka has one.
const (
	DefaultKafkaIdleTimeout           = 10 * time.Minute // Kafka's connections.max.idle.ms
	DefaultKafkaMaxInFlight           = 100              // per connection; Kafka reads one request at a time
	DefaultKafkaMaxConnections        = 1000             // max.connections is unlimited in Kafka
	DefaultKafkaQueuedMaxRequestBytes = 256 << 20        // queued.max.request.bytes is unlimited in Kafka
	DefaultKafkaQueuedMaxRequests     = 500              // Kafka's queued.max.requests
	DefaultKafkaRequestBodyTimeout    = 30 * time.Second // per MiB of a body; Kafka has none
	DefaultKafkaMaxWaitingFetches     = 4096             // Kafka's fetch purgatory has no bound
)

func (c Config) withKafkaDefaults() Config {
	wireDefaults := wire.DefaultConfig()
	if c.KafkaIdleTimeout == 0 {
		c.KafkaIdleTimeout = DefaultKafkaIdleTimeout
	}
	if c.KafkaMaxInFlight == 0 {
		c.KafkaMaxInFlight = DefaultKafkaMaxInFlight
	}
	if c.KafkaRequestBodyTimeout == 0 {
		c.KafkaRequestBodyTimeout = DefaultKafkaRequestBodyTimeout
	}
	if c.KafkaMaxConnections == 0 {
		c.KafkaMaxConnections = DefaultKafkaMaxConnections
	}
	if c.KafkaQueuedMaxRequestBytes == 0 {
		c.KafkaQueuedMaxRequestBytes = DefaultKafkaQueuedMaxRequestBytes
	}
	if c.KafkaQueuedMaxRequests == 0 {
		c.KafkaQueuedMaxRequests = DefaultKafkaQueuedMaxRequests
	}
	if c.KafkaMaxRequestBytes == 0 {
		c.KafkaMaxRequestBytes = wireDefaults.MaxRequestBytes
	}
	if c.KafkaMaxFetchBytes == 0 {
		c.KafkaMaxFetchBytes = wireDefaults.MaxFetchBytes
	}
	if c.KafkaMaxTopicsPerRequest == 0 {
		c.KafkaMaxTopicsPerRequest = wireDefaults.MaxTopicsPerRequest
	}
	if c.KafkaMaxPartitionsPerRequest == 0 {
		c.KafkaMaxPartitionsPerRequest = wireDefaults.MaxPartitionsPerRequest
	}
	if c.KafkaMaxWaitingFetches == 0 {
		c.KafkaMaxWaitingFetches = DefaultKafkaMaxWaitingFetches
	}
	return c
}

// wireConfig is the wire Handler's configuration: its limits and the tick.
func (c Config) wireConfig() wire.Config {
	return wire.Config{MaxRequestBytes: c.KafkaMaxRequestBytes, MaxTopicsPerRequest: c.KafkaMaxTopicsPerRequest,
		MaxPartitionsPerRequest: c.KafkaMaxPartitionsPerRequest, MaxFetchBytes: c.KafkaMaxFetchBytes, Tick: c.Tick,
		Random: rand.Reader}
}

// validateKafkaLimits checks the Kafka listener's limits, naming each by
// its Kafka setting.
func (c Config) validateKafkaLimits() error {
	switch {
	case c.KafkaMaxInFlight < 1:
		return fmt.Errorf("tide.max.in.flight.requests.per.connection %d: want at least 1", c.KafkaMaxInFlight)
	case c.KafkaMaxConnections < 1:
		return fmt.Errorf("max.connections %d: want at least 1", c.KafkaMaxConnections)
	case c.KafkaMaxConnectionsPerIP < 0:
		return fmt.Errorf("max.connections.per.ip %d: want 0 (no limit) or more", c.KafkaMaxConnectionsPerIP)
	case negativeOverride(c.KafkaMaxConnectionsPerIPOverrides) != "":
		return fmt.Errorf("max.connections.per.ip.overrides: %s", negativeOverride(c.KafkaMaxConnectionsPerIPOverrides))
	case c.KafkaIdleTimeout < time.Second:
		return fmt.Errorf("connections.max.idle.ms %s: want at least a second", c.KafkaIdleTimeout)
	case c.KafkaRequestBodyTimeout < time.Second:
		return fmt.Errorf("tide.request.body.timeout.ms %s: want at least a second", c.KafkaRequestBodyTimeout)
	case c.MaxDecompressedBatchBytes < 0 || c.MaxDecompressedBatchBytes > record.MaxDecompressedBatchBytesMax:
		return fmt.Errorf("tide.max.decompressed.batch.bytes %d: want 1 to %d", c.MaxDecompressedBatchBytes, record.MaxDecompressedBatchBytesMax)
	case c.KafkaMaxWaitingFetches < 1:
		return fmt.Errorf("tide.max.waiting.fetches %d: want at least 1", c.KafkaMaxWaitingFetches)
	case c.KafkaQueuedMaxRequests < 1:
		return fmt.Errorf("queued.max.requests %d: want at least 1", c.KafkaQueuedMaxRequests)
	case c.KafkaQueuedMaxRequestBytes < int64(c.KafkaMaxRequestBytes):
		// A request the queue can never hold would wait for room forever;
		// it is refused instead, but a setting that refuses requests the
		// broker otherwise accepts is a mistake.
		return fmt.Errorf("queued.max.request.bytes %d: want at least socket.request.max.bytes (%d)", c.KafkaQueuedMaxRequestBytes, c.KafkaMaxRequestBytes)
	case c.KafkaMaxFetchBytes < 1:
		return fmt.Errorf("fetch.max.bytes %d: want at least 1", c.KafkaMaxFetchBytes)
	case c.KafkaMaxTopicsPerRequest < 1 || c.KafkaMaxPartitionsPerRequest < c.KafkaMaxTopicsPerRequest:
		return fmt.Errorf("tide.max.topics.per.request %d and tide.max.partitions.per.request %d: want at least 1 topic, and at least as many partitions as topics",
			c.KafkaMaxTopicsPerRequest, c.KafkaMaxPartitionsPerRequest)
	}
	if err := c.wireConfig().Validate(); err != nil {
		// What is left is socket.request.max.bytes's range.
		return fmt.Errorf("socket.request.max.bytes %d: %w", c.KafkaMaxRequestBytes, err)
	}
	return nil
}

// maxDefaultPartitions bounds DefaultPartitions: a topic's default may not
// exceed what one CreateTopics request may create.
const maxDefaultPartitions = wire.DefaultMaxPartitionsPerRequest

// Validate rejects configurations that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.ID < 1:
		return fmt.Errorf("node id %d: ids start at 1", c.ID)
	case len(c.Controllers) == 0:
		return errors.New("no controllers: give the voter set as id@host:port,…")
	case c.DataDir == "":
		return errors.New("no data directory")
	case c.Listen == "":
		return errors.New("a node that is not a controller still needs --listen for now")
	case c.KafkaListen == "":
		return errors.New("no Kafka listener: give --kafka-listen host:port, or this node's entry in --kafka-listeners")
	case unroutable(c.KafkaListen) && unroutable(c.KafkaListeners[c.ID]):
		return fmt.Errorf("--kafka-listen %s binds every interface, which no client can dial: say where clients reach this broker with --kafka-listeners %d@host:port (Kafka's advertised.listeners)", c.KafkaListen, c.ID)
	case c.DefaultPartitions < 1 || c.DefaultPartitions > maxDefaultPartitions:
		return fmt.Errorf("default partitions %d: want 1 to %d, what one CreateTopics may create", c.DefaultPartitions, maxDefaultPartitions)
	case c.DefaultReplicationFactor < 1 || c.DefaultReplicationFactor > math.MaxInt16:
		return fmt.Errorf("default replication factor %d: want 1 to %d (an int16 on the wire)", c.DefaultReplicationFactor, math.MaxInt16)
	case c.ElectionTimeout <= c.RaftHeartbeat || c.RaftHeartbeat < c.Tick:
		return fmt.Errorf("election timeout %s must exceed the raft heartbeat %s, itself at least a tick (%s)", c.ElectionTimeout, c.RaftHeartbeat, c.Tick)
	case c.SessionTimeout <= c.BrokerHeartbeat || c.BrokerHeartbeat < c.Tick:
		return fmt.Errorf("session timeout %s must exceed the broker heartbeat %s, itself at least a tick", c.SessionTimeout, c.BrokerHeartbeat)
	case c.LeaderImbalanceCheckInterval < c.Tick || c.LeaderImbalancePercentage < 1 || c.LeaderImbalancePercentage > 100:
		return fmt.Errorf("leader imbalance check every %s above %d%%: want at least a tick (%s) and 1 to 100%%",
			c.LeaderImbalanceCheckInterval, c.LeaderImbalancePercentage, c.Tick)
	case c.MetricsGroupPartitionsMax < 0:
		return fmt.Errorf("metrics group partitions max %d: want at least 1 (0 for the default %d)", c.MetricsGroupPartitionsMax, DefaultMetricsGroupPartitionsMax)
	case c.MaxFrameBytes < 1<<20 || c.QueueLength < 16:
		return errors.New("frames of at least 1 MiB and queues of at least 16")
	case c.OffsetsTopicPartitions < 0 || c.OffsetsTopicReplicationFactor < 0 || c.OffsetsTopicReplicationFactor > math.MaxInt16:
		return fmt.Errorf("offsets topic of %d partitions, replication factor %d", c.OffsetsTopicPartitions, c.OffsetsTopicReplicationFactor)
	}
	if c.Groups != nil {
		if err := c.Groups.Validate(); err != nil {
			return err
		}
	}
	if err := c.validateLogDefaults(); err != nil {
		return err
	}
	return c.validateKafkaLimits()
}

// validateLogDefaults checks the static log settings against Kafka's
// ranges for their broker configs (internal/logconfig). Zero leaves one
// unset; an explicit zero, which Kafka would take literally (delete at
// once, roll at every batch), is refused rather than read as unset.
func (c Config) validateLogDefaults() error {
	for _, setting := range []struct {
		name  string
		value int64
	}{{"log.retention.ms", c.RetentionMs}, {"log.retention.bytes", c.RetentionBytes}, {"log.segment.bytes", c.SegmentBytes}, {"log.roll.ms", c.SegmentMs}} {
		if setting.value == 0 {
			continue
		}
		if err := logconfig.ValidateBroker(setting.name, strconv.FormatInt(setting.value, 10)); err != nil {
			return err
		}
	}
	return nil
}

// unroutable reports an address a broker could not advertise: none, a
// wildcard host (0.0.0.0, ::) or no host at all (":9092").
func unroutable(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return true
	}
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// voters returns the voter ids in order.
func (c Config) voters() []metadata.BrokerID {
	ids := make([]metadata.BrokerID, 0, len(c.Controllers))
	for id := range c.Controllers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// ticks converts a duration to ticks, at least one.
func (c Config) ticks(d time.Duration) int64 { return max(1, int64(d/c.Tick)) }

// peerUnackedTimeout is how long a connection between brokers may leave
// data unacknowledged before it is given up and redialed: a session. A
// peer that acknowledges nothing for that long has been fenced anyway.
func (c Config) peerUnackedTimeout() time.Duration { return c.SessionTimeout }

func negativeOverride(overrides map[netip.Addr]int) string {
	for _, address := range slices.SortedFunc(maps.Keys(overrides), netip.Addr.Compare) {
		if overrides[address] < 0 {
			return fmt.Sprintf("%s:%d: want 0 (no connections) or more", address, overrides[address])
		}
	}
	return ""
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides, as
// Kafka writes it: host:count pairs separated by commas, a host being an
// IP address or a name that resolve turns into its addresses (every one
// of them gets the count; a later pair wins). An IPv6 address goes in
// brackets.
func ParseConnectionOverrides(text string, resolve func(host string) ([]netip.Addr, error)) (map[netip.Addr]int, error) {
	overrides := map[netip.Addr]int{}
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		colon := strings.LastIndex(item, ":")
		if colon <= 0 {
			return nil, fmt.Errorf("%q: want host:count", item)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(item[:colon], "["), "]")
		count, err := strconv.Atoi(item[colon+1:])
		if err != nil || count < 0 {
			return nil, fmt.Errorf("%q: want a count of 0 or more after the colon", item)
		}
		addresses := []netip.Addr{}
		if address, err := netip.ParseAddr(host); err == nil {
			addresses = append(addresses, address.Unmap())
		} else if addresses, err = resolve(host); err != nil || len(addresses) == 0 {
			return nil, fmt.Errorf("%q: %s is neither an IP address nor a name that resolves (%v)", item, host, err)
		}
		for _, address := range addresses {
			overrides[address.Unmap()] = count
		}
	}
	return overrides, nil
}
