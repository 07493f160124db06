package server

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/tidelog/tide/internal/metadata"
)

// Reconnect backoff for a link to another node.
const (
	dialTimeout    = time.Second
	backoffInitial = 50 * time.Millisecond
	backoffMax     = 2 * time.Second
)

// link is this node's connection to another node's controller listener:
// it dials, says hello, and redials with backoff when the connection
// fails. Frames sent while it is down are dropped. What comes back on it
// (answers to this node's requests) goes to the node loop.
type link struct {
	to      metadata.BrokerID
	address string
	server  *Server
	// current is the live connection, or nil; only the node loop reads it,
	// and the dialer hands it over through the loop's inbox.
	current *conn
}

// dialLoop keeps a connection to the peer up until ctx ends.
func (l *link) dialLoop(ctx context.Context) {
	backoff := backoffInitial
	for ctx.Err() == nil {
		dialer := peerDialer(l.server.config.peerUnackedTimeout())
		c, err := dialer.DialContext(ctx, "tcp", l.address)
		if err != nil {
			l.server.log.Debug("dial failed", "peer", l.to, "address", l.address, "error", err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, backoffMax)
			continue
		}
		backoff = backoffInitial
		cn := newConn(c, l.server.config.QueueLength, l.server.log)
		cn.send(frameHello, helloPayload(int32(l.server.config.ID)))
		l.server.post(event{kind: eventLinkUp, link: l, conn: cn})
		l.server.readLoop(ctx, cn, l.to)
		cn.close()
		l.server.post(event{kind: eventLinkDown, link: l, conn: cn})
		if !sleep(ctx, backoffInitial) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// send sends a frame if the link is up, and reports whether it was queued.
func (l *link) send(kind byte, payload []byte) bool {
	return l.current != nil && l.current.send(kind, payload)
}

// acceptLoop serves the controller listener: each connection says hello,
// then its frames go to the node loop.
func (s *Server) acceptLoop(ctx context.Context) {
	for {
		c, err := s.listener.Accept()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("accept failed", "error", err)
			}
			return
		}
		go s.serveConn(ctx, c)
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	if tc, ok := c.(syscall.Conn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			setUnackedTimeout(raw, s.config.peerUnackedTimeout()) // best effort: the dialing side sets it too
		}
	}
	cn := newConn(c, s.config.QueueLength, s.log)
	defer cn.close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	kind, payload, err := readFrame(c, s.config.MaxFrameBytes)
	if err != nil {
		return
	}
	id, err := parseHello(kind, payload)
	if err != nil {
		s.log.Debug("bad hello", "remote", c.RemoteAddr().String(), "error", err)
		return
	}
	c.SetReadDeadline(time.Time{})
	s.post(event{kind: eventConnUp, from: metadata.BrokerID(id), conn: cn})
	s.readLoop(ctx, cn, metadata.BrokerID(id))
	s.post(event{kind: eventConnDown, from: metadata.BrokerID(id), conn: cn})
}

// readLoop hands every frame of a connection to the node loop until the
// connection fails or ctx ends.
func (s *Server) readLoop(ctx context.Context, cn *conn, from metadata.BrokerID) {
	for ctx.Err() == nil {
		kind, payload, err := readFrame(cn.c, s.config.MaxFrameBytes)
		if err != nil {
			if !cn.closed() && ctx.Err() == nil {
				s.log.Debug("read failed", "peer", from, "error", err)
			}
			return
		}
		s.post(event{kind: eventFrame, from: from, conn: cn, frame: kind, payload: payload})
	}
}

// post hands an event to the node loop, unless the server is stopping.
func (s *Server) post(e event) {
	select {
	case s.inbox <- e:
	case <-s.stopped:
	}
}
