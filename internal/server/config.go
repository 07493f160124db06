package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidelog/tide/internal/metadata"
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
	// KafkaIdleTimeout closes a Kafka connection that sends no request for
	// that long (connections.max.idle.ms); KafkaMaxInFlight bounds the
	// requests one connection has read and not yet been answered, and
	// KafkaMaxConnections the connections open at once (max.connections).
	KafkaIdleTimeout    time.Duration
	KafkaMaxInFlight    int
	KafkaMaxConnections int
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
	if c.KafkaIdleTimeout == 0 {
		c.KafkaIdleTimeout = 10 * time.Minute // Kafka's connections.max.idle.ms
	}
	if c.KafkaMaxInFlight == 0 {
		c.KafkaMaxInFlight = 100
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1 // Kafka's num.partitions
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = 1 // Kafka's default.replication.factor
	}
	if c.KafkaMaxConnections == 0 {
		c.KafkaMaxConnections = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
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
	case c.KafkaMaxInFlight < 1 || c.KafkaMaxConnections < 1 || c.KafkaIdleTimeout < time.Second:
		return errors.New("kafka connections need at least one request in flight, one connection and an idle timeout of a second")
	case c.DefaultPartitions < 1 || c.DefaultPartitions > maxDefaultPartitions:
		return fmt.Errorf("default partitions %d: want 1 to %d, what one CreateTopics may create", c.DefaultPartitions, maxDefaultPartitions)
	case c.DefaultReplicationFactor < 1 || c.DefaultReplicationFactor > math.MaxInt16:
		return fmt.Errorf("default replication factor %d: want 1 to %d (an int16 on the wire)", c.DefaultReplicationFactor, math.MaxInt16)
	case c.ElectionTimeout <= c.RaftHeartbeat || c.RaftHeartbeat < c.Tick:
		return fmt.Errorf("election timeout %s must exceed the raft heartbeat %s, itself at least a tick (%s)", c.ElectionTimeout, c.RaftHeartbeat, c.Tick)
	case c.SessionTimeout <= c.BrokerHeartbeat || c.BrokerHeartbeat < c.Tick:
		return fmt.Errorf("session timeout %s must exceed the broker heartbeat %s, itself at least a tick", c.SessionTimeout, c.BrokerHeartbeat)
	case c.MaxFrameBytes < 1<<20 || c.QueueLength < 16:
		return errors.New("frames of at least 1 MiB and queues of at least 16")
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
