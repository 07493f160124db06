package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
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
// connection. It must not block: it is called on the node loop.
type kafkaHandle func(request []byte, answer func(response wire.Response, err error))

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
	limits kafkaLimits
	handle kafkaHandle
	log    *slog.Logger
	// slots holds one token per request in flight: the reader puts one in
	// before it hands a request on, blocking when MaxInFlight are there,
	// and the writer takes it out once the response is written.
	slots chan struct{}
	// order holds the requests in flight, oldest first.
	order   chan *pendingResponse
	done    chan struct{}
	closing sync.Once
}

func newKafkaConn(c net.Conn, limits kafkaLimits, handle kafkaHandle, log *slog.Logger) *kafkaConn {
	return &kafkaConn{c: c, limits: limits, handle: handle, log: log.With("client", c.RemoteAddr().String()),
		slots: make(chan struct{}, limits.MaxInFlight), order: make(chan *pendingResponse, limits.MaxInFlight),
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
			if !k.closed() && !errors.Is(err, io.EOF) {
				k.log.Debug("kafka connection closed", "error", err)
			}
			return
		}
		pending := &pendingResponse{ready: make(chan struct{})}
		k.order <- pending // never blocks: it has as many places as slots
		k.handle(request, pending.answer)
	}
}

// answer records the answer and wakes the writer; a second call is a
// programmer error (wire answers exactly once).
func (p *pendingResponse) answer(response wire.Response, err error) {
	p.response, p.err = response, err
	close(p.ready)
}

// readRequest reads one size-prefixed request, with the idle timeout on
// its first byte and on the rest.
func (k *kafkaConn) readRequest() ([]byte, error) {
	k.c.SetReadDeadline(time.Now().Add(k.limits.IdleTimeout))
	var prefix [4]byte
	if _, err := io.ReadFull(k.c, prefix[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < 0 || int(size) > k.limits.MaxRequestBytes {
		return nil, fmt.Errorf("request of %d bytes, limit %d", size, k.limits.MaxRequestBytes)
	}
	body := make([]byte, min(int(size), requestReadAheadBytes))
	read := 0
	for {
		if _, err := io.ReadFull(k.c, body[read:]); err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		read = len(body)
		if read == int(size) {
			return body, nil
		}
		body = append(body, make([]byte, min(int(size)-read, read))...)
	}
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
			k.log.Info("closing a kafka connection", "error", pending.err)
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
