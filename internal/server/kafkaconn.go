package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/wire"
)

// kafkaLimits bound what one Kafka client connection may hold.
type kafkaLimits struct {
	// MaxRequestBytes is wire's limit (socket.request.max.bytes): a larger
	// size prefix closes the connection before a byte of the body is read.
	MaxRequestBytes int
	// MaxInFlight bounds the requests read and not yet answered; when it
	// is reached the connection stops reading, so a client that pipelines
	// faster than the broker answers is held back by TCP, not by memory
	// (Kafka mutes the channel the same way).
	MaxInFlight int
	// IdleTimeout closes a connection that sends no request for that long
	// (connections.max.idle.ms).
	IdleTimeout time.Duration
	// BodyTimeout bounds the wait for each requestBodyPieceBytes of a
	// request's body. A body holds its whole size of room in the request
	// queue from its size prefix on, so a client that sends a large size
	// and then nothing would otherwise hold that room, and hold back every
	// other connection, for the idle timeout.
	BodyTimeout time.Duration
}

// requestBodyPieceBytes is how much of a body must arrive within each
// BodyTimeout: 1 MiB in 30 s (the default) is 35 KB/s, far below any link
// a client sends large requests over.
const requestBodyPieceBytes = 1 << 20

// kafkaShared is what every connection of a listener shares: the limits,
// the broker-wide request queue, who serves the requests, and the logs.
type kafkaShared struct {
	limits kafkaLimits
	queue  *requestQueue
	// buffers recycles the bodies of Produce requests (bufferPool).
	buffers *bufferPool
	handle  kafkaHandle
	log     *slog.Logger
	// refused logs requests refused for what the client sent (too large,
	// undecodable), sampled: a hostile client can send thousands a second.
	refused *sampledLog
	// node is the broker's id, for the acks path's trace (acktrace.go).
	node metadata.BrokerID
}

// requestReadAheadBytes is how much of a request body is allocated before
// any of it arrives: all of a request up to this size, in one allocation
// and never copied; past it the buffer doubles only as the bytes arrive, so
// a forged size prefix cannot make the reader allocate much more than the
// client actually sent.
const requestReadAheadBytes = 1 << 20

// kafkaHandle hands one request to whoever serves it (the node loop). The
// answer callback may be called from any goroutine, exactly once, with the
// response (nil for none: an acks=0 produce) or an error that closes the
// connection. It must not block: it is called on the node loop. The
// request holds len(request) bytes of room in the requestQueue, which the
// kafkaHandle now owns and must release once the request is taken.
// clientHost is the client's address as Kafka shows it ("/127.0.0.1").
type kafkaHandle func(clientHost string, request []byte, answer func(response wire.Response, err error))

// pendingResponse is one request's place in its connection's response
// order; answered is set once the answer is in (under kafkaConn.mu).
type pendingResponse struct {
	answered bool
	response wire.Response
	err      error
	// rest is what is left to write of a response the node loop began to
	// write itself (writeNow) and the socket did not take whole.
	rest [][]byte
	// apiKey is the request's, for the acks path's trace.
	apiKey int16
}

// kafkaConn is one Kafka client connection: a reader goroutine that frames
// requests and hands them on, and responses written in request order,
// whatever order the answers come in: by the goroutine that answers (the
// node loop) when its answer is the oldest unwritten, small, in memory, and
// the socket takes it at once (answer), else by a writer goroutine. Kafka clients
// pipeline (kgo and librdkafka send several requests before reading) and
// match responses to requests by position as much as by correlation id, so
// the order is the protocol's, not an optimisation.
type kafkaConn struct {
	c      net.Conn
	shared *kafkaShared
	limits kafkaLimits
	log    *slog.Logger
	// address is the client's IP, counted in max.connections.per.ip.
	address netip.Addr
	// clientHost is the client's address as group members keep it.
	clientHost string
	// slots holds one token per request in flight: the reader puts one in
	// before it hands a request on, blocking when MaxInFlight are there,
	// and whoever writes the response takes it out once it is written.
	slots chan struct{}
	// mu guards queue and writing. queue holds the requests in flight
	// whose responses are not written yet, oldest first; writing is set
	// while the writer goroutine writes the oldest, and only the writer
	// goroutine takes it out then.
	mu      sync.Mutex
	queue   []*pendingResponse
	writing bool
	// wake tells the writer goroutine that the oldest response may be
	// ready to write.
	wake    chan struct{}
	done    chan struct{}
	closing sync.Once
}

