package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"time"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/raftlog"
	"github.com/tidelog/tide/internal/wire"
)

// Server is one running node.
type Server struct {
	config    Config
	log       *slog.Logger
	fs        disk.FS
	storage   *raftlog.Storage
	quorum    *quorum.Quorum // nil when the node is not a voter
	lifecycle *broker.Lifecycle
	listener  net.Listener
	kafka     *kafkaListener
	// frontend is the broker as the loop drives it: the Kafka front end,
	// the lifecycle and the replica fetchers; nil until New opened it.
	frontend *frontend.FrontEnd
	// dialers keep the replica fetchers' connections to source brokers,
	// fetcherConns the live ones by the id the front end knows them by.
	dialers      map[metadata.BrokerID]*dialer
	fetcherConns map[fetcher.ConnID]*clientConn
	// ctx ends when the node stops; the dialers run until then.
	ctx   context.Context
	links map[metadata.BrokerID]*link
	// brokers are the connections brokers opened to this node's
	// controller, by broker id, for sending their answers back.
	brokers map[metadata.BrokerID]*conn
	inbox   chan event
	stopped chan struct{}
	// brokerDone closes when the broker's controlled shutdown completed
	// after ShutdownBroker, while the node goes on serving its controller.
	brokerDone chan struct{}
	// volumeMeasuredMs is when the loop last measured the partition
	// directory's volume (measureVolume).
	volumeMeasuredMs int64
	// metrics are the node's Prometheus metrics, nil unless served
	// (Config.MetricsListen): unserved, they cost the hot path nothing.
	metrics         *nodeMetrics
	metricsListener net.Listener
	consoleListener net.Listener
	// narrator tells the committed metadata in the log while this node is
	// the active controller (narrateMetadata), from narratedOffset on;
	// knownController is the active controller last logged, and
	// observedNode the broker whose replicas observeReplicas watches.
	narrator        *metadata.Narrator
	narratedOffset  int64
	knownController metadata.BrokerID
	observedNode    *broker.Node
	// fatal is the first error of a core (a metadata record that does not
	// apply): the node stops.
	fatal error
	// syncs runs the broker's log syncs off the node loop (syncer.go).
	syncs syncer
	// started is when the server was made; the time since, read from Go's
	// monotonic clock, is the front end's monotonic clock (its session
	// lease, rule coordinator-lease), which neither wall-clock steps nor
	// ticks the loop was too busy to take can move.
	started time.Time
}

// event is what the goroutines hand the node loop.
type event struct {
	kind    int
	from    metadata.BrokerID
	conn    *conn
	link    *link
	frame   byte
	payload []byte
	// answer takes the response to a Kafka request (eventKafkaRequest).
	answer func(wire.Response, error)
	// clientHost is a Kafka request's client address ("/127.0.0.1").
	clientHost string
	// source, fetcherConn and client are a replica fetcher's source, the
	// connection's id and the connection.
	source      metadata.BrokerID
	fetcherConn fetcher.ConnID
	client      *clientConn
	// call runs on the node loop (eventCall): a reader of the cores from
	// another goroutine (onLoop).
	call func()
	// sync and syncErr are a log sync's job and outcome (eventSynced).
	sync    syncJob
	syncErr error
}

const (
	eventFrame = iota
	eventConnUp
	eventConnDown
	eventLinkUp
	eventLinkDown
	eventKafkaRequest
	eventFetcherUp
	eventFetcherDown
	eventFetcherResponse
	eventShutdownBroker
	eventCall
	eventSynced
)

