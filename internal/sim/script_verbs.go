package sim

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/record"
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

// ProducerEndpoint is produce n's client's end of a link: its requests to
// a broker and the broker's answers travel on it.
func ProducerEndpoint(n int) Endpoint { return Endpoint(-n) }

func (s *Script) link(from, to Endpoint) (link, error) {
	for _, end := range []Endpoint{from, to} {
		switch {
		case end < 0:
			if int(-end) > len(s.produces) {
				return link{}, fmt.Errorf("no produce %d yet (there are %d)", -end, len(s.produces))
			}
		case end != ControllerEndpoint:
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
	switch {
	case end == ControllerEndpoint:
		return controllerAddress(s.w.controllers[0].id)
	case end < 0:
		return clientAddress(int(-end))
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
		if maxBytes > 0 && m.kafka != nil && m.kafka.request {
			m.kafka.bytes = capFetchBytes(m.kafka.bytes, maxBytes)
		}
		s.note("delivered %s", s.w.describeMessage(m))
		s.w.dispatch(m)
	})
}

// Drop loses held messages on a link.
func (s *Script) Drop(from, to Endpoint, pick Pick) error {
	return s.takeHeld(from, to, pick, func(m *message) {
		s.note("dropped %s", s.w.describeMessage(m))
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
	match := func(m *message) bool { return pick.Kind == "" || s.w.messageKind(m) == pick.Kind }
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

// Blackhole drops every packet to and from a broker (its clients', its
// peers', the controller's) while every connection stays open, until
// Unblackhole: only timeouts tell anyone.
func (s *Script) Blackhole(id metadata.BrokerID) error {
	b, err := s.broker(id)
	if err == nil {
		s.w.blackhole(b, maxScriptTicks*10)
	}
	return err
}

// Unblackhole ends a Blackhole.
func (s *Script) Unblackhole(id metadata.BrokerID) error {
	b, err := s.broker(id)
	if err == nil {
		for _, a := range b.addresses() {
			delete(s.w.network.blackholed, a)
		}
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

// AlterConfig sets one config of the script's topic (Kafka's
// IncrementalAlterConfigs SET) at the active controller and notes its
// answer; the controller's records are traced as they commit.
func (s *Script) AlterConfig(key, value string) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	answer, err := s.adminRequest(quorum.Request{AlterConfigs: &controller.AlterConfigsRequest{
		Resource:    metadata.ConfigResource{Type: metadata.ConfigTopic, Name: s.partition.Topic},
		Incremental: true, Changes: []controller.ConfigChange{{Key: key, Op: controller.ConfigSet, Value: value}},
	}})
	if err != nil {
		return err
	}
	if answer.ErrorCode != 0 {
		message := ""
		if answer.AlterConfigs != nil {
			message = ": " + answer.AlterConfigs.Message
		}
		s.note("alter-config %s=%s: %s%s", key, value, controller.CodeName(answer.ErrorCode), message)
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
		s.w.completeSyncs(b, true)
		b.node.SyncDirty()
		s.w.flush(b)
	}
	return nil
}

// ListOffsets asks a broker for the latest offset, as a consumer, and
// notes the answer. The consumer sends the leader epoch its metadata (the
// controller's image) gives, as a KIP-320 client does.
func (s *Script) ListOffsets(id metadata.BrokerID) error {
	return s.consume(id, func(epoch record.LeaderEpoch) kmsg.Request { return listOffsetsRequest(s.partition, epoch, 7) })
}

// Fetch reads committed records from a broker from an offset, as a
// consumer, and notes the answer.
func (s *Script) Fetch(id metadata.BrokerID, from record.Offset) error {
	s.fetchFrom = from
	return s.consume(id, func(epoch record.LeaderEpoch) kmsg.Request { return fetchRequest(s.partition, epoch, from, 1<<20, 12) })
}

// consume sends a consumer request and ticks until it is answered.
func (s *Script) consume(id metadata.BrokerID, build func(record.LeaderEpoch) kmsg.Request) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	if _, err := s.broker(id); err != nil {
		return err
	}
	state, _ := s.w.metadataImage().Partition(s.partition)
	s.consumerAnswer = nil
	answered := false
	sent := s.w.client(clientAddress(consumerClient)).send(id, build(state.LeaderEpoch), func(response kmsg.Response, ok bool) {
		answered, s.consumerAnswer = true, response
	})
	if !sent {
		s.note("no connection to %d", id)
		return nil
	}
	if _, ok := s.RunUntil(func() bool { return answered }, clientAnswerTicks); !ok || s.consumerAnswer == nil {
		s.note("no answer from %d", id)
		return nil
	}
	s.consumed(id, s.consumerAnswer)
	return nil
}

// consumed notes a consumer's answer and shows it to the checker: the high
// watermark it saw, and the records it read.
func (s *Script) consumed(id metadata.BrokerID, response kmsg.Response) {
	client := clientAddress(consumerClient)
	switch response := response.(type) {
	case *kmsg.ListOffsetsResponse:
		code, offset, ok := listOffsetsResult(response)
		switch {
		case !ok:
			s.note("list-offsets answered by %d: a malformed response", id)
		case code == 0:
			s.note("list-offsets answered by %d: latest offset %d", id, offset)
			s.w.checker.observeHighWatermark(client, s.partition, offset, fmt.Sprintf("ListOffsets from b%d", id))
		default:
			s.note("list-offsets answered by %d: %s", id, errorName(code))
		}
	case *kmsg.FetchResponse:
		partition, ok := fetchResult(response)
		switch {
		case !ok:
			s.note("fetch answered by %d: %s", id, errorName(response.ErrorCode))
		case partition.ErrorCode == 0:
			highWatermark := record.Offset(partition.HighWatermark)
			s.note("fetch answered by %d: records=[%d, %d) hw=%d", id, s.fetchFrom, batchesEnd(partition.RecordBatches, s.fetchFrom), highWatermark)
			s.w.checker.observeHighWatermark(client, s.partition, highWatermark, fmt.Sprintf("a fetch from b%d", id))
			s.w.checker.observeRead(s.partition, partition.RecordBatches, highWatermark, s.fetchFrom)
		default:
			s.note("fetch answered by %d: %s", id, errorName(partition.ErrorCode))
		}
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
