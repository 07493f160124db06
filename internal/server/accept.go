package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// Accept errors are retried after a pause that starts at
// acceptBackoffMin and doubles to acceptBackoffMax. Most are passing: a
// process out of file descriptors (EMFILE, each log segment holds two),
// the system out of them (ENFILE), a connection reset before it was
// accepted. Stopping the listener on one would leave a running broker
// that no client can reach; retrying at once would spin on the error.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// acceptKafka serves the Kafka listener until ctx ends or the listener is
// closed. A connection over max.connections, or over
// max.connections.per.ip from its address, is accepted and closed at once:
// left in the kernel's backlog instead, it would hang its client, and
// every client after it, for as long as the listener is full.
func (s *Server) acceptKafka(ctx context.Context) {
	k := s.kafka
	var backoff time.Duration
	for {
		c, err := k.listener.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			k.acceptFailed.Log("error", err, "retry-in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		cn, refusal := k.admit(c)
		if cn == nil {
			c.Close()
			if refusal != "" {
				k.refusedConnections.Log("client", c.RemoteAddr().String(), "reason", refusal)
			}
			continue
		}
		go func() {
			cn.serve()
			k.remove(cn)
		}()
	}
}

// admit registers a new connection, or says why it may not have one
// (nil and "" when the listener is closed).
//
// A broker that has not caught up with the metadata log serves no client:
// its image is empty or stale (a broker restarted after kill -9 starts
// from nothing and must register and fetch the log first), and it would
// answer UNKNOWN_TOPIC_OR_PARTITION for topics that exist, which a client
// may give a record up on, or serve Metadata without them. Kafka opens its
// client listeners only once the broker has caught up (BrokerServer's
// startup waits for the lifecycle manager's initial catch-up before it
// enables request processing). Its connections wait in the kernel's
// backlog meanwhile; tide closes them at once instead, as it does over
// max.connections, so that a client fails over to another broker in a
// round trip rather than after its request timeout.
func (k *kafkaListener) admit(c net.Conn) (*kafkaConn, string) {
	address := remoteAddr(c)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.closed:
		return nil, ""
	case !k.caughtUp.Load():
		return nil, "not caught up with the metadata log yet"
	case len(k.conns) >= k.maxConnections:
		return nil, "max.connections reached"
	case k.overLimitPerIP(address):
		return nil, "max.connections.per.ip reached"
	}
	cn := newKafkaConn(c, k.shared)
	cn.address = address
	k.conns[cn] = struct{}{}
	k.perIP[address]++
	return cn, ""
}

// overLimitPerIP says whether address has all the connections it may
// have: its override's count, or else max.connections.per.ip (0: no
// limit). Callers hold k.mu.
func (k *kafkaListener) overLimitPerIP(address netip.Addr) bool {
	if limit, ok := k.perIPOverrides[address]; ok {
		return k.perIP[address] >= limit
	}
	return k.maxConnectionsPerIP > 0 && k.perIP[address] >= k.maxConnectionsPerIP
}

// remove forgets a closed connection, making room for another.
func (k *kafkaListener) remove(cn *kafkaConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, cn)
	if k.perIP[cn.address]--; k.perIP[cn.address] <= 0 {
		delete(k.perIP, cn.address)
	}
}

// remoteAddr is the client's IP address, the key of
// max.connections.per.ip; the zero Addr for a connection that has none
// (all such connections count as one address).
func remoteAddr(c net.Conn) netip.Addr {
	if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.AddrPort().Addr().Unmap()
	}
	address, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return address.Addr().Unmap()
}