// New opens a node's storage and its listener; Run runs it.
func New(config Config) (s *Server, err error) {
	defer func() {
		// Listeners handed in are the node's from here on, even when it
		// does not start.
		if err != nil {
			for _, l := range []net.Listener{config.ControllerListener, config.KafkaListener, config.MetricsListener, config.HTTPListener} {
				if l != nil {
					l.Close()
				}
			}
		}
	}()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	config = config.withDefaults()
	s = &Server{started: time.Now(), config: config, log: config.Logger.With("node", int(config.ID)), fs: disk.OS(),
		links: map[metadata.BrokerID]*link{}, brokers: map[metadata.BrokerID]*conn{},
		inbox: make(chan event, 1024), stopped: make(chan struct{}), brokerDone: make(chan struct{}),
		dialers: map[metadata.BrokerID]*dialer{}, fetcherConns: map[fetcher.ConnID]*clientConn{}, ctx: context.Background()}
	if err := s.openMetrics(); err != nil {
		return nil, err
	}
	if err := s.fs.MkdirAll(config.DataDir); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if _, voter := config.Controllers[config.ID]; voter {
		if err := s.openQuorum(); err != nil {
			return nil, err
		}
	}
	listener := config.ControllerListener
	if listener == nil {
		var err error
		if listener, err = net.Listen("tcp", config.Listen); err != nil {
			s.closeStorage()
			return nil, fmt.Errorf("controller listener: %w", err)
		}
	}
	s.listener = listener
	if err := s.openKafka(); err != nil {
		listener.Close()
		s.closeStorage()
		return nil, err
	}
	// The broker registers the address its Kafka listener is reached at,
	// which the listener knows once bound.
	if err := s.openLifecycle(s.kafka.advertised); err != nil {
		s.kafka.listener.Close()
		listener.Close()
		s.closeStorage()
		return nil, err
	}
	for _, id := range config.voters() {
		if id != config.ID {
			s.links[id] = &link{to: id, address: config.Controllers[id], server: s}
		}
	}
	return s, nil
}

func (s *Server) openQuorum() error {
	storage, err := raftlog.Open(raftlog.Config{FS: s.fs, Dir: path.Join(s.config.DataDir, "metadata")})
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	if report := storage.Recovery(); report != (raftlog.RecoveryReport{}) {
		s.log.Info("metadata log recovered", "report", fmt.Sprintf("%+v", report))
	}
	s.storage = storage
	c := s.config
	s.quorum, err = quorum.New(quorum.Config{ID: c.ID, Voters: c.voters(), Storage: storage,
		ElectionTicks: int(c.ticks(c.ElectionTimeout)), HeartbeatTicks: int(c.ticks(c.RaftHeartbeat)),
		SessionTimeoutTicks: c.ticks(c.SessionTimeout), SnapshotEntries: 10000, MaxHistoryEntries: 20000,
		MaxWaitingAnswers: 10000, MaxEntryBytes: 512 << 10, Logger: raftLogger{s.log}, Random: rand.Reader,
		MaxMetadataWaitTicks: c.ticks(metadataFetchMaxWait),
		LeaderRebalanceTicks: c.leaderRebalanceTicks(), LeaderImbalancePercentage: c.LeaderImbalancePercentage})
	if err != nil {
		storage.Close()
		return err
	}
	return nil
}

// Addr is the controller listener's address.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run runs the node until ctx ends, then performs a controlled shutdown
// (bounded by ShutdownTimeout) and closes everything.
func (s *Server) Run(ctx context.Context) error {
	loopCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.acceptLoop(loopCtx)
	go s.acceptKafka(loopCtx)
	s.ctx = loopCtx
	for _, l := range s.links {
		go l.dialLoop(loopCtx)
	}
	if s.metricsListener != nil {
		go serveHTTP(loopCtx, s.metricsListener, s.metrics.handler())
	}
	if s.consoleListener != nil {
		go serveHTTP(loopCtx, s.consoleListener, s.consoleHandler(loopCtx))
	}
	s.startSyncWorkers()
	s.log.Info("serving", "listen", s.Addr(), "kafka", s.KafkaAddr(), "metrics", s.MetricsAddr(), "http", s.HTTPAddr(), "controllers", fmt.Sprint(s.config.Controllers), "data", s.config.DataDir)
	err := s.loop(ctx)
	cancel()
	close(s.stopped)
	s.listener.Close()
	s.closeKafka()
	closeErr := s.close() // waits for a running sync; queued ones become no-ops
	s.stopSyncWorkers()
	return errors.Join(err, closeErr)
}

func (s *Server) close() error {
	var errs []error
	if node := s.lifecycle.Node(); node != nil {
		errs = append(errs, node.Close())
	}
	errs = append(errs, s.closeStorage())
	return errors.Join(errs...)
}

func (s *Server) closeStorage() error {
	if s.storage == nil {
		return nil
	}
	return s.storage.Close()
}

// ShutdownBroker starts the broker's controlled shutdown while the node
// keeps running its controller, so that several nodes stopping together
// (tide dev) keep their quorum until every broker has moved its
// leaderships; BrokerDone closes once it completed. Ending Run's context
// then stops the node at once.
func (s *Server) ShutdownBroker() { s.post(event{kind: eventShutdownBroker}) }

// BrokerDone closes when the controlled shutdown ShutdownBroker started
// has completed.
func (s *Server) BrokerDone() <-chan struct{} { return s.brokerDone }

