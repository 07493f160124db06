package sim

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/wire"
)

// The simulator's Kafka network: connections carrying Kafka's own bytes
// between clients and brokers' Kafka listeners, and between a follower's
// replica fetcher and its leader's listener, as TCP connections carry them
// in tide serve. A connection is ordered; it can be reset (both ends learn
// it closed), blackholed (a cut link loses its packets while both ends
// still believe it open, until one side's timeout gives it up) and its
// packets delayed; across connections packets are reordered. The brokers'
// front ends see bytes in and bytes out, as they do behind real sockets.

// connID names a connection; 0 is none.
type connID uint64

// kafkaPacket is Kafka bytes on a connection: a request, without its size
// prefix, toward the broker's listener, or a response, without its size
// prefix, toward whoever dialed.
type kafkaPacket struct {
	conn    connID
	request bool
	bytes   []byte
}

// simConn is one connection.
type simConn struct {
	id connID
	// client is who dialed: a client's address, or a broker's (its replica
	// fetcher); server is the broker whose listener it reached, in the
	// incarnation it had then: a restarted broker never sees it again.
	client            address
	server            metadata.BrokerID
	serverIncarnation int
	clientIncarnation int
	open              bool
	// slots are the requests the server took and has not yet answered on
	// the wire, in request order: Kafka clients read responses in the
	// order they sent the requests, whatever order the broker answers in.
	slots []*responseSlot
	// requests remembers each request the server took, by correlation id,
	// until its response is delivered: scripts describe a response by the
	// request it answers.
	requests map[int32]requestInfo
}

// requestInfo is what a response's description needs of its request: its
// API key and version, and a Fetch's bytes (for the offset it read from).
type requestInfo struct {
	key, version int16
	fetch        []byte
}

type responseSlot struct {
	done     bool
	response []byte // nil: no response (acks=0)
	err      error
}

// kafkaAddress is a broker's Kafka listener address in the simulator,
// which it registers with the controller.
func kafkaAddress(id metadata.BrokerID) string { return fmt.Sprintf("b%d:9092", id) }

// brokerAt parses a kafkaAddress.
func brokerAt(address string) (metadata.BrokerID, bool) {
	host, _, ok := strings.Cut(address, ":")
	if !ok || !strings.HasPrefix(host, "b") {
		return metadata.NoBroker, false
	}
	id, err := strconv.Atoi(host[1:])
	return metadata.BrokerID(id), err == nil
}

// kafkaNet is the world's connections.
type kafkaNet struct {
	conns map[connID]*simConn
	next  connID
	// apiRequests counts the requests brokers' front ends took, by API key.
	apiRequests map[int16]int
}

// incarnationOf is a machine's incarnation, or 0 for a client, which
// never restarts.
func (w *world) incarnationOf(a address) int {
	if a > 0 && !a.isController() {
		return w.broker(metadata.BrokerID(a)).incarnation
	}
	return 0
}

// dial opens a connection from client to a broker's listener, or fails
// (returns nil) when the broker is not serving or the link is cut: a SYN
// across a blackholed link gets no answer.
func (w *world) dial(client address, server metadata.BrokerID) *simConn {
	b := w.broker(server)
	if !b.up || b.paused || b.fe == nil || w.network.lost(link{client, brokerAddress(server)}) || w.network.lost(link{brokerAddress(server), client}) {
		return nil
	}
	w.kafka.next++
	c := &simConn{id: w.kafka.next, client: client, server: server, serverIncarnation: b.incarnation,
		clientIncarnation: w.incarnationOf(client), open: true, requests: map[int32]requestInfo{}}
	w.kafka.conns[c.id] = c
	return c
}

// sendKafka puts a request (size prefix included, as clients write them)
// on a connection.
func (w *world) sendKafka(c *simConn, request []byte) {
	if !c.open || len(request) < 4 {
		return
	}
	w.network.send(&message{from: c.client, to: brokerAddress(c.server), kafka: &kafkaPacket{conn: c.id, request: true, bytes: request[4:]}})
}

// closeConn resets a connection: both ends learn it closed, and what was
// in flight on it is lost. A broker's fetcher hears of it at once.
func (w *world) closeConn(c *simConn) {
	if !c.open {
		return
	}
	c.open = false
	c.slots = nil
	delete(w.kafka.conns, c.id)
	if c.client > 0 {
		if b := w.broker(metadata.BrokerID(c.client)); b.up && b.fe != nil && b.incarnation == c.clientIncarnation {
			b.fe.FetcherDisconnected(c.server, fetcher.ConnID(c.id))
			delete(b.fetcherConns, c.server)
			w.flush(b)
		}
		return
	}
	w.clientConnClosed(c)
}

// closeConnsOf resets every connection a machine's broker has, as its
// process dies: the other ends learn it.
func (w *world) closeConnsOf(b *brokerProcess) {
	for _, id := range w.sortedConns() {
		c := w.kafka.conns[id]
		if c.server == b.id || c.client == brokerAddress(b.id) {
			w.closeConn(c)
		}
	}
}

func (w *world) sortedConns() []connID {
	ids := make([]connID, 0, len(w.kafka.conns))
	for id := range w.kafka.conns {
		ids = append(ids, id)
	}
	sortConnIDs(ids)
	return ids
}

