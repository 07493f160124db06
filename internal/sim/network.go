package sim

import (
	"container/heap"
	"fmt"
	"sort"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// address names an endpoint: a broker (1 ..< controllerBase), a
// controller of the metadata quorum (controllerBase + its id) or a client
// (< 0). A broker and the controller it shares a machine with (combined
// mode) have two addresses, as they have two listeners.
type address int64

// controllerBase is the first controller address.
const controllerBase address = 1 << 20

func brokerAddress(id metadata.BrokerID) address     { return address(id) }
func controllerAddress(id metadata.BrokerID) address { return controllerBase + address(id) }
func clientAddress(id int) address                   { return address(-1 - id) }

func (a address) isController() bool { return a >= controllerBase }

func (a address) String() string {
	switch {
	case a.isController():
		return fmt.Sprintf("c%d", a-controllerBase)
	case a > 0:
		return fmt.Sprintf("b%d", a)
	}
	return fmt.Sprintf("client%d", -1-a)
}

// message is one message in flight. Exactly one payload is set.
type message struct {
	from, to  address
	deliverAt int64
	sequence  uint64

	// kafka is Kafka bytes on a connection (kafka.go).
	kafka *kafkaPacket
	// request and answer are the controller protocol, raft a message
	// between controllers.
	request *quorum.Request
	answer  *quorum.Answer
	raft    *raftpb.Message
	// partitionState is a ZooKeeper-era push, with rule kafka-4414 off.
	partitionState *metadata.PartitionState
}

// queue orders messages by delivery time, then by send order.
type queue []*message

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].deliverAt != q[j].deliverAt {
		return q[i].deliverAt < q[j].deliverAt
	}
	return q[i].sequence < q[j].sequence
}
func (q queue) Swap(i, j int)    { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)      { *q = append(*q, x.(*message)) }
func (q *queue) Pop() any        { old := *q; m := old[len(old)-1]; *q = old[:len(old)-1]; return m }
func (q queue) peek() *message   { return q[0] }
func (q *queue) push(m *message) { heap.Push(q, m) }
func (q *queue) pop() *message   { return heap.Pop(q).(*message) }
func (q queue) empty() bool      { return len(q) == 0 }
func newQueue() *queue           { q := queue{}; heap.Init(&q); return &q }

type link struct{ from, to address }

// network delivers messages after a random delay, in order on each link (a
// TCP connection) and in any order across links; it loses messages at a
// seeded rate and on partitioned links.
type network struct {
	w        *world
	inFlight *queue
	sequence uint64
	// lastDelivery keeps each link in order.
	lastDelivery map[link]int64
	// cut links lose every message sent on them until healed.
	cut map[link]bool
	// held are messages for paused brokers, delivered when they resume.
	held []*message
	// holding are the links a script holds: their messages wait in onHold,
	// in send order, until the script delivers or drops them one by one, or
	// releases the link. Random runs hold nothing.
	holding map[link]bool
	onHold  map[link][]*message
	// resets are the connections a lost packet resets, at the next tick.
	resets []connID
	// blackholed are addresses whose packets are all dropped, to and from
	// anyone, clients too, while every connection stays open: a node whose
	// network silently stops (a pulled cable, a dropping firewall), until
	// the time given.
	blackholed map[address]int64
}

// lost reports whether a link drops what it carries: cut, or an end
// blackholed.
func (n *network) lost(l link) bool {
	if n.cut[l] {
		return true
	}
	_, from := n.blackholed[l.from]
	_, to := n.blackholed[l.to]
	return from || to
}

func newNetwork(w *world) *network {
	return &network{w: w, inFlight: newQueue(), lastDelivery: map[link]int64{}, cut: map[link]bool{},
		holding: map[link]bool{}, onHold: map[link][]*message{}, blackholed: map[address]int64{}}
}

