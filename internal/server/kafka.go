package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"sync"

	"github.com/tidelog/tide/internal/wire"
)

// kafkaListener is the node's Kafka protocol listener: a goroutine per
// connection frames requests and hands each to the node loop, which serves
// it with the front end (internal/frontend) and hands the answer back.
type kafkaListener struct {
	listener net.Listener
	// advertised is this broker's Kafka address for Metadata.
	advertised string
	wire       wire.Config
	limits     kafkaLimits
	// conns are the open connections, closed when the node stops; slots
	// holds a token per connection, bounding them to KafkaMaxConnections.
	mu    sync.Mutex
	conns map[*kafkaConn]struct{}
	// closed is set once the node stopped: a connection accepted after
	// closeKafka went through conns is closed at once.
	closed bool
	slots  chan struct{}
}

func (s *Server) openKafka() error {
	listener := s.config.KafkaListener
	if listener == nil {
		var err error
		if listener, err = net.Listen("tcp", s.config.KafkaListen); err != nil {
			return fmt.Errorf("kafka listener: %w", err)
		}
	}
	advertised := s.config.KafkaListeners[s.config.ID]
	if advertised == "" {
		advertised = listener.Addr().String()
	}
	wireConfig := wire.DefaultConfig()
	wireConfig.Tick = s.config.Tick
	wireConfig.Random = rand.Reader
	if err := wireConfig.Validate(); err != nil {
		listener.Close()
		return err
	}
	s.kafka = &kafkaListener{listener: listener, advertised: advertised, wire: wireConfig,
		limits: kafkaLimits{MaxRequestBytes: wireConfig.MaxRequestBytes, MaxInFlight: s.config.KafkaMaxInFlight, IdleTimeout: s.config.KafkaIdleTimeout},
		conns:  map[*kafkaConn]struct{}{}, slots: make(chan struct{}, s.config.KafkaMaxConnections)}
	return nil
}

// KafkaAddr is the Kafka listener's address.
func (s *Server) KafkaAddr() string { return s.kafka.listener.Addr().String() }

// acceptKafka serves the Kafka listener until ctx ends. Past
// KafkaMaxConnections it stops accepting until a connection closes.
func (s *Server) acceptKafka(ctx context.Context) {
	k := s.kafka
	for {
		select {
		case k.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := k.listener.Accept()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("kafka accept failed", "error", err)
			}
			return
		}
		cn := newKafkaConn(c, k.limits, s.postKafka, s.log)
		k.mu.Lock()
		if k.closed {
			k.mu.Unlock()
			c.Close()
			return
		}
		k.conns[cn] = struct{}{}
		k.mu.Unlock()
		go func() {
			cn.serve()
			k.mu.Lock()
			delete(k.conns, cn)
			k.mu.Unlock()
			<-k.slots
		}()
	}
}

// postKafka hands a request to the node loop. If the node stops first the
// request is answered with nothing, and the connection closes with it.
func (s *Server) postKafka(request []byte, answer func(wire.Response, error)) {
	select {
	case s.inbox <- event{kind: eventKafkaRequest, payload: request, answer: answer}:
	case <-s.stopped:
	}
}

// closeKafka stops the listener and closes every connection.
func (s *Server) closeKafka() {
	k := s.kafka
	k.listener.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for cn := range k.conns {
		cn.close()
	}
}
