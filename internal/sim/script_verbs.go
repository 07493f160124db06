package sim

import (
	"fmt"
	"strings"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// Endpoint names one end of a link: a broker (1..n) or the controller (0).
type Endpoint = metadata.BrokerID

// ControllerEndpoint is the controller's end of a link.
const ControllerEndpoint Endpoint = 0

// Limits on what one verb may ask for, so a typo cannot hang a script.
const (
	maxScriptTicks    = 100_000
	maxScriptMessages = 1000
	// clientAnswerTicks bounds how long a consumer request waits for its
	// answer: a request and its answer take a tick each.
	clientAnswerTicks = 20
	// quietTicks is how long nothing may change for Stabilize to end:
	// longer than a session timeout and the replica lag time, so that a
	// fencing or an ISR shrink still to come is not missed.
	quietTicks = 2 * replicaLagTicks
)

func (s *Script) link(from, to Endpoint) (link, error) {
	for _, end := range []Endpoint{from, to} {
		if end != ControllerEndpoint {
			if _, err := s.broker(end); err != nil {
				return link{}, err
			}
		}
	}
	if from == to {
		return link{}, fmt.Errorf("a link joins two different ends")
	}
	return link{s.endpointAddress(from), s.endpointAddress(to)}, nil
}

// endpointAddress is a script endpoint's address: the controller is the
// script's one controller.
func (s *Script) endpointAddress(end Endpoint) address {
	if end == ControllerEndpoint {
		return controllerAddress(s.w.controllers[0].id)
	}
	return brokerAddress(end)
}

// Hold holds the messages on a link (those in flight on it, and those sent
// later) for Deliver and Drop; everything else keeps flowing.
func (s *Script) Hold(from, to Endpoint) error {
	l, err := s.link(from, to)
	if err == nil {
		s.w.network.hold(l)
	}
	return err
}

// Release stops holding a link; what waits on it leaves in order.
func (s *Script) Release(from, to Endpoint) error {
	l, err := s.link(from, to)
	if err == nil {
		s.w.network.release(l)
	}
	return err
}

// Pick chooses held messages: up to Count of them (at least one), oldest
// first or Newest first, of one Kind if set (a message's name as the
// scripts print it: fetch, fetch-response, metadata, partition-state,
// heartbeat, alter-partition, ...).
type Pick struct {
	Count  int
	Newest bool
	Kind   string
}

// Deliver delivers held messages on a link now. maxBytes, when positive,
// caps the fetches delivered as a follower's replica.fetch.max.bytes would:
// a fetch still returns its first batch whole.
func (s *Script) Deliver(from, to Endpoint, pick Pick, maxBytes int64) error {
	return s.takeHeld(from, to, pick, func(m *message) {
		if maxBytes > 0 && m.peer != nil && m.peer.Fetch != nil {
			fetch := *m.peer.Fetch
			fetch.MaxBytes = maxBytes
			m.peer.Fetch = &fetch
		}
		s.note("delivered %s", describeMessage(m))
		s.w.dispatch(m)
	})
}

// Drop loses held messages on a link.
func (s *Script) Drop(from, to Endpoint, pick Pick) error {
	return s.takeHeld(from, to, pick, func(m *message) {
		s.note("dropped %s", describeMessage(m))
		s.w.stats.messagesLost++
	})
}

func (s *Script) takeHeld(from, to Endpoint, pick Pick, use func(*message)) error {
	l, err := s.link(from, to)
	if err != nil {
		return err
	}
	if !s.w.network.holding[l] {
		return fmt.Errorf("link %s->%s is not held (hold it first)", shortAddress(l.from), shortAddress(l.to))
	}
	count := max(pick.Count, 1)
	if count > maxScriptMessages {
		return fmt.Errorf("count=%d: at most %d messages", count, maxScriptMessages)
	}
	match := func(m *message) bool { return pick.Kind == "" || messageKind(m) == pick.Kind }
	for i := 0; i < count; i++ {
		m, ok := s.w.network.takeHeld(l, pick.Newest, match)
		if !ok {
			s.note("nothing held on %s->%s", shortAddress(l.from), shortAddress(l.to))
			return nil
		}
		use(m)
	}
	return nil
}

// Cut loses every message on a link until Heal.
func (s *Script) Cut(from, to Endpoint) error {
	l, err := s.link(from, to)
	if err == nil {
		s.w.network.cut[l] = true
		s.w.stats.partitions++
	}
	return err
}

// Heal ends a Cut.
func (s *Script) Heal(from, to Endpoint) error {
	l, err := s.link(from, to)
	if err == nil {
		delete(s.w.network.cut, l)
	}
	return err
}

// Crash kills a broker process; with powerLoss its disk keeps only what it
// had synced. It stays down until Restart.
func (s *Script) Crash(id metadata.BrokerID, powerLoss bool) error {
	b, err := s.broker(id)
	if err != nil {
		return err
	}
	if !b.up {
		return fmt.Errorf("broker %d is not running", id) // a paused one may crash
	}
	s.remember(b)
	if powerLoss {
		s.powerLosses++
	}
	s.w.crash(b, powerLoss)
	return nil
}

// Restart starts a stopped broker as a new incarnation.
func (s *Script) Restart(id metadata.BrokerID) error {
	b, err := s.broker(id)
	if err != nil {
		return err
	}
	if b.up {
		return fmt.Errorf("broker %d is running", id)
	}
	s.w.startMachine(b)
	return nil
}

// Pause stops a broker's process without killing it (SIGSTOP) until
// Resume: a zombie that wakes with the state it had.
func (s *Script) Pause(id metadata.BrokerID) error {
	b, err := s.runningBroker(id)
	if err == nil {
		s.w.pause(b, maxScriptTicks*10)
	}
	return err
}

// Resume wakes a paused broker; the messages that waited for it arrive.
func (s *Script) Resume(id metadata.BrokerID) error {
	b, err := s.broker(id)
	if err != nil {
		return err
	}
	if !b.paused {
		return fmt.Errorf("broker %d is not paused", id)
	}
	s.w.resume(b)
	return nil
}

// Shutdown begins a controlled shutdown: the controller moves the broker's
// leaderships away, and it stops once fenced (KAFKA-3670).
func (s *Script) Shutdown(id metadata.BrokerID) error {
	b, err := s.runningBroker(id)
	if err != nil {
		return err
	}
	if b.node == nil || b.shuttingDown {
		return fmt.Errorf("broker %d is not registered, or already shutting down", id)
	}
	s.w.beginShutdown(b)
	return nil
}

func (s *Script) runningBroker(id metadata.BrokerID) (*brokerProcess, error) {
	b, err := s.broker(id)
	if err != nil {
		return nil, err
	}
	if !b.up || b.paused {
		return nil, fmt.Errorf("broker %d is not running", id)
	}
	return b, nil
}

// ElectPreferred runs a preferred leader election (Kafka's ElectLeaders)
// and notes the controller's answer for the script's partition.
func (s *Script) ElectPreferred() error {
	if err := s.needTopic(); err != nil {
		return err
	}
	s.w.stats.preferred++
	answer, err := s.adminRequest(quorum.Request{ElectPreferred: &quorum.ElectPreferredRequest{}})
	if err != nil {
		return err
	}
	if answer.ElectPreferred == nil {
		s.note("elect-preferred: %s", controller.CodeName(answer.ErrorCode))
		return nil
	}
	for _, result := range answer.ElectPreferred.Results {
		s.note("elect-preferred %s: %s", result.TopicPartition, controller.CodeName(result.ErrorCode))
	}
	return nil
}

// Sync completes the syncs a broker's disk was asked for (ManualSync).
func (s *Script) Sync(id metadata.BrokerID) error {
	b, err := s.runningBroker(id)
	if err != nil {
		return err
	}
	if b.node != nil {
		b.node.SyncDirty()
		s.w.flush(b)
	}
	return nil
}

// ListOffsets asks a broker for the latest offset, as a consumer, and
// notes the answer. The consumer sends the leader epoch its metadata (the
// controller's image) gives, as a KIP-320 client does.
func (s *Script) ListOffsets(id metadata.BrokerID) error {
	return s.consume(id, func(request *broker.ClientRequest, epoch record.LeaderEpoch) {
		request.ListOffsets = &replica.ListOffsetsRequest{ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: epoch, Timestamp: replica.LatestTimestamp}
	})
}

// Fetch reads committed records from a broker from an offset, as a
// consumer, and notes the answer.
func (s *Script) Fetch(id metadata.BrokerID, from record.Offset) error {
	return s.consume(id, func(request *broker.ClientRequest, epoch record.LeaderEpoch) {
		request.Fetch = &replica.FetchRequest{ReplicaID: replica.ConsumerReplicaID, ReplicaEpoch: metadata.NoBrokerEpoch,
			CurrentLeaderEpoch: epoch, FetchOffset: from, LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 20}
	})
}

// consume sends a consumer request and ticks until it is answered.
func (s *Script) consume(id metadata.BrokerID, fill func(*broker.ClientRequest, record.LeaderEpoch)) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	if _, err := s.broker(id); err != nil {
		return err
	}
	state, _ := s.w.metadataImage().Partition(s.partition)
	from := clientAddress(consumerClient)
	request := &broker.ClientRequest{Client: broker.ClientID(from), Partition: s.partition}
	fill(request, state.LeaderEpoch)
	s.consumerAnswer = nil
	s.w.network.send(&message{from: from, to: brokerAddress(id), clientRequest: request})
	if _, ok := s.RunUntil(func() bool { return s.consumerAnswer != nil }, clientAnswerTicks); !ok {
		s.note("no answer from %d", id)
		return nil
	}
	s.consumed(id, s.consumerAnswer)
	return nil
}

