package server

import (
	"encoding/binary"
	"net"
	"sync/atomic"

	"github.com/tidelog/tide/internal/metadata"
)

// The acks path's trace: where one acknowledged write's time goes between
// the leader reading the Produce request and writing its answer
// (BenchmarkAckedProduceLatency, docs/benchmarks.md). The runtime marks
// each step of the path; nothing is recorded unless a test installed a
// tracer, and then the tracer keeps the time itself. Unset, a step costs
// one atomic load, and no request is looked at.

// ackStep names one step of an acks=all write's way through the brokers.
type ackStep uint8

const (
	// ackRequestRead: a Produce request's body read off a client socket.
	ackRequestRead ackStep = iota
	// ackProduceHandled: the node loop appended a Produce (or refused it).
	ackProduceHandled
	// ackFlush: a pass of the node loop took its last event and begins to
	// carry out what the pass let out (Server.flush).
	ackFlush
	// ackSyncBegin: a log's sync job handed to an I/O worker.
	ackSyncBegin
	// ackSyncRun: a worker's fsync returned.
	ackSyncRun
	// ackSyncHandled: the node loop took the job's completion.
	ackSyncHandled
	// ackFetchAnswered: the node loop answered a Fetch.
	ackFetchAnswered
	// ackFetchAnswerWritten: a Fetch answer written to a follower.
	ackFetchAnswerWritten
	// ackFetchAnswerRead: a follower read a Fetch answer off its socket.
	ackFetchAnswerRead
	// ackFollowerAppended: a follower's loop took a Fetch answer (and
	// appended its records).
	ackFollowerAppended
	// ackFetchSent: a follower wrote a Fetch request to its leader.
	ackFetchSent
	// ackFetchRead: a leader read a Fetch request off a socket.
	ackFetchRead
	// ackFetchHandled: a leader's loop handled a Fetch request.
	ackFetchHandled
	// ackProduceAnswered: the node loop answered a Produce: for acks=all,
	// the pass in which the high watermark passed it.
	ackProduceAnswered
	// ackProduceWritten: a Produce answer written to the client's socket.
	ackProduceWritten
	ackSteps
)

var ackStepNames = [ackSteps]string{"request-read", "produce-handled", "flush", "sync-begin", "sync-run", "sync-handled",
	"fetch-answered", "fetch-answer-written", "fetch-answer-read", "follower-appended", "fetch-sent", "fetch-read", "fetch-handled",
	"produce-answered", "produce-written"}

func (step ackStep) String() string { return ackStepNames[step] }

// ackTracer is told of each step on the node it happened on; connection
// tells a follower's connection apart (the local address on a follower's
// side, the remote one on its leader's), empty for steps on a loop. It is
// called from many goroutines at once.
type ackTracer func(node metadata.BrokerID, step ackStep, connection string)

// ackTrace is the tracer installed (tests only), nil in production.
var ackTrace atomic.Pointer[ackTracer]

// traceAck tells the tracer, if any, of a step on the node loop or an I/O
// worker.
func traceAck(node metadata.BrokerID, step ackStep) {
	if tracer := ackTrace.Load(); tracer != nil {
		(*tracer)(node, step, "")
	}
}

// traceAckOn tells the tracer, if any, of a step on a connection: named by
// its local address on a follower's side (local), its remote address on
// the leader's.
func traceAckOn(node metadata.BrokerID, step ackStep, c net.Conn, local bool) {
	tracer := ackTrace.Load()
	if tracer == nil {
		return
	}
	address := c.RemoteAddr()
	if local {
		address = c.LocalAddr()
	}
	(*tracer)(node, step, address.String())
}

// fetchKey is the Kafka API key of Fetch (produceKey is Produce's).
const fetchKey = 1

// apiKey is a request's API key (-1 when it is too short to have one).
func apiKey(request []byte) int16 {
	if len(request) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(request))
}