// loop is the node loop: the only goroutine that touches the cores.
func (s *Server) loop(ctx context.Context) error {
	ticker := time.NewTicker(s.config.Tick)
	defer ticker.Stop()
	var deadline <-chan time.Time
	done := ctx.Done()
	shutdown := func() {
		if deadline == nil {
			s.log.Info("controlled shutdown")
			s.lifecycle.BeginShutdown()
			deadline = time.After(s.config.ShutdownTimeout)
		}
	}
	brokerDone, timedOut := false, false
	for {
		select {
		case <-ticker.C:
			s.tick()
		case e := <-s.inbox:
			if e.kind == eventShutdownBroker {
				shutdown()
				break
			}
			s.handle(e)
			s.handleQueued(shutdown)
		case <-done:
			done = nil
			if timedOut {
				return nil
			}
			shutdown()
		case <-deadline:
			if done != nil {
				s.log.Warn("controlled shutdown timed out; the controller goes on until the node stops")
				deadline, timedOut = make(chan time.Time), true // fires no more
				break
			}
			s.log.Warn("controlled shutdown timed out; stopping anyway")
			return nil
		}
		if err := s.flush(); err != nil {
			return err
		}
		s.maybeServeClients()
		if s.lifecycle.ShutDown() {
			if done == nil {
				s.log.Info("controlled shutdown complete")
				return nil
			}
			if !brokerDone {
				brokerDone = true
				s.log.Info("controlled shutdown complete; the controller goes on until the node stops")
				close(s.brokerDone)
			}
		}
		if done == nil && s.lifecycle.TicksSinceAnswer() > s.config.ticks(s.config.SessionTimeout) {
			// With no controller to move its leaderships, waiting longer
			// changes nothing: the session expiry will fence it instead.
			s.log.Warn("no active controller answers; stopping without a controlled shutdown")
			return nil
		}
	}
}

// maybeServeClients opens the Kafka listener to clients once the broker
// has caught up with the metadata log (see kafkaListener.admit).
func (s *Server) maybeServeClients() {
	if s.kafka.caughtUp.Load() {
		return
	}
	if node := s.lifecycle.Node(); node != nil && node.CaughtUp() {
		s.kafka.caughtUp.Store(true)
		s.log.Info("caught up with the metadata log: serving Kafka clients", "metadata-offset", node.MetadataOffset())
	}
}

// maxEventsPerPass bounds the events one pass of the node loop takes
// before it starts its syncs and flushes: requests that arrive together share one
// fsync per log (group commit), and a steady stream of events still gets
// its acks out after a bounded batch.
const maxEventsPerPass = 256

// handleQueued takes the events already waiting, up to maxEventsPerPass,
// without blocking: the rest of the pass.
func (s *Server) handleQueued(shutdown func()) {
	for range maxEventsPerPass {
		select {
		case e := <-s.inbox:
			if e.kind == eventShutdownBroker {
				shutdown()
				continue
			}
			s.handle(e)
		default:
			return
		}
	}
}

func (s *Server) tick() {
	if s.quorum != nil {
		s.quorum.Tick()
	}
	s.frontend.SetControllerHint(s.controllerHint())
	nowMs := time.Now().UnixMilli()
	s.frontend.SetClock(nowMs)
	s.frontend.SetMonotonicClock(time.Since(s.started).Milliseconds())
	s.measureVolume(nowMs)
	s.frontend.Tick() // the node's Tick runs the log cleaner, on nowMs
}

// controllerHint is the active controller as this node's own controller
// knows it: itself when active, else the raft leader, else none.
func (s *Server) controllerHint() metadata.BrokerID {
	switch {
	case s.quorum == nil:
		return metadata.NoBroker
	case s.quorum.Active():
		return s.config.ID
	}
	return s.quorum.Leader()
}

// handle takes one event from a connection.
func (s *Server) handle(e event) {
	if s.frontend != nil {
		s.frontend.SetMonotonicClock(time.Since(s.started).Milliseconds())
	}
	switch e.kind {
	case eventLinkUp:
		e.link.current = e.conn
	case eventLinkDown:
		if e.link.current == e.conn {
			e.link.current = nil
		}
	case eventConnUp:
		// Brokers say hello with their id; admin clients with a negative
		// one of their own choosing.
		s.brokers[e.from] = e.conn
	case eventConnDown:
		if s.brokers[e.from] == e.conn {
			delete(s.brokers, e.from)
		}
	case eventFrame:
		s.handleFrame(e)
	case eventKafkaRequest:
		s.handleKafka(e)
	case eventFetcherUp, eventFetcherDown, eventFetcherResponse:
		s.handleFetcherEvent(e)
	case eventCall:
		e.call()
	case eventSynced:
		s.handleSynced(e)
	}
}