func sortConnIDs(ids []connID) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// deliverKafka hands a packet to its end of the connection.
func (w *world) deliverKafka(b *brokerProcess, m *message) {
	packet := m.kafka
	c, ok := w.kafka.conns[packet.conn]
	if !ok || !c.open {
		return // the connection was reset meanwhile
	}
	if packet.request {
		if b.id != c.server || b.incarnation != c.serverIncarnation || b.fe == nil {
			return
		}
		w.serveKafka(b, c, packet.bytes)
		return
	}
	// A response to a broker's replica fetcher.
	c.forget(packet)
	if b.fe == nil || b.incarnation != c.clientIncarnation {
		return
	}
	b.fe.FetcherReceived(c.server, fetcher.ConnID(c.id), packet.bytes)
	w.flush(b)
}

// serveKafka hands a request to the broker's front end, and writes the
// responses of the connection that are ready, in request order.
func (w *world) serveKafka(b *brokerProcess, c *simConn, request []byte) {
	if len(request) >= 8 {
		info := requestInfo{key: int16(binary.BigEndian.Uint16(request)), version: int16(binary.BigEndian.Uint16(request[2:]))}
		if info.key == 1 && w.script != nil {
			info.fetch = request
		}
		w.kafka.apiRequests[info.key]++
		c.requests[int32(binary.BigEndian.Uint32(request[4:]))] = info
	}
	slot := &responseSlot{}
	c.slots = append(c.slots, slot)
	b.fe.HandleKafka(request, func(response wire.Response, err error) {
		slot.done, slot.err = true, err
		if err == nil && response.Bytes != nil {
			flat, flattenErr := response.Flatten()
			slot.response, slot.err = flat, flattenErr
		}
		w.writeResponses(c)
	})
	if w.options.BatchedPasses {
		if b.flushDue {
			w.stats.requestsSharingAPass++
		}
		b.flushDue = true // flushed once the tick's messages are delivered (flushPasses)
		return
	}
	w.flush(b)
}

// flushPasses ends the pass of each broker that took Kafka requests this
// tick without flushing after each (Options.BatchedPasses).
func (w *world) flushPasses() {
	for _, b := range w.machines {
		if b.flushDue {
			b.flushDue = false
			w.flush(b)
		}
	}
}

// writeResponses sends the connection's answered responses from the
// oldest on; an error answer closes the connection, as Kafka does for a
// request it cannot understand.
func (w *world) writeResponses(c *simConn) {
	for c.open && len(c.slots) > 0 && c.slots[0].done {
		slot := c.slots[0]
		c.slots = c.slots[1:]
		if slot.err != nil {
			w.trace("b%d closes connection %d: %v", c.server, c.id, slot.err)
			w.closeConn(c)
			return
		}
		if slot.response != nil {
			w.network.send(&message{from: brokerAddress(c.server), to: c.client, kafka: &kafkaPacket{conn: c.id, bytes: slot.response}})
		}
	}
}

// fetcherDialBackoffTicks is how long a fetcher waits before dialing a
// source again after a dial failed.
const fetcherDialBackoffTicks = 5

// maintainFetchers dials the sources a broker's fetchers need and has no
// connection to.
func (w *world) maintainFetchers(b *brokerProcess) {
	for _, source := range b.fe.FetcherSources() {
		if c, ok := b.fetcherConns[source.ID]; ok && c.open {
			continue
		}
		if w.now < b.fetcherDialAt[source.ID] {
			continue
		}
		id, ok := brokerAt(source.Address)
		if !ok || int(id) < 1 || int(id) > len(w.brokers) {
			continue
		}
		c := w.dial(brokerAddress(b.id), id)
		if c == nil {
			b.fetcherDialAt[source.ID] = w.now + fetcherDialBackoffTicks
			continue
		}
		b.fetcherConns[source.ID] = c
		b.fe.FetcherConnected(source.ID, fetcher.ConnID(c.id))
	}
}

// carryOutFetcher writes what a broker's fetchers have to send and closes
// what they gave up.
func (w *world) carryOutFetcher(b *brokerProcess, out fetcher.Outbox) {
	for _, warning := range out.Warnings {
		w.trace("b%d: %s", b.id, warning)
	}
	for _, closing := range out.Closes {
		if c, ok := w.kafka.conns[connID(closing.Conn)]; ok {
			w.trace("b%d's fetcher gives up connection %d to b%d: %s", b.id, c.id, closing.Source, closing.Reason)
			w.closeConn(c)
		}
	}
	for _, send := range out.Sends {
		if c, ok := w.kafka.conns[connID(send.Conn)]; ok {
			w.sendKafka(c, send.Bytes)
		}
	}
}

// resetLostConns resets the connections whose packets the network lost.
func (w *world) resetLostConns() {
	resets := w.network.resets
	w.network.resets = nil
	for _, id := range resets {
		if c, ok := w.kafka.conns[id]; ok {
			w.stats.connectionResets++
			w.closeConn(c)
		}
	}
}

// forget drops what the connection remembered of the request a response
// answers, once the response is delivered or lost.
func (c *simConn) forget(packet *kafkaPacket) {
	if !packet.request && len(packet.bytes) >= 4 {
		delete(c.requests, int32(binary.BigEndian.Uint32(packet.bytes)))
	}
}
