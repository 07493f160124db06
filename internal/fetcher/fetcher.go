package fetcher

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// The versions a follower sends.
const (
	// FetchVersion is the Fetch a follower sends for topics that have an
	// id (KIP-516): v13 names topics by id alone, so that a leader whose
	// topic of the same name is another incarnation (deleted and created
	// again while this broker's metadata lagged) answers UNKNOWN_TOPIC_ID
	// instead of serving and counting it (rules.FetchByTopicID). It carries
	// CurrentLeaderEpoch (KIP-320), LastFetchedEpoch and DivergingEpoch
	// (KIP-595 style), and ReplicaState (KIP-903) as a tagged field, which
	// Kafka sends from v15 and a v12 or v13 reader may skip.
	FetchVersion = 13
	// FetchByNameVersion is the newest Fetch that names topics by name: a
	// topic created before topic ids, until the controller assigns it one,
	// is fetched with it.
	FetchByNameVersion = 12
	// OffsetsVersion is OffsetForLeaderEpoch's: v3 is the first with the
	// replica id; v4 is flexible, v3 suffices.
	OffsetsVersion = 3
	// ListOffsetsVersion is the ListOffsets a follower sends after
	// OFFSET_OUT_OF_RANGE: v4 carries CurrentLeaderEpoch.
	ListOffsetsVersion = 4
)

// MaxReadyWaitTicks bounds how long a source's next Fetch waits, after an
// answer, for the partitions that answer served to ask again (see
// source.awaiting).
const MaxReadyWaitTicks = 2

// Config configures a Fetcher.
type Config struct {
	// Broker is this broker's id, the replica id of every request.
	Broker metadata.BrokerID
	// MaxWaitMillis, MinBytes and MaxBytes are Kafka's
	// replica.fetch.wait.max.ms, replica.fetch.min.bytes and
	// replica.fetch.response.max.bytes: how long the leader may hold a
	// fetch, how many bytes it waits for, and how many it may send.
	MaxWaitMillis int32
	MinBytes      int32
	MaxBytes      int32
	// FetchTimeoutTicks bounds a Fetch's wait for its response (the long
	// poll and replica.socket.timeout.ms), RequestTimeoutTicks any other
	// request's: past it the connection is given up and its requests fail,
	// so a paused or blackholed leader cannot hold its followers forever.
	FetchTimeoutTicks   int64
	RequestTimeoutTicks int64
	// MaxResponseBytes bounds a response the runtime reads off a source's
	// connection.
	MaxResponseBytes int
	// Rules are the protocol rules in force: all of them outside the
	// simulator and the scenarios (rules.FetchByTopicID is the fetcher's).
	Rules rules.Rules
}

// Validate rejects a configuration that cannot work.
func (c Config) Validate() error {
	if c.Broker < 0 || c.MaxWaitMillis < 0 || c.MinBytes < 0 || c.MaxBytes < 1 || c.FetchTimeoutTicks < 1 ||
		c.RequestTimeoutTicks < 1 || c.MaxResponseBytes < int(c.MaxBytes) {
		return fmt.Errorf("fetcher: bad configuration %+v", c)
	}
	return nil
}

// ConnID names one connection to a source, chosen by the runtime; 0 is
// none.
type ConnID uint64

// Source is a broker this one fetches from, and where its Kafka listener
// is reached.
type Source struct {
	ID      metadata.BrokerID
	Address string
}

// Send is one request for the runtime to write on a source's connection,
// size prefix included.
type Send struct {
	Source metadata.BrokerID
	Conn   ConnID
	Bytes  []byte
}

// Close is a connection the fetcher gave up on (a request overdue, a
// response it could not read): the runtime closes it and, once it is
// closed, reports Disconnected.
type Close struct {
	Source metadata.BrokerID
	Conn   ConnID
	Reason string
}

// Delivery is one partition's answer for its replica, from Source.
type Delivery struct {
	Source  metadata.BrokerID
	Message broker.PeerMessage
}

// Outbox is what the fetcher has for the runtime.
type Outbox struct {
	Sends  []Send
	Closes []Close
	// Warnings are one-line reports worth a log line (a leader with no
	// known Kafka address), each given once.
	Warnings []string
}

