package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// conn is one TCP connection: a writer goroutine drains a bounded queue,
// so the node loop never blocks on a slow peer; a full queue drops the
// frame (raft and the controller protocol both retry).
type conn struct {
	c       net.Conn
	queue   chan outFrame
	closing sync.Once
	done    chan struct{}
	log     *slog.Logger
	// dropped counts frames lost to a full queue.
	dropped int
}

type outFrame struct {
	kind    byte
	payload []byte
}

// writeTimeout bounds one frame's write: a peer that stops reading is cut
// off rather than holding the writer forever.
const writeTimeout = 10 * time.Second

func newConn(c net.Conn, queueLength int, log *slog.Logger) *conn {
	cn := &conn{c: c, queue: make(chan outFrame, queueLength), done: make(chan struct{}), log: log}
	go cn.writeLoop()
	return cn
}

// send queues a frame; it never blocks, and reports false when the frame
// was dropped.
func (cn *conn) send(kind byte, payload []byte) bool {
	select {
	case <-cn.done:
		return false
	default:
	}
	select {
	case cn.queue <- outFrame{kind, payload}:
		return true
	default:
		cn.dropped++
		return false
	}
}

func (cn *conn) writeLoop() {
	for {
		select {
		case <-cn.done:
			return
		case frame := <-cn.queue:
			cn.c.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := writeFrame(cn.c, frame.kind, frame.payload); err != nil {
				cn.log.Debug("write failed", "remote", cn.c.RemoteAddr().String(), "error", err)
				cn.close()
				return
			}
		}
	}
}

func (cn *conn) close() {
	cn.closing.Do(func() {
		close(cn.done)
		cn.c.Close()
	})
}

func (cn *conn) closed() bool {
	select {
	case <-cn.done:
		return true
	default:
		return false
	}
}
