package frontend

import (
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/wire"
)

// Config configures a FrontEnd.
type Config struct {
	ID metadata.BrokerID
	// ClusterID is what Metadata and DescribeCluster name the cluster.
	ClusterID string
	// Advertised is this broker's Kafka address as clients reach it.
	Advertised string
	// KafkaListeners stand in for the Kafka address of a broker that
	// registered none (--kafka-listeners).
	KafkaListeners map[metadata.BrokerID]string
	// DefaultPartitions and DefaultReplicationFactor are num.partitions and
	// default.replication.factor; SegmentBytes and MaxBatchBytes the
	// partition logs' log.segment.bytes and message.max.bytes, which
	// DescribeConfigs reports.
	DefaultPartitions        int
	DefaultReplicationFactor int
	// AutoCreateTopics is auto.create.topics.enable: a Metadata request
	// naming an unknown topic creates it (wire's handleMetadata).
	AutoCreateTopics bool
	SegmentBytes     int64
	MaxBatchBytes    int64
	// RetentionMs and RetentionBytes are log.retention.ms and
	// log.retention.bytes as the node enforces them (broker.Config), for
	// DescribeConfigs: zero means Kafka's defaults (seven days, no limit).
	RetentionMs    int64
	RetentionBytes int64
	// StaticConfigs are the broker configs set on the command line or in
	// the config file, by Kafka's names (log.retention.ms, ...), and
	// DefaultConfigs tide's defaults of the others where they are not
	// Kafka's: DescribeConfigs' STATIC_BROKER_CONFIG and DEFAULT_CONFIG.
	StaticConfigs, DefaultConfigs map[string]string
	// LogDir is the directory holding the partition logs, as
	// DescribeLogDirs names it.
	LogDir string
	// Wire configures the Kafka protocol handler; Random is the source of
	// its response markers (wire.Config.Random).
	Wire wire.Config
	// Fetcher configures the replica fetchers.
	Fetcher fetcher.Config
	// MaxWaitingFetches bounds the fetches held in a long poll; past it a
	// fetch is answered at once with what there is, which is still a valid
	// answer.
	MaxWaitingFetches int
	// Groups configures the group coordinators; nil is Kafka's defaults
	// (group.DefaultConfig).
	Groups *group.Config
	// OffsetsTopicPartitions and OffsetsTopicReplicationFactor are
	// offsets.topic.num.partitions and offsets.topic.replication.factor,
	// which __consumer_offsets is created with; 0 is Kafka's default (50,
	// and 3 or the brokers registered if fewer).
	OffsetsTopicPartitions        int
	OffsetsTopicReplicationFactor int
}

// Validate rejects a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.ID < 0:
		return fmt.Errorf("frontend: broker id %d", c.ID)
	case c.Advertised == "":
		return errors.New("frontend: a broker needs the Kafka address it advertises")
	case c.MaxWaitingFetches < 1:
		return fmt.Errorf("frontend: max waiting fetches %d must be positive", c.MaxWaitingFetches)
	case c.Wire.Random == nil:
		return errors.New("frontend: the wire handler needs a source of randomness")
	case c.OffsetsTopicPartitions < 0 || c.OffsetsTopicReplicationFactor < 0:
		return fmt.Errorf("frontend: offsets topic of %d partitions, replication factor %d", c.OffsetsTopicPartitions, c.OffsetsTopicReplicationFactor)
	}
	if c.Groups != nil {
		if err := c.Groups.Validate(); err != nil {
			return err
		}
	}
	return c.Fetcher.Validate()
}