// Fetcher carries every source's replication traffic. It is not safe for
// concurrent use.
type Fetcher struct {
	config  Config
	sources map[metadata.BrokerID]*source
	// unknown are the leaders without a Kafka address, warned of once.
	unknown map[metadata.BrokerID]bool
	now     int64
	// errors counts the partition errors received, by Kafka error name:
	// how an operator (and a test) sees a follower fenced.
	errors map[string]int64
	outbox Outbox
}

// New returns a Fetcher with no sources.
func New(config Config) (*Fetcher, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	return &Fetcher{config: config, sources: map[metadata.BrokerID]*source{}, unknown: map[metadata.BrokerID]bool{},
		errors: map[string]int64{}}, nil
}

// source is one leader broker's session: its connection, the partitions'
// queued requests and the requests in flight.
type source struct {
	id      metadata.BrokerID
	address string
	// conn is the live connection, or 0.
	conn        ConnID
	correlation int32
	formatter   *kmsg.RequestFormatter
	// fetches and offsets are the partitions' next requests, the newest
	// per partition, in the order they came (order).
	fetches map[metadata.TopicPartition]replica.FetchRequest
	offsets map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest
	order   []metadata.TopicPartition
	// topicIDs are the queued partitions' topic ids, NoTopicID for a topic
	// without one.
	topicIDs map[metadata.TopicPartition]metadata.TopicID
	// inFlight are the requests sent and not yet answered, by correlation
	// id; fetching says one of them is a Fetch.
	inFlight map[int32]*sentRequest
	fetching bool
	// awaiting are the partitions the last Fetch answer served that have
	// not asked again yet, and awaitUntil the tick past which the next
	// Fetch leaves without them. A follower that took records asks for
	// more only once they are synced, while one that took none asks at
	// once: sending the idle partitions' Fetch first would have the leader
	// park it for the whole long poll (MaxWaitMillis), and the partition
	// whose next fetch lets the leader advance its high watermark and
	// answer an acks=all write wait behind it, one Fetch in flight per
	// source (500 ms per write on tide dev).
	awaiting   map[metadata.TopicPartition]bool
	awaitUntil int64
}

// sentRequest is one request on the wire: what each partition asked.
type sentRequest struct {
	fetches map[metadata.TopicPartition]replica.FetchRequest
	// version is a Fetch's version, and names its topics' names by id when
	// it fetched by id (a v13+ response names topics by id alone).
	version int16
	names   map[metadata.TopicID]string
	offsets map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest
	// outOfRange are fetch answers of OFFSET_OUT_OF_RANGE held back while a
	// ListOffsets asks the leader for its log end offset.
	outOfRange map[metadata.TopicPartition]replica.FetchResponse
	// deadline is the tick past which the response is overdue.
	deadline int64
}

// Enqueue takes one of the broker's peer messages, a request for the
// leader out.To, whose Kafka listener is at address ("" when unknown:
// the message is dropped, and the replica's fetch timeout sends it
// again). It replaces whatever its partition had queued, at any source.
func (f *Fetcher) Enqueue(out broker.Outbound, address string) {
	m := out.Message
	if m.Fetch == nil && m.OffsetsForLeaderEpoch == nil {
		return // answers to peers travel as Kafka responses instead
	}
	for id, other := range f.sources {
		delete(other.awaiting, m.Partition) // it asked again, here or elsewhere
		if id != out.To {
			other.dequeue(m.Partition)
		}
	}
	s := f.source(out.To, address)
	if s == nil {
		return
	}
	s.dequeue(m.Partition)
	s.topicIDs[m.Partition] = m.TopicID
	if m.Fetch != nil {
		s.fetches[m.Partition] = *m.Fetch
	} else {
		s.offsets[m.Partition] = *m.OffsetsForLeaderEpoch
	}
	s.order = append(s.order, m.Partition)
}

// source returns a source's session, starting it on first use, or nil
// when it has no known address.
func (f *Fetcher) source(id metadata.BrokerID, address string) *source {
	if s, ok := f.sources[id]; ok {
		if address != "" {
			s.address = address // a restarted broker may register another
		}
		return s
	}
	if address == "" {
		if !f.unknown[id] {
			f.unknown[id] = true
			f.outbox.Warnings = append(f.outbox.Warnings, fmt.Sprintf("no Kafka address for leader %d: its partitions are not replicated here", id))
		}
		return nil
	}
	s := &source{id: id, address: address,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tide-replica-" + strconv.Itoa(int(f.config.Broker)))),
		fetches:   map[metadata.TopicPartition]replica.FetchRequest{},
		offsets:   map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{},
		topicIDs:  map[metadata.TopicPartition]metadata.TopicID{},
		awaiting:  map[metadata.TopicPartition]bool{},
		inFlight:  map[int32]*sentRequest{}}
	f.sources[id] = s
	return s
}