func (s *Server) handleFrame(e event) {
	switch e.frame {
	case frameRaft:
		var message raftpb.Message
		if err := proto.Unmarshal(e.payload, &message); err != nil || s.quorum == nil {
			s.log.Debug("dropped a raft message", "from", e.from, "error", err)
			return
		}
		if err := s.quorum.Step(&message); err != nil {
			s.log.Debug("raft refused a message", "from", e.from, "error", err)
		}
	case frameRequest:
		request, err := quorum.DecodeRequest(e.payload)
		if err != nil || s.quorum == nil || request.From != e.from {
			s.log.Debug("dropped a controller request", "from", e.from, "error", err)
			return
		}
		s.handleRequest(request)
	case frameAnswer:
		answer, err := quorum.DecodeAnswer(e.payload)
		if err != nil {
			s.log.Debug("dropped a controller answer", "from", e.from, "error", err)
			return
		}
		s.handleAnswer(answer)
	case frameStatus:
		e.conn.send(frameStatus, s.status())
	default:
		s.log.Debug("unknown frame", "from", e.from, "type", e.frame)
	}
}

func (s *Server) handleRequest(request quorum.Request) {
	if err := s.quorum.HandleRequest(request); err != nil {
		s.fatal = err
	}
}

func (s *Server) handleAnswer(answer quorum.Answer) {
	if err := s.frontend.HandleControllerAnswer(answer); err != nil {
		s.fatal = err
	}
}

// flush ends a pass of the node loop. What the pass let out goes out
// first, written by the loop itself as far as the sockets take it at once
// (writeNow): the records it appended, to the followers whose fetches
// wait for them, so a follower copies and syncs a batch while its leader
// syncs the same batch; what earlier syncs let out (acks=all answers, the
// followers' next fetches); requests to controllers. Then the logs the
// pass wrote get their sync jobs, one per log (group commit,
// broker.Node.TakeSyncs), which the I/O workers start on at once
// (syncer.go), and every quorum Ready is carried out. The answers go
// before the syncs start because the follower's copy, its fsync and its
// next fetch are the longer path to an acks=all answer than the leader's
// own fsync: a worker woken first would take a CPU the loop's writes
// need (docs/benchmarks.md, "One acknowledged write"). Rule unsynced-ack
// keeps its meaning: the replicas count a log end only once a completed
// job (eventSynced) says it is durable, and hold back what depends on it.
func (s *Server) flush() error {
	traceAck(s.config.ID, ackFlush)
	s.flushFrontEnd()
	if node := s.lifecycle.Node(); node != nil {
		s.startSyncs(node)
	}
	for s.quorum != nil && s.quorum.HasReady() && s.fatal == nil {
		if err := s.carryOut(s.quorum.Ready()); err != nil {
			return err
		}
	}
	s.narrateMetadata()
	s.observeReplicas()
	return s.fatal
}

// flushFrontEnd carries out what the front end has for the outside now.
func (s *Server) flushFrontEnd() {
	s.frontend.SetControllerHint(s.controllerHint())
	out := s.frontend.Flush()
	s.carryOutFetcher(out)
	for _, request := range out.Controller {
		if request.To == s.config.ID && s.quorum != nil {
			s.handleRequest(request.Request)
			continue
		}
		if l := s.links[request.To]; l == nil || !l.send(frameRequest, quorum.EncodeRequest(nil, request.Request)) {
			s.frontend.ControllerUnsent(request.Request.ID)
		}
	}
}

// carryOut carries out one Ready in its contract's order: persist, then
// send, then answer and snapshot, then advance.
func (s *Server) carryOut(rd quorum.Ready) error {
	if err := rd.Persist(s.storage); err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	for _, message := range rd.Messages {
		payload, err := proto.Marshal(message)
		if err != nil {
			return fmt.Errorf("encoding a raft message: %w", err)
		}
		if l := s.links[metadata.BrokerID(message.GetTo())]; l != nil {
			l.send(frameRaft, payload)
		}
	}
	for _, answer := range rd.Answers {
		switch {
		case answer.To == s.config.ID:
			s.handleAnswer(answer)
		case s.brokers[answer.To] != nil:
			s.brokers[answer.To].send(frameAnswer, quorum.EncodeAnswer(nil, answer))
		}
	}
	if err := rd.StoreSnapshot(s.storage); err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	return s.quorum.Advance()
}