// send puts a message on the network.
func (n *network) send(m *message) {
	l := link{m.from, m.to}
	if n.lost(l) {
		n.w.stats.messagesLost++
		return // blackholed: the connection, if any, stays open
	}
	lose := n.w.random.Float64() < n.w.shape.messageLossRate && n.w.now >= n.w.options.FaultsFrom
	if lose && !(m.kafka != nil && n.w.shape.withoutConnectionReset) {
		n.w.stats.messagesLost++
		if m.kafka != nil {
			// TCP does not lose a packet silently: a lost one on a live
			// connection is a reset, which both ends learn of.
			n.resets = append(n.resets, m.kafka.conn)
		}
		return
	}
	n.sequence++
	m.sequence = n.sequence
	m.deliverAt = max(n.w.now+1+n.w.random.Int64N(n.w.shape.maxDelayTicks), n.lastDelivery[l])
	n.lastDelivery[l] = m.deliverAt
	n.enqueue(m)
}

// enqueue puts a message in flight, or on hold when a script holds its link.
func (n *network) enqueue(m *message) {
	l := link{m.from, m.to}
	if n.holding[l] {
		n.onHold[l] = append(n.onHold[l], m)
		return
	}
	n.inFlight.push(m)
}

// hold starts holding a link, with the messages already in flight on it.
func (n *network) hold(l link) {
	n.holding[l] = true
	kept := newQueue()
	for !n.inFlight.empty() {
		m := n.inFlight.pop()
		if (link{m.from, m.to}) == l {
			n.onHold[l] = append(n.onHold[l], m)
			continue
		}
		kept.push(m)
	}
	n.inFlight = kept
}

// release stops holding a link: what waits on it leaves now, in order.
func (n *network) release(l link) {
	delete(n.holding, l)
	for _, m := range n.onHold[l] {
		m.deliverAt = max(n.w.now+1, n.lastDelivery[l])
		n.lastDelivery[l] = m.deliverAt
		n.inFlight.push(m)
	}
	delete(n.onHold, l)
}

// takeHeld removes and returns the oldest (or newest) message held on a
// link that match says to take.
func (n *network) takeHeld(l link, newest bool, match func(*message) bool) (*message, bool) {
	waiting := n.onHold[l]
	for k := range waiting {
		i := k
		if newest {
			i = len(waiting) - 1 - k
		}
		if m := waiting[i]; match(m) {
			n.onHold[l] = append(waiting[:i:i], waiting[i+1:]...)
			return m, true
		}
	}
	return nil, false
}

// heldLinks lists the held links with messages waiting, in a stable order.
func (n *network) heldLinks() []link {
	var links []link
	for l, waiting := range n.onHold {
		if len(waiting) > 0 {
			links = append(links, l)
		}
	}
	sort.Slice(links, func(i, j int) bool {
		if links[i].from != links[j].from {
			return links[i].from < links[j].from
		}
		return links[i].to < links[j].to
	})
	return links
}

// sendUnordered puts a message on the network outside any link's order: a
// ZooKeeper-era controller push, which KAFKA-4414 shows arriving in any
// order.
func (n *network) sendUnordered(m *message) {
	n.sequence++
	m.sequence = n.sequence
	m.deliverAt = n.w.now + 1 + n.w.random.Int64N(4*n.w.shape.maxDelayTicks+4)
	n.enqueue(m)
}

// due returns the messages to deliver now, in order.
func (n *network) due() []*message {
	var ready []*message
	for !n.inFlight.empty() && n.inFlight.peek().deliverAt <= n.w.now {
		m := n.inFlight.pop()
		if n.lost(link{m.from, m.to}) {
			n.w.stats.messagesLost++
			continue
		}
		ready = append(ready, m)
	}
	return ready
}

// dropTo loses every message in flight to or from a crashed broker.
func (n *network) dropTo(a address) {
	kept := newQueue()
	for !n.inFlight.empty() {
		m := n.inFlight.pop()
		if m.to != a && m.from != a {
			kept.push(m)
		}
	}
	n.inFlight = kept
	var held []*message
	for _, m := range n.held {
		if m.to != a {
			held = append(held, m)
		}
	}
	n.held = held
	for l := range n.onHold {
		if l.from == a || l.to == a {
			delete(n.onHold, l)
		}
	}
}