func (s *source) dequeue(tp metadata.TopicPartition) {
	_, fetch := s.fetches[tp]
	_, offsets := s.offsets[tp]
	if !fetch && !offsets {
		return
	}
	delete(s.fetches, tp)
	delete(s.offsets, tp)
	delete(s.topicIDs, tp)
	s.order = slices.DeleteFunc(s.order, func(queued metadata.TopicPartition) bool { return queued == tp })
}

// Sources lists the sources the runtime keeps a connection to, by id, with
// their current addresses.
func (f *Fetcher) Sources() []Source {
	list := make([]Source, 0, len(f.sources))
	for _, id := range slices.Sorted(maps.Keys(f.sources)) {
		list = append(list, Source{ID: id, Address: f.sources[id].address})
	}
	return list
}

// Connected adopts a new connection to a source and sends what is queued;
// a connection it had is given up first.
func (f *Fetcher) Connected(id metadata.BrokerID, conn ConnID) []Delivery {
	s, ok := f.sources[id]
	if !ok || conn == 0 {
		return nil
	}
	var failed []Delivery
	if s.conn != 0 {
		failed = f.fail(s, s.conn, "replaced")
	}
	s.conn = conn
	f.send(s)
	return failed
}

// Disconnected reports a connection closed (by either side): every
// request in flight on it fails, after which each replica backs off and
// fetches again.
func (f *Fetcher) Disconnected(id metadata.BrokerID, conn ConnID) []Delivery {
	if s, ok := f.sources[id]; ok && s.conn == conn && conn != 0 {
		return f.fail(s, conn, "")
	}
	return nil
}

// fail drops a source's connection, asking the runtime to close it when
// the fetcher gave it up (reason set), and fails its requests in flight.
func (f *Fetcher) fail(s *source, conn ConnID, reason string) []Delivery {
	if reason != "" {
		f.outbox.Closes = append(f.outbox.Closes, Close{Source: s.id, Conn: conn, Reason: reason})
	}
	s.conn, s.fetching = 0, false
	clear(s.awaiting)
	sent := s.inFlight
	s.inFlight = map[int32]*sentRequest{}
	var failed []Delivery
	for _, correlation := range slices.Sorted(maps.Keys(sent)) {
		failed = f.failRequest(s, failed, sent[correlation], kerr.NetworkException.Code)
	}
	return failed
}

// failRequest answers every partition of a request with code.
func (f *Fetcher) failRequest(s *source, out []Delivery, sent *sentRequest, code int16) []Delivery {
	for _, tp := range sortedPartitions(sent.fetches) {
		out = f.deliver(s, out, tp, broker.PeerMessage{FetchResponse: &replica.FetchResponse{ID: sent.fetches[tp].ID, ErrorCode: code,
			HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, LeaderEpoch: record.NoLeaderEpoch}})
	}
	for _, tp := range sortedPartitions(sent.offsets) {
		out = f.deliver(s, out, tp, broker.PeerMessage{OffsetsForLeaderEpochAnswer: &replica.OffsetsForLeaderEpochAnswer{ID: sent.offsets[tp].ID,
			ErrorCode: code, LeaderEpoch: record.NoLeaderEpoch, EndOffset: -1}})
	}
	for _, tp := range sortedPartitions(sent.outOfRange) {
		answer := sent.outOfRange[tp] // still OFFSET_OUT_OF_RANGE, without a log end
		out = f.deliver(s, out, tp, broker.PeerMessage{FetchResponse: &answer})
	}
	return out
}

