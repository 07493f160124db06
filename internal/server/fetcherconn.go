package server

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// clientConn is a replica fetcher's Kafka connection to its source broker:
// a writer goroutine drains a bounded queue of requests (each with its size
// prefix), and the dial loop's goroutine reads responses and hands them to
// the node loop.
type clientConn struct {
	c       net.Conn
	queue   chan []byte
	done    chan struct{}
	closing sync.Once
}

// clientQueueLength bounds the requests queued on a fetcher connection; a
// fetcher has at most one Fetch and a few OffsetForLeaderEpoch requests in
// flight.
const clientQueueLength = 64

func newClientConn(c net.Conn) *clientConn {
	cn := &clientConn{c: c, queue: make(chan []byte, clientQueueLength), done: make(chan struct{})}
	go cn.writeLoop()
	return cn
}

// send queues a request; it never blocks, and reports false when the queue
// is full or the connection closed.
func (cn *clientConn) send(request []byte) bool {
	select {
	case <-cn.done:
		return false
	case cn.queue <- request:
		return true
	default:
		return false
	}
}

func (cn *clientConn) writeLoop() {
	for {
		select {
		case <-cn.done:
			return
		case request := <-cn.queue:
			cn.c.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := cn.c.Write(request); err != nil {
				cn.close()
				return
			}
		}
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