// consumed notes a consumer's answer and shows it to the checker: the high
// watermark it saw, and the records it read.
func (s *Script) consumed(id metadata.BrokerID, answer *broker.ClientAnswer) {
	client := clientAddress(consumerClient)
	switch {
	case answer.ListOffsets != nil && answer.ListOffsets.ErrorCode == 0:
		s.note("list-offsets answered by %d: latest offset %d", id, answer.ListOffsets.Offset)
		s.w.checker.observeHighWatermark(client, answer.Partition, answer.ListOffsets.Offset, fmt.Sprintf("ListOffsets from b%d", id))
	case answer.ListOffsets != nil:
		s.note("list-offsets answered by %d: %s", id, errorName(answer.ListOffsets.ErrorCode))
	case answer.Fetch != nil && answer.Fetch.ErrorCode == 0:
		s.note("fetch answered by %d: records=[%d, %d) hw=%d", id, answer.Fetch.ReadFrom, readEnd(answer.Fetch), answer.Fetch.HighWatermark)
		s.w.checker.observeHighWatermark(client, answer.Partition, answer.Fetch.HighWatermark, fmt.Sprintf("a fetch from b%d", id))
		s.w.checker.observeRead(answer.Partition, answer.Fetch.Records, answer.Fetch.HighWatermark, answer.Fetch.ReadFrom)
	case answer.Fetch != nil:
		s.note("fetch answered by %d: %s", id, errorName(answer.Fetch.ErrorCode))
	default:
		s.note("answered by %d: %s", id, errorName(answer.ErrorCode))
	}
}