// deliver adds one partition's answer, counting its error.
func (f *Fetcher) deliver(s *source, out []Delivery, tp metadata.TopicPartition, message broker.PeerMessage) []Delivery {
	code := int16(0)
	if message.FetchResponse != nil {
		code = message.FetchResponse.ErrorCode
	} else if message.OffsetsForLeaderEpochAnswer != nil {
		code = message.OffsetsForLeaderEpochAnswer.ErrorCode
	}
	if code != 0 {
		f.errors[errorName(code)]++
	}
	message.Partition = tp
	return append(out, Delivery{Source: s.id, Message: message})
}

func errorName(code int16) string {
	if known, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return known.Message
	}
	return strconv.Itoa(int(code))
}

func sortedPartitions[V any](m map[metadata.TopicPartition]V) []metadata.TopicPartition {
	return slices.SortedFunc(maps.Keys(m), func(a, b metadata.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}

// SendAll queues what every source may send now.
func (f *Fetcher) SendAll() {
	for _, id := range slices.Sorted(maps.Keys(f.sources)) {
		f.send(f.sources[id])
	}
}

// TakeOutbox returns what the fetcher has for the runtime and empties it.
func (f *Fetcher) TakeOutbox() Outbox {
	out := f.outbox
	f.outbox = Outbox{}
	return out
}

// Tick advances the fetcher's clock and gives up the connections whose
// oldest request is overdue. Time is counted in the node loop's ticks, as
// the cores count it, not read from a clock: a process paused with SIGSTOP
// and resumed finds its requests as overdue as when it stopped, and
// handles the responses that arrived meanwhile first.
func (f *Fetcher) Tick() []Delivery {
	f.now++
	var failed []Delivery
	for _, id := range slices.Sorted(maps.Keys(f.sources)) {
		s := f.sources[id]
		for _, sent := range s.inFlight {
			if f.now > sent.deadline {
				failed = append(failed, f.fail(s, s.conn, "request timed out")...)
				break
			}
		}
	}
	return failed
}

// awaitAnswered has the source's next Fetch wait for the partitions a Fetch
// answer served without error: each asks again as soon as it has taken the
// answer (and synced what it appended). One answered with an error backs
// off instead, and is not waited for.
func (f *Fetcher) awaitAnswered(s *source, answered []Delivery) {
	clear(s.awaiting)
	for _, delivery := range answered {
		tp := delivery.Message.Partition
		_, queued := s.fetches[tp]
		if response := delivery.Message.FetchResponse; response != nil && response.ErrorCode == 0 && !queued {
			s.awaiting[tp] = true
		}
	}
	s.awaitUntil = f.now + MaxReadyWaitTicks
}

// ErrorCounts is a copy of the partition errors received, by Kafka error
// name.
func (f *Fetcher) ErrorCounts() map[string]int64 { return maps.Clone(f.errors) }

// errMalformed is a response that does not decode: the connection is
// given up.
var errMalformed = errors.New("fetcher: malformed response")

// Received handles one response from a source (its bytes after the size
// prefix), read off connection conn. The Deliveries returned refer to
// payload (their records are slices of it), and the caller hands them to
// the replicas before it reuses payload; nothing Received keeps past the
// call refers to it.
func (f *Fetcher) Received(id metadata.BrokerID, conn ConnID, payload []byte) []Delivery {
	s, ok := f.sources[id]
	if !ok || s.conn != conn || conn == 0 {
		return nil // from a connection already given up
	}
	if len(payload) < 4 {
		return f.fail(s, conn, "short response")
	}
	correlation := int32(binary.BigEndian.Uint32(payload))
	sent, ok := s.inFlight[correlation]
	if !ok {
		return f.fail(s, conn, fmt.Sprintf("response to unknown request %d", correlation))
	}
	delete(s.inFlight, correlation)
	var out []Delivery
	var err error
	switch {
	case sent.fetches != nil:
		s.fetching = false
		out, err = f.fetchResponse(s, sent, payload[4:])
		f.awaitAnswered(s, out)
	case sent.outOfRange != nil:
		out, err = f.listOffsetsResponse(s, sent, payload[4:])
	default:
		out, err = f.offsetsResponse(s, sent, payload[4:])
	}
	if err != nil {
		f.outbox.Warnings = append(f.outbox.Warnings, fmt.Sprintf("undecodable response from leader %d: %v", id, err))
		out = f.failRequest(s, nil, sent, kerr.CorruptMessage.Code)
		return append(out, f.fail(s, conn, err.Error())...)
	}
	return out
}
