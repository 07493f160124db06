package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/tidelog/tide/internal/wire"
)

// kafkaListener is the node's Kafka protocol listener: a goroutine per
// connection frames requests and hands each to the node loop, which serves
// it with the front end (internal/frontend) and hands the answer back.
type kafkaListener struct {
	listener net.Listener
	// advertised is this broker's Kafka address for Metadata; wire the
	// protocol handler's configuration, which the front end takes.
	advertised string
	wire       wire.Config
	// shared is what every connection shares, the request queue among it.
	shared *kafkaShared
	// maxConnections and maxConnectionsPerIP are max.connections and
	// max.connections.per.ip (0: no limit per address).
	maxConnections      int
	maxConnectionsPerIP int
	// perIPOverrides replaces maxConnectionsPerIP for some addresses
	// (max.connections.per.ip.overrides).
	perIPOverrides map[netip.Addr]int
	// refusedConnections and acceptFailed are sampled: a client that
	// reconnects in a loop, or a listener out of descriptors, would
	// otherwise write a line per try.
	refusedConnections *sampledLog
	acceptFailed       *sampledLog
	// conns are the open connections, closed when the node stops, and
	// perIP counts them by client address.
	mu    sync.Mutex
	conns map[*kafkaConn]struct{}
	perIP map[netip.Addr]int
	// closed is set once the node stopped: a connection accepted after
	// closeKafka went through conns is closed at once.
	closed bool
	// caughtUp is set, once, by the node loop when its broker has applied
	// the metadata log as the controller has it (broker.Node.CaughtUp).
	// Until then every connection is closed as it is accepted; see admit.
	caughtUp atomic.Bool
}

func (s *Server) openKafka() error {
	listener := s.config.KafkaListener
	if listener == nil {
		var err error
		if listener, err = net.Listen("tcp", s.config.KafkaListen); err != nil {
			return fmt.Errorf("kafka listener: %w", err)
		}
	}
	advertised := s.config.KafkaListeners[s.config.ID]
	if advertised == "" {
		advertised = listener.Addr().String()
	}
	wireConfig := s.config.wireConfig()
	if err := wireConfig.Validate(); err != nil {
		listener.Close()
		return err
	}
	s.kafka = s.newKafkaListener(listener, advertised, wireConfig)
	return nil
}

func (s *Server) newKafkaListener(listener net.Listener, advertised string, wireConfig wire.Config) *kafkaListener {
	c := s.config
	shared := &kafkaShared{
		limits: kafkaLimits{MaxRequestBytes: c.KafkaMaxRequestBytes, MaxInFlight: c.KafkaMaxInFlight,
			IdleTimeout: c.KafkaIdleTimeout, BodyTimeout: c.KafkaRequestBodyTimeout},
		queue:   newRequestQueue(c.KafkaQueuedMaxRequestBytes, c.KafkaQueuedMaxRequests),
		buffers: &bufferPool{},
		handle:  s.postKafka, log: s.log, node: c.ID,
		refused: newSampledLog(s.log, slog.LevelWarn, "kafka request refused, closing the connection"),
	}
	return &kafkaListener{listener: listener, advertised: advertised, wire: wireConfig, shared: shared,
		maxConnections: c.KafkaMaxConnections, maxConnectionsPerIP: c.KafkaMaxConnectionsPerIP, perIPOverrides: c.KafkaMaxConnectionsPerIPOverrides,
		refusedConnections: newSampledLog(s.log, slog.LevelWarn, "kafka connection refused"),
		acceptFailed:       newSampledLog(s.log, slog.LevelError, "kafka accept failed, retrying"),
		conns:              map[*kafkaConn]struct{}{}, perIP: map[netip.Addr]int{}}
}

// KafkaAddr is the Kafka listener's address.
func (s *Server) KafkaAddr() string { return s.kafka.listener.Addr().String() }

// postKafka hands a request to the node loop. If the node stops first the
// request is answered with nothing, and the connection closes with it.
func (s *Server) postKafka(clientHost string, request []byte, answer func(wire.Response, error)) {
	if s.metrics != nil {
		answer = s.metrics.observeRequest(request, answer)
	}
	if ackTrace.Load() != nil {
		answer = s.traceAnswer(request, answer)
	}
	select {
	case s.inbox <- event{kind: eventKafkaRequest, payload: request, answer: answer, clientHost: clientHost}:
	case <-s.stopped:
		s.kafka.shared.queue.release(int64(len(request)))
	}
}

// traceAnswer marks when the node loop answers a Produce or a Fetch, for
// the acks path's trace (acktrace.go).
func (s *Server) traceAnswer(request []byte, answer func(wire.Response, error)) func(wire.Response, error) {
	step := ackProduceAnswered
	switch apiKey(request) {
	case produceKey:
	case fetchKey:
		step = ackFetchAnswered
	default:
		return answer
	}
	return func(response wire.Response, err error) {
		traceAck(s.config.ID, step)
		answer(response, err)
	}
}

// handleKafka serves one request on the node loop, then gives its room in
// the request queue back: the loop has taken it, and what the request
// still holds (a produce's records until they are appended, the answer)
// is bounded by the cores' own limits.
func (s *Server) handleKafka(e event) {
	s.frontend.HandleKafkaFrom(e.clientHost, e.payload, e.answer)
	switch apiKey(e.payload) {
	case produceKey:
		traceAck(s.config.ID, ackProduceHandled)
	case fetchKey:
		traceAck(s.config.ID, ackFetchHandled)
	}
	s.kafka.shared.queue.release(int64(len(e.payload)))
	if isProduce(e.payload) {
		// A Produce request's bytes are appended to the log, or refused,
		// within the call (frontend.FrontEnd.HandleKafkaFrom): nothing
		// refers to them after it. Other requests' bytes may be kept
		// (a JoinGroup's protocol metadata aliases its request), and are
		// left to the collector.
		s.kafka.shared.buffers.put(e.payload)
	}
}

// closeKafka stops the listener and closes every connection.
func (s *Server) closeKafka() {
	k := s.kafka
	k.listener.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for cn := range k.conns {
		cn.close()
	}
}