// Tick advances the world n ticks.
func (s *Script) Tick(n int64) error {
	if n < 1 || n > maxScriptTicks {
		return fmt.Errorf("n=%d: 1 to %d ticks", n, maxScriptTicks)
	}
	for ; n > 0; n-- {
		s.tick()
	}
	return nil
}

func (s *Script) tick() {
	s.w.tick(false, false)
	for _, b := range s.w.brokers {
		if b.up && !b.paused && b.node != nil {
			s.remember(b)
		}
	}
}

// RunUntil ticks until condition holds, at most limit ticks, and returns
// how many it took and whether the condition came to hold.
func (s *Script) RunUntil(condition func() bool, limit int64) (int64, bool) {
	for ticks := int64(0); ticks <= min(limit, maxScriptTicks); ticks++ {
		if condition() {
			return ticks, true
		}
		s.tick()
	}
	return limit, false
}

// Stabilize ticks until nothing a script can see changes for quietTicks:
// the table, what is held, the answers and the metadata log. It returns
// the ticks it took, less the quiet ones, and false if the cluster never
// settled within limit ticks.
func (s *Script) Stabilize(limit int64) (int64, bool) {
	start, lastChange := s.w.now, s.w.now
	last := s.fingerprint()
	for s.w.now-start < min(limit, maxScriptTicks) {
		s.tick()
		if now := s.fingerprint(); now != last {
			last, lastChange = now, s.w.now
		}
		if s.w.now-lastChange >= quietTicks {
			return lastChange - start, true
		}
	}
	return limit, false
}

func (s *Script) fingerprint() string {
	var b strings.Builder
	b.WriteString(s.State())
	fmt.Fprintf(&b, "%d %d", s.w.metadataImage().Offset(), len(s.output))
	return b.String()
}
