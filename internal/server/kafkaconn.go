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
// order; ready is closed once the answer is in.
type pendingResponse struct {
	ready    chan struct{}
	response wire.Response
	err      error
}

// kafkaConn is one Kafka client connection: a reader goroutine that frames
// requests and hands them on, and a writer goroutine that writes responses
// in request order, whatever order the answers come in. Kafka clients
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
	// and the writer takes it out once the response is written.
	slots chan struct{}
	// order holds the requests in flight, oldest first.
	order   chan *pendingResponse
	done    chan struct{}
	closing sync.Once
}

func newKafkaConn(c net.Conn, shared *kafkaShared) *kafkaConn {
	limits := shared.limits
	return &kafkaConn{c: c, shared: shared, limits: limits, log: shared.log.With("client", c.RemoteAddr().String()),
		clientHost: clientHost(c.RemoteAddr()),
		slots:      make(chan struct{}, limits.MaxInFlight), order: make(chan *pendingResponse, limits.MaxInFlight),
		done: make(chan struct{})}
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
		pending := &pendingResponse{ready: make(chan struct{})}
		k.order <- pending // never blocks: it has as many places as slots
		k.shared.handle(k.clientHost, request, pending.answer)
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

// answer records the answer and wakes the writer; a second call is a
// programmer error (wire answers exactly once).
func (p *pendingResponse) answer(response wire.Response, err error) {
	p.response, p.err = response, err
	close(p.ready)
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

// writeLoop writes the responses in request order; an error answer closes
// the connection, as Kafka does for a request it cannot understand.
func (k *kafkaConn) writeLoop() {
	defer k.close()
	for {
		var pending *pendingResponse
		select {
		case pending = <-k.order:
		case <-k.done:
			return
		}
		select {
		case <-pending.ready:
		case <-k.done:
			return
		}
		if pending.err != nil {
			k.shared.refused.Log("client", k.c.RemoteAddr().String(), "error", pending.err)
			return
		}
		if pending.response.Bytes != nil { // nil for acks=0: no response
			if err := k.writeResponse(pending.response); err != nil {
				k.log.Debug("kafka write failed", "error", err)
				return
			}
		}
		<-k.slots
	}
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
