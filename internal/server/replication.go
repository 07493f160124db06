package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/metadata"
)

// Replication between brokers runs over the Kafka protocol, as Kafka's
// does: the front end's replica fetcher (internal/fetcher) decides what to
// ask each leader and reads its answers; the server only keeps one
// connection per source broker, carries the fetcher's bytes over it and
// hands back what comes in.
const (
	// replicaFetchMaxWait is replica.fetch.wait.max.ms, replicaFetchMinBytes
	// replica.fetch.min.bytes and replicaFetchMaxBytes
	// replica.fetch.response.max.bytes.
	replicaFetchMaxWait  = 500 * time.Millisecond
	replicaFetchMinBytes = 1
	replicaFetchMaxBytes = 10 << 20
	// replicaRequestTimeout bounds a request's wait for its response beyond
	// the long poll (replica.socket.timeout.ms): past it the connection is
	// closed and its requests fail, so a paused leader cannot hold its
	// followers forever.
	replicaRequestTimeout = 10 * time.Second
	// maxReplicaResponseBytes bounds a response a fetcher connection reads.
	maxReplicaResponseBytes = 2*replicaFetchMaxBytes + 1<<20
)

// fetcherConfig is the replica fetchers' configuration, in the node's
// ticks.
func (c Config) fetcherConfig() fetcher.Config {
	return fetcher.Config{Broker: c.ID, MaxWaitMillis: int32(replicaFetchMaxWait / time.Millisecond),
		MinBytes: replicaFetchMinBytes, MaxBytes: replicaFetchMaxBytes,
		FetchTimeoutTicks: c.ticks(replicaFetchMaxWait + replicaRequestTimeout), RequestTimeoutTicks: c.ticks(replicaRequestTimeout),
		MaxResponseBytes: maxReplicaResponseBytes}
}

// dialer keeps a connection up to one source broker's Kafka listener, for
// the replica fetcher.
type dialer struct {
	s      *Server
	source metadata.BrokerID
	// address is the source's Kafka address, kept current by the node
	// loop (a restarted broker may register another) and read at each
	// attempt.
	address atomic.Pointer[string]
}

// carryOutFetcher writes what the fetcher has to send on its connections,
// closes the ones it gave up, and starts a dialer for each new source.
func (s *Server) carryOutFetcher(out frontend.Outbox) {
	for _, warning := range out.Fetcher.Warnings {
		s.log.Warn(warning)
	}
	for _, closing := range out.Fetcher.Closes {
		if client := s.fetcherConns[closing.Conn]; client != nil {
			s.log.Debug("replica fetcher connection given up", "source", int(closing.Source), "reason", closing.Reason)
			client.close() // its dialer reports it down
		}
	}
	for _, send := range out.Fetcher.Sends {
		client := s.fetcherConns[send.Conn]
		if client == nil || !client.send(send.Bytes) {
			if client != nil {
				client.close()
			}
			s.frontend.FetcherDisconnected(send.Source, send.Conn)
		}
	}
	for _, source := range s.frontend.FetcherSources() {
		d, ok := s.dialers[source.ID]
		if !ok {
			d = &dialer{s: s, source: source.ID}
			d.address.Store(&source.Address)
			s.dialers[source.ID] = d
			go d.dialLoop(s.ctx)
			continue
		}
		if *d.address.Load() != source.Address {
			address := source.Address
			d.address.Store(&address)
		}
	}
}

// handleFetcherEvent hands the front end what a dialer saw.
func (s *Server) handleFetcherEvent(e event) {
	switch e.kind {
	case eventFetcherUp:
		s.fetcherConns[e.fetcherConn] = e.client
		s.frontend.FetcherConnected(e.source, e.fetcherConn)
	case eventFetcherDown:
		delete(s.fetcherConns, e.fetcherConn)
		s.frontend.FetcherDisconnected(e.source, e.fetcherConn)
	case eventFetcherResponse:
		s.frontend.FetcherReceived(e.source, e.fetcherConn, e.payload)
		traceAck(s.config.ID, ackFollowerAppended)
		// The replicas took what they append within the call, and the
		// fetcher keeps no record bytes past it (fetcher.Received).
		s.kafka.shared.buffers.put(e.payload)
	}
}

// nextFetcherConn numbers fetcher connections across dialers.
var nextFetcherConn atomic.Uint64

// dialLoop keeps a connection to the source's Kafka listener up until ctx
// ends, handing each connection and each response to the node loop.
func (d *dialer) dialLoop(ctx context.Context) {
	backoff := backoffInitial
	for ctx.Err() == nil {
		address := *d.address.Load()
		dialer := peerDialer(d.s.config.peerUnackedTimeout())
		c, err := dialer.DialContext(ctx, "tcp", address)
		if err != nil {
			d.s.log.Debug("replica fetcher dial failed", "source", int(d.source), "address", address, "error", err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, backoffMax)
			continue
		}
		backoff = backoffInitial
		cn := newClientConn(c, d.s.config.ID)
		id := fetcher.ConnID(nextFetcherConn.Add(1))
		stop := context.AfterFunc(ctx, cn.close)
		d.s.post(event{kind: eventFetcherUp, source: d.source, fetcherConn: id, client: cn})
		for {
			payload, err := cn.readResponse(d.s.kafka.shared.buffers)
			if err != nil {
				break
			}
			d.s.post(event{kind: eventFetcherResponse, source: d.source, fetcherConn: id, client: cn, payload: payload})
		}
		stop()
		cn.close()
		d.s.post(event{kind: eventFetcherDown, source: d.source, fetcherConn: id, client: cn})
		if !sleep(ctx, backoffInitial) {
			return
		}
	}
}