func newKafkaConn(c net.Conn, shared *kafkaShared) *kafkaConn {
	limits := shared.limits
	return &kafkaConn{c: c, shared: shared, limits: limits, log: shared.log.With("client", c.RemoteAddr().String()),
		clientHost: clientHost(c.RemoteAddr()),
		slots:      make(chan struct{}, limits.MaxInFlight), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// serve runs the connection until either side closes it.
func (k *kafkaConn) serve() {
	go k.writeLoop()
	defer k.close()
	for {
		// Take a place before reading: with MaxInFlight unanswered the
		// connection stops reading, and TCP holds the client back.
		select {
		case k.slots <- struct{}{}:
		case <-k.done:
			return
		}
		request, err := k.readRequest()
		if err != nil {
			k.readFailed(err)
			return
		}
		pending := &pendingResponse{apiKey: apiKey(request)}
		k.traceRequest(pending.apiKey, ackRequestRead, ackFetchRead)
		k.mu.Lock()
		k.queue = append(k.queue, pending) // at most MaxInFlight: one per slot
		k.mu.Unlock()
		k.shared.handle(k.clientHost, request, func(response wire.Response, err error) {
			k.answer(pending, response, err)
		})
	}
}

// readFailed logs why the reader stopped: a refused request as a sampled
// warning (the client sent something no broker would read), anything
// else (the client left, the idle timeout) at debug.
func (k *kafkaConn) readFailed(err error) {
	var refused requestTooLargeError
	switch {
	case k.closed() || errors.Is(err, io.EOF):
	case errors.As(err, &refused):
		k.shared.refused.Log("client", k.c.RemoteAddr().String(), "error", err)
	default:
		k.log.Debug("kafka connection closed", "error", err)
	}
}

// answer records a request's answer (wire answers exactly once, on the
// node loop). If it is the oldest unwritten and the writer goroutine is
// idle, it is written at once, as far as the socket takes it without
// waiting (writeNow); whatever is left, and every other answer, goes to
// the writer goroutine, which keeps the responses in request order.
func (k *kafkaConn) answer(pending *pendingResponse, response wire.Response, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pending.answered {
		panic("kafka request answered twice")
	}
	pending.response, pending.err, pending.answered = response, err, true
	for !k.writing && len(k.queue) > 0 && k.queue[0].answered && k.queue[0].rest == nil {
		head := k.queue[0]
		if head.err != nil || !k.writeNow(head) {
			break
		}
		k.queue[0] = nil
		k.queue = k.queue[1:]
		<-k.slots // the request's place, which its reader took
	}
	if !k.writing && len(k.queue) > 0 && k.queue[0].answered {
		select {
		case k.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// writeNow writes a response on the answering goroutine as far as the
// socket takes it at once, and reports whether it was all written; what
// is left is kept in rest for the writer goroutine. A response with file
// ranges (sendfile) is left to the writer whole. An error closes the
// connection.
func (k *kafkaConn) writeNow(pending *pendingResponse) bool {
	response := pending.response
	if response.Bytes == nil {
		return true // acks=0: no response
	}
	buffers, ok := responseBuffers(response)
	if !ok {
		return false
	}
	written, err := writeNow(k.c, buffers)
	if err != nil {
		k.log.Debug("kafka write failed", "error", err)
		k.close()
		return false
	}
	if rest := skipBytes(buffers, written); len(rest) > 0 {
		pending.rest = rest
		return false
	}
	k.traceRequest(pending.apiKey, ackProduceWritten, ackFetchAnswerWritten)
	return true
}

// maxWriteNowBytes bounds a response the node loop writes itself: the
// acks path's answers (a produce answer, a follower's fetch answer of a
// few batches) are far smaller; a larger one is worth its hand-off to the
// writer goroutine, which copies it to the socket beside the loop.
const maxWriteNowBytes = 64 << 10

// responseBuffers are a response's pieces with its size prefix, or false
// when it holds file ranges (written with sendfile) or is larger than
// maxWriteNowBytes.
func responseBuffers(response wire.Response) ([][]byte, bool) {
	size := response.Size()
	if size > maxWriteNowBytes {
		return nil, false
	}
	buffers := make([][]byte, 0, 2+2*len(response.Splices))
	buffers = append(buffers, binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(size)))
	next := 0
	for _, splice := range response.Splices {
		if len(splice.Ranges) > 0 {
			return nil, false
		}
		buffers = append(buffers, response.Bytes[next:splice.At], splice.Bytes)
		next = splice.At
	}
	return append(buffers, response.Bytes[next:]), true
}

// skipBytes is what is left of buffers after their first n bytes.
func skipBytes(buffers [][]byte, n int) [][]byte {
	for len(buffers) > 0 && n >= len(buffers[0]) {
		n -= len(buffers[0])
		buffers = buffers[1:]
	}
	if len(buffers) > 0 && n > 0 {
		buffers = append([][]byte{buffers[0][n:]}, buffers[1:]...)
	}
	return buffers
}

// errConnectionClosed ends a read that was waiting for room in the
// request queue when the connection closed.
var errConnectionClosed = errors.New("connection closed")

// readRequest reads one size-prefixed request, with the idle timeout on
// its first byte and BodyTimeout on each piece of its body. Between the
// two it waits for room in the request queue: the body is read only once
// its bytes fit, and the request returned holds that room.
func (k *kafkaConn) readRequest() ([]byte, error) {
	k.c.SetReadDeadline(time.Now().Add(k.limits.IdleTimeout))
	var prefix [4]byte
	if _, err := io.ReadFull(k.c, prefix[:]); err != nil {
		return nil, err
	}
	size := int64(int32(binary.BigEndian.Uint32(prefix[:])))
	if size < 0 || size > int64(k.limits.MaxRequestBytes) {
		return nil, requestTooLargeError{size: size, limit: int64(k.limits.MaxRequestBytes), setting: "socket.request.max.bytes"}
	}
	reserved, err := k.shared.queue.reserve(size, k.done)
	if err != nil {
		return nil, err
	}
	if !reserved {
		return nil, errConnectionClosed
	}
	body, err := k.readBody(int(size))
	if err != nil {
		k.shared.queue.release(size)
		return nil, err
	}
	return body, nil
}

// readBody reads a request body of size bytes, each piece of it within
// BodyTimeout (the deadline is set anew for each: the wait for room before
// may have outlasted any earlier one).
func (k *kafkaConn) readBody(size int) ([]byte, error) {
	body := k.shared.buffers.get(min(size, requestReadAheadBytes))
	for read := 0; read < size; {
		if read == len(body) {
			// Exactly the size, not append's: its spare capacity (a
			// sixth more) would be held past the room reserved for it.
			grown := make([]byte, read+min(size-read, read))
			copy(grown, body)
			body = grown
		}
		end := min(len(body), read+requestBodyPieceBytes)
		k.c.SetReadDeadline(time.Now().Add(k.limits.BodyTimeout))
		if _, err := io.ReadFull(k.c, body[read:end]); err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		read = end
	}
	return body, nil
}

// writeLoop writes the responses in request order that the answering
// goroutine did not write whole itself; an error answer closes the
// connection, as Kafka does for a request it cannot understand.
func (k *kafkaConn) writeLoop() {
	defer k.close()
	for {
		select {
		case <-k.wake:
		case <-k.done:
			return
		}
		for {
			k.mu.Lock()
			if len(k.queue) == 0 || !k.queue[0].answered {
				k.mu.Unlock()
				break
			}
			pending := k.queue[0]
			k.writing = true
			k.mu.Unlock()
			ok := k.writePending(pending)
			k.mu.Lock()
			k.queue[0] = nil
			k.queue = k.queue[1:]
			k.writing = false
			k.mu.Unlock()
			if !ok {
				return
			}
			<-k.slots
		}
	}
}

// writePending writes one answered response, or the rest of one begun
// on the answering goroutine, and reports whether the connection goes on.
func (k *kafkaConn) writePending(pending *pendingResponse) bool {
	if pending.err != nil {
		k.shared.refused.Log("client", k.c.RemoteAddr().String(), "error", pending.err)
		return false
	}
	if pending.rest != nil {
		k.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		rest := net.Buffers(pending.rest)
		if _, err := rest.WriteTo(k.c); err != nil {
			k.log.Debug("kafka write failed", "error", err)
			return false
		}
	} else if pending.response.Bytes == nil { // acks=0: no response
		return true
	} else if err := k.writeResponse(pending.response); err != nil {
		k.log.Debug("kafka write failed", "error", err)
		return false
	}
	k.traceRequest(pending.apiKey, ackProduceWritten, ackFetchAnswerWritten)
	return true
}

// writeResponse writes the size, then the response's bytes with its record
// sets spliced in: in-memory ones in the same writev, file ranges with
// sendfile, so a fetch's records go from the page cache to the socket
// without passing through this process.
func (k *kafkaConn) writeResponse(response wire.Response) error {
	k.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	size := response.Size()
	if size > math.MaxInt32 {
		return fmt.Errorf("response of %d bytes", size)
	}
	prefix := binary.BigEndian.AppendUint32(nil, uint32(size))
	buffers := net.Buffers{prefix}
	next := 0
	for _, splice := range response.Splices {
		buffers = append(buffers, response.Bytes[next:splice.At], splice.Bytes)
		next = splice.At
		if len(splice.Ranges) == 0 {
			continue
		}
		if _, err := buffers.WriteTo(k.c); err != nil {
			return err
		}
		buffers = buffers[:0]
		for _, file := range splice.Ranges {
			if err := sendFile(k.c, file); err != nil {
				return err
			}
		}
	}
	buffers = append(buffers, response.Bytes[next:])
	_, err := buffers.WriteTo(k.c)
	return err
}

// traceRequest marks a step of the acks path (acktrace.go) for a Produce
// or a Fetch on this connection.
func (k *kafkaConn) traceRequest(key int16, produce, fetch ackStep) {
	switch key {
	case produceKey:
		traceAckOn(k.shared.node, produce, k.c, false)
	case fetchKey:
		traceAckOn(k.shared.node, fetch, k.c, false)
	}
}

func (k *kafkaConn) close() {
	k.closing.Do(func() {
		close(k.done)
		k.c.Close()
	})
}

func (k *kafkaConn) closed() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// clientHost is a client's address as Kafka shows it with a group member:
// a slash and the IP address, without the port.
func clientHost(address net.Addr) string {
	if tcp, ok := address.(*net.TCPAddr); ok {
		return "/" + tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(address.String())
	if err != nil {
		return "/" + address.String()
	}
	return "/" + host
}