// FrontEnd is one broker as a runtime drives it. It is not safe for
// concurrent use: every method, and every done callback it calls, runs on
// the runtime's one loop.
type FrontEnd struct {
	config    Config
	lifecycle *broker.Lifecycle
	handler   *wire.Handler
	fetcher   *fetcher.Fetcher
	// now counts Ticks.
	now int64
	// clockMs is the runtime's time (SetClock), -1 until it gives one.
	clockMs int64
	// controllerHint is the active controller as the runtime knows it from
	// a controller of its own (metadata.NoBroker: it knows nothing).
	controllerHint metadata.BrokerID
	// pending are the partition requests handed to the node and not yet
	// answered, by the client id each was given: one id per request, so an
	// answer that names only the client and the partition (the node's
	// UNKNOWN_TOPIC_OR_PARTITION) still finds its caller. The node renumbers
	// produce request ids internally and restores them in its answers.
	pending    map[broker.ClientID]pendingClient
	nextClient broker.ClientID
	// fetches are the fetches waiting for data (Kafka's long poll).
	fetches []*waitingFetch
	// followerHW is the high watermark last sent to each follower for each
	// partition: a parked follower fetch completes once the leader's has
	// moved past it (see fetchRead).
	followerHW map[followerPartition]record.Offset
	// calls are the controller requests in flight, by request id; visible
	// the successful ones waiting for this broker's image to show them.
	calls   map[uint64]*controllerCall
	visible []*visibleWait
	// autoCreating are the topics this broker asked the controller to
	// create for a Metadata request, until answered (at most
	// MaxAutoCreatesInFlight).
	autoCreating map[string]bool
	nextCall     uint64
	// controllerOut are forwarded requests to send.
	controllerOut []broker.Outgoing
	// lastMiss is when a request last named a topic or partition this
	// broker's metadata does not have (see metadataMiss).
	lastMiss int64
	// volume is the log directory's disk as the runtime last measured it
	// (SetVolume), UnknownVolume until then.
	volume Volume
	// groups hosts the group coordinators (groups.go).
	groups groupHost
}

// backend is the FrontEnd seen as wire's Backend: its methods serve the
// requests wire decodes, and are not the runtime's to call.
type backend FrontEnd

// New returns the front end of a broker whose lifecycle is given; the
// lifecycle is the front end's from here on (the runtime ticks it through
// Tick and hands it answers through HandleControllerAnswer).
func New(config Config, lifecycle *broker.Lifecycle) (*FrontEnd, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	if lifecycle == nil {
		return nil, errors.New("frontend: a front end needs the broker's lifecycle")
	}
	f, err := fetcher.New(config.Fetcher)
	if err != nil {
		return nil, err
	}
	fe := &FrontEnd{config: config, lifecycle: lifecycle, fetcher: f, controllerHint: metadata.NoBroker, clockMs: -1, volume: UnknownVolume,
		pending: map[broker.ClientID]pendingClient{}, calls: map[uint64]*controllerCall{},
		autoCreating: map[string]bool{}, groups: newGroupHost(),
		followerHW: map[followerPartition]record.Offset{}}
	handler, err := wire.New(config.Wire, (*backend)(fe))
	if err != nil {
		return nil, err
	}
	fe.handler = handler
	return fe, nil
}

// Lifecycle is the broker's lifecycle, for the runtime's shutdown and its
// status.
func (fe *FrontEnd) Lifecycle() *broker.Lifecycle { return fe.lifecycle }

// Node is the running broker node, nil until registered.
func (fe *FrontEnd) Node() *broker.Node { return fe.lifecycle.Node() }

// SetControllerHint tells the front end which node is the active
// controller, as a controller running beside this broker knows it
// (metadata.NoBroker when the runtime has none, or it knows no leader).
// Without a hint, requests go where the lifecycle sends its own.
func (fe *FrontEnd) SetControllerHint(id metadata.BrokerID) { fe.controllerHint = id }

// SetClock gives the front end the current time in milliseconds since the
// Unix epoch, for its node's retention and segment rolls (broker.Node
// SetClock): the runtime calls it before each Tick, with the wall clock
// (tide serve) or the virtual one (the simulator).
func (fe *FrontEnd) SetClock(nowMs int64) { fe.clockMs = nowMs }

// SetMonotonicClock gives the lifecycle the runtime's monotonic clock in
// milliseconds (broker.Lifecycle SetMonotonicClock), on which the session
// lease is measured: the runtime calls it before each Tick and before it
// hands over requests, so that a request is judged on a fresh clock.
func (fe *FrontEnd) SetMonotonicClock(nowMs int64) { fe.lifecycle.SetMonotonicClock(nowMs) }

// Tick advances time: the lifecycle registers and heartbeats, and ticks the
// node; controller requests are retried or time out; now and then partition
// requests that never got an answer expire; the fetchers give up overdue
// requests.
func (fe *FrontEnd) Tick() {
	fe.now++
	if node := fe.lifecycle.Node(); node != nil && fe.clockMs >= 0 {
		node.SetClock(fe.clockMs)
	}
	fe.lifecycle.Tick()
	fe.tickControllerCalls()
	fe.tickGroups()
	if fe.now%sweepEveryTicks == 0 {
		(*backend)(fe).expirePending()
	}
	fe.deliverPeers(fe.fetcher.Tick())
}

