package server

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/tidelog/tide/internal/metadata"
)

// clientConn is a replica fetcher's Kafka connection to its source broker:
// the node loop writes each request (with its size prefix) as far as the
// socket takes it at once (writeNow), a writer goroutine writes what is
// left and what queues behind it, and the dial loop's goroutine reads
// responses and hands them to the node loop. A follower's next fetch so
// leaves in the pass that learnt its sync completed, without a hand-off to
// another goroutine (docs/benchmarks.md, "One acknowledged write").
type clientConn struct {
	c net.Conn
	// node is the broker's id, for the acks path's trace (acktrace.go).
	node metadata.BrokerID
	// mu guards queue and writing: the requests, or what is left of one,
	// for the writer goroutine, oldest first (at most clientQueueLength),
	// and whether it is writing the oldest now.
	mu      sync.Mutex
	queue   [][]byte
	writing bool
	wake    chan struct{}
	done    chan struct{}
	closing sync.Once
}

// clientQueueLength bounds the requests queued on a fetcher connection; a
// fetcher has at most one Fetch and a few OffsetForLeaderEpoch requests in
// flight.
const clientQueueLength = 64

func newClientConn(c net.Conn, node metadata.BrokerID) *clientConn {
	cn := &clientConn{c: c, node: node, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go cn.writeLoop()
	return cn
}

// send writes a request, or queues what the socket does not take at once;
// it never blocks, and reports false when the queue is full or the
// connection closed.
func (cn *clientConn) send(request []byte) bool {
	select {
	case <-cn.done:
		return false
	default:
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if !cn.writing && len(cn.queue) == 0 {
		written, err := writeNow(cn.c, [][]byte{request})
		if err != nil {
			cn.close()
			return false
		}
		if written == len(request) {
			cn.traceSent(request)
			return true
		}
		request = request[written:]
	}
	if len(cn.queue) >= clientQueueLength {
		return false
	}
	cn.queue = append(cn.queue, request)
	select {
	case cn.wake <- struct{}{}:
	default: // already woken
	}
	return true
}

func (cn *clientConn) writeLoop() {
	for {
		select {
		case <-cn.done:
			return
		case <-cn.wake:
		}
		for {
			cn.mu.Lock()
			if len(cn.queue) == 0 {
				cn.mu.Unlock()
				break
			}
			request := cn.queue[0]
			cn.writing = true
			cn.mu.Unlock()
			cn.c.SetWriteDeadline(time.Now().Add(writeTimeout))
			_, err := cn.c.Write(request)
			cn.mu.Lock()
			cn.queue[0] = nil
			cn.queue = cn.queue[1:]
			cn.writing = false
			cn.mu.Unlock()
			if err != nil {
				cn.close()
				return
			}
			cn.traceSent(request)
		}
	}
}

// traceSent marks a Fetch request written, for the acks path's trace.
func (cn *clientConn) traceSent(request []byte) {
	if len(request) >= 6 && apiKey(request[4:]) == fetchKey {
		traceAckOn(cn.node, ackFetchSent, cn.c, true)
	}
}

// readResponse reads one size-prefixed response into a buffer from
// buffers.
func (cn *clientConn) readResponse(buffers *bufferPool) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(cn.c, prefix[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < 4 || size > maxReplicaResponseBytes {
		return nil, fmt.Errorf("response of %d bytes", size)
	}
	payload := buffers.get(int(size))
	if _, err := io.ReadFull(cn.c, payload); err != nil {
		buffers.put(payload)
		return nil, err
	}
	traceAckOn(cn.node, ackFetchAnswerRead, cn.c, true)
	return payload, nil
}

func (cn *clientConn) close() {
	cn.closing.Do(func() {
		close(cn.done)
		cn.c.Close()
	})
}

// peerDialer is how a broker dials another (controller links, replica
// fetcher connections): data left unacknowledged for unacked aborts the
// connection (setUnackedTimeout says why).
func peerDialer(unacked time.Duration) net.Dialer {
	return net.Dialer{Timeout: dialTimeout, Control: func(_, _ string, raw syscall.RawConn) error {
		return setUnackedTimeout(raw, unacked)
	}}
}
