package sim

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// kafkaClient is what a Kafka client library (franz-go, librdkafka) does
// below a simulated application: one connection per broker, dialed on first
// use and opened with ApiVersions, requests encoded with kmsg and matched to
// their responses by correlation id, and a request that goes unanswered for
// too long closing its connection, which fails every request on it.
type kafkaClient struct {
	w         *world
	addr      address
	formatter *kmsg.RequestFormatter
	conns     map[metadata.BrokerID]*simConn
	// correlation numbers the requests; inFlight are those awaiting their
	// responses.
	correlation int32
	inFlight    map[int32]*clientCall
}

// clientCall is one request awaiting its response. done gets the response,
// or ok false when the connection failed or the request timed out.
type clientCall struct {
	conn    connID
	request kmsg.Request
	sentAt  int64
	done    func(response kmsg.Response, ok bool)
}

// clientRequestTimeoutTicks is how long a client waits for a response
// before it closes the connection (franz-go's request timeout, with the
// produce timeout inside it).
const clientRequestTimeoutTicks = clientRequestLostTicks

// client returns the Kafka client at an address, creating it.
func (w *world) client(a address) *kafkaClient {
	if c, ok := w.clients[a]; ok {
		return c
	}
	c := &kafkaClient{w: w, addr: a, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(a.String())),
		conns: map[metadata.BrokerID]*simConn{}, inFlight: map[int32]*clientCall{}}
	w.clients[a] = c
	return c
}

// send sends a request to a broker and reports whether it went out: false
// when no connection could be opened (the broker is down, or cut off).
// done is called once, later. An acks=0 produce gets no response and its
// done is never called.
func (c *kafkaClient) send(to metadata.BrokerID, request kmsg.Request, done func(kmsg.Response, bool)) bool {
	if to < 1 || int(to) > len(c.w.brokers) {
		return false
	}
	conn := c.conns[to]
	if conn == nil || !conn.open {
		conn = c.w.dial(c.addr, to)
		if conn == nil {
			return false
		}
		c.conns[to] = conn
		versions := kmsg.NewPtrApiVersionsRequest()
		versions.Version = 3
		versions.ClientSoftwareName, versions.ClientSoftwareVersion = "tide-sim", "1"
		c.write(conn, versions, func(kmsg.Response, bool) {})
	}
	if produce, ok := request.(*kmsg.ProduceRequest); ok && produce.Acks == 0 {
		c.correlation++
		c.w.sendKafka(conn, c.formatter.AppendRequest(nil, request, c.correlation))
		return true
	}
	c.write(conn, request, done)
	return true
}

func (c *kafkaClient) write(conn *simConn, request kmsg.Request, done func(kmsg.Response, bool)) {
	c.correlation++
	c.inFlight[c.correlation] = &clientCall{conn: conn.id, request: request, sentAt: c.w.now, done: done}
	c.w.sendKafka(conn, c.formatter.AppendRequest(nil, request, c.correlation))
}

// received takes a response off one of the client's connections.
func (c *kafkaClient) received(packet *kafkaPacket) {
	if len(packet.bytes) < 4 {
		return
	}
	correlation := int32(binary.BigEndian.Uint32(packet.bytes))
	call, ok := c.inFlight[correlation]
	if !ok || call.conn != packet.conn {
		return
	}
	delete(c.inFlight, correlation)
	response, err := decodeResponse(call.request, packet.bytes[4:])
	if err != nil {
		// A client cannot read the rest of a connection whose response it
		// could not parse: it closes it, as franz-go does.
		c.w.trace("%s cannot read a %s response: %v", c.addr, kmsg.NameForKey(call.request.Key()), err)
		c.w.checker.fail(InvariantReplicaViolation, "%s got an undecodable %s response: %v", c.addr, kmsg.NameForKey(call.request.Key()), err)
		call.done(nil, false)
		return
	}
	call.done(response, true)
}

// decodeResponse decodes a response body (after the correlation id) to the
// request it answers.
func decodeResponse(request kmsg.Request, body []byte) (kmsg.Response, error) {
	response := request.ResponseKind()
	response.SetVersion(request.GetVersion())
	if response.IsFlexible() && request.Key() != 18 {
		reader := kbin.Reader{Src: body}
		kmsg.SkipTags(&reader)
		if !reader.Ok() {
			return nil, fmt.Errorf("response header tags")
		}
		body = reader.Src
	}
	if err := response.ReadFrom(body); err != nil {
		return nil, err
	}
	return response, nil
}

// tick closes the connections whose oldest request is overdue.
func (c *kafkaClient) tick() {
	var overdue []connID
	for _, call := range c.inFlight {
		if c.w.now-call.sentAt > clientRequestTimeoutTicks && !slices.Contains(overdue, call.conn) {
			overdue = append(overdue, call.conn)
		}
	}
	sortConnIDs(overdue)
	for _, id := range overdue {
		if conn, ok := c.w.kafka.conns[id]; ok {
			c.w.closeConn(conn)
		} else {
			c.failConn(id)
		}
	}
}

// failConn fails every request in flight on a connection, oldest first.
func (c *kafkaClient) failConn(id connID) {
	var correlations []int32
	for correlation, call := range c.inFlight {
		if call.conn == id {
			correlations = append(correlations, correlation)
		}
	}
	slices.Sort(correlations)
	for _, correlation := range correlations {
		call := c.inFlight[correlation]
		delete(c.inFlight, correlation)
		call.done(nil, false)
	}
}

// clientConnClosed tells a connection's client it closed.
func (w *world) clientConnClosed(conn *simConn) {
	c, ok := w.clients[conn.client]
	if !ok {
		return
	}
	if c.conns[conn.server] == conn {
		delete(c.conns, conn.server)
	}
	c.failConn(conn.id)
}

// clientReceived routes a packet for a client.
func (w *world) clientReceived(m *message) {
	if m.kafka == nil {
		return
	}
	conn, ok := w.kafka.conns[m.kafka.conn]
	if !ok || !conn.open {
		return
	}
	conn.forget(m.kafka)
	if c, ok := w.clients[conn.client]; ok {
		c.received(m.kafka)
	}
}

// tickClients times out every client's overdue requests, in address
// order.
func (w *world) tickClients() {
	addresses := make([]address, 0, len(w.clients))
	for a := range w.clients {
		addresses = append(addresses, a)
	}
	slices.Sort(addresses)
	for _, a := range addresses {
		w.clients[a].tick()
	}
}