// HandleKafka serves one Kafka request: its header and body as they come
// off a connection, after the size prefix. done is called once, now or
// later, from within a call of the runtime's (see wire.Handler.HandleSpliced).
func (fe *FrontEnd) HandleKafka(request []byte, done func(wire.Response, error)) {
	fe.handler.HandleSpliced(request, done)
}

// HandleKafkaFrom is HandleKafka for a request from clientHost, the
// client's address as Kafka shows it ("/127.0.0.1"), which the group
// coordinators keep with a member (DescribeGroups).
//
// A Produce request's bytes are appended to the partitions' logs, or
// refused, within the call, and nothing refers to them after it: the
// runtime reuses them. The bytes of other requests may be kept (a group
// keeps the protocol metadata of a JoinGroup, a slice of its request).
func (fe *FrontEnd) HandleKafkaFrom(clientHost string, request []byte, done func(wire.Response, error)) {
	fe.handler.HandleSplicedFrom(clientHost, request, done)
}

// HandleControllerAnswer takes an answer from a controller: to a forwarded
// request, or to the lifecycle's. An error means the metadata it carried
// does not apply: the broker must stop.
func (fe *FrontEnd) HandleControllerAnswer(answer quorum.Answer) error {
	if fe.handleForwardedAnswer(answer) {
		return nil
	}
	return fe.lifecycle.HandleAnswer(answer)
}

// ControllerUnsent tells the front end a request it handed out could not
// be sent (no connection to that controller): a forwarded one is sent again
// after a pause. The lifecycle's own requests retry by their timeout.
func (fe *FrontEnd) ControllerUnsent(id uint64) {
	if call, ok := fe.calls[id]; ok && call.resendAt < 0 {
		call.resendAt = fe.now + controllerRetryTicks
	}
}

// FetcherSources lists the brokers this one fetches from, with their
// addresses: the runtime keeps a connection to each.
func (fe *FrontEnd) FetcherSources() []fetcher.Source { return fe.fetcher.Sources() }

// FetcherConnected reports a new connection to a source.
func (fe *FrontEnd) FetcherConnected(source metadata.BrokerID, conn fetcher.ConnID) {
	fe.deliverPeers(fe.fetcher.Connected(source, conn))
}

// FetcherDisconnected reports a connection to a source closed.
func (fe *FrontEnd) FetcherDisconnected(source metadata.BrokerID, conn fetcher.ConnID) {
	fe.deliverPeers(fe.fetcher.Disconnected(source, conn))
}

// FetcherReceived hands the fetcher one response read off a source's
// connection, after its size prefix.
func (fe *FrontEnd) FetcherReceived(source metadata.BrokerID, conn fetcher.ConnID, response []byte) {
	fe.deliverPeers(fe.fetcher.Received(source, conn, response))
}

// FetchErrors counts the partition errors the fetchers got from leaders,
// by Kafka error name.
func (fe *FrontEnd) FetchErrors() map[string]int64 { return fe.fetcher.ErrorCounts() }

func (fe *FrontEnd) deliverPeers(deliveries []fetcher.Delivery) {
	node := fe.Node()
	if node == nil {
		return
	}
	for _, delivery := range deliveries {
		node.HandlePeer(delivery.Source, delivery.Message)
	}
}

// Outbox is what a front end has for the outside after a pass.
type Outbox struct {
	// Controller are requests for controllers: the lifecycle's, then the
	// forwarded ones. A runtime that cannot send one reports it with
	// ControllerUnsent. A request To this broker's own id goes to the
	// controller running beside it.
	Controller []broker.Outgoing
	// Fetcher is what the replica fetchers have to send and close.
	Fetcher fetcher.Outbox
}

// Flush carries what the node has for others to where it goes (answers to
// their requests, fetches to the fetchers, ISR proposals to the lifecycle),
// serves again the waiting fetches that changed, and returns the Outbox.
// The runtime calls it at the end of every pass of its loop, after it
// took the node's sync jobs (broker.Node.TakeSyncs): what the pass let
// out leaves then, and what waits for a sync leaves in the pass that
// hands the node the job's outcome (broker.Node.Synced).
func (fe *FrontEnd) Flush() Outbox {
	(*backend)(fe).drain()
	fe.fetcher.SendAll()
	fe.lifecycle.Collect()
	out := Outbox{Controller: fe.lifecycle.TakeRequests(), Fetcher: fe.fetcher.TakeOutbox()}
	out.Controller = append(out.Controller, fe.controllerOut...)
	fe.controllerOut = nil
	return out
}
