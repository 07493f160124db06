package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// ScriptConfig configures a scripted run: the same world as a random run
// (whole brokers, one dedicated controller of the real metadata quorum, the
// network, the checker) with no
// random faults and no random workload. Every message takes one tick and
// none is lost; the seed still drives what little randomness is left (the
// draw of restart ticks the script ignores), so a script runs the same
// every time.
type ScriptConfig struct {
	Brokers int
	Seed    uint64
	// Legacy rules are switched off, to show the failures they prevent.
	Legacy []rules.Rule
	// FlushNever is flush=never; the default is flush=always.
	FlushNever bool
	// ManualSync leaves every sync to Script.Sync: a disk that completes a
	// sync only when the script says, so that it can show what happens to
	// data acknowledged before it was synced.
	ManualSync bool
	// RetentionMs, RetentionBytes and SegmentBytes, when set, are the
	// brokers' retention.ms, retention.bytes and segment.bytes; retention
	// is then checked every virtual second.
	RetentionMs    int64
	RetentionBytes int64
	SegmentBytes   int64
}

// MaxScriptBrokers bounds a script's cluster: the tables stay readable.
const MaxScriptBrokers = 9

// scriptStartTicks bounds how long the brokers of a new script take to
// register and be unfenced.
const scriptStartTicks = 500

// Validate rejects a configuration a script cannot run.
func (c ScriptConfig) Validate() error {
	if c.Brokers < 1 || c.Brokers > MaxScriptBrokers {
		return fmt.Errorf("brokers=%d: a script runs 1 to %d brokers", c.Brokers, MaxScriptBrokers)
	}
	return nil
}

// Script is a scripted run of the simulator, driven one verb at a time:
// the steps of a seed document. Verbs that make output (messages delivered
// by hand, answers to the script's clients, the controller's decisions and
// the replicas' truncations as they happen) collect it until Output takes
// it. A Script is not safe for concurrent use.
type Script struct {
	w         *world
	partition metadata.TopicPartition
	topic     bool
	// produces are the script's producers, one per produce: produce n is
	// client n and produces[n-1].
	produces []scriptProduce
	// consumer is the one consumer client (client 0): its answers, and the
	// position it reads from.
	consumerAnswer kmsg.Response
	// fetchFrom is where the consumer's last fetch read from.
	fetchFrom record.Offset
	output    []string
	// lastSeen is each replica's row as it was when last running, for the
	// table's offline rows.
	lastSeen    map[metadata.BrokerID]replicaRow
	powerLosses int
}

type scriptProduce struct {
	acks            int16
	batch           []byte
	answered, acked bool
}

// ProduceIdempotent is Produce as an idempotent producer (KIP-98): the
// script's client first takes a producer id with InitProducerId from the
// broker, then sends the batch with sequence 0, so that Retry can resend
// it, same sequence, and the leader answers a retry of a batch it already
// has with the original offset.
func (s *Script) ProduceIdempotent(id metadata.BrokerID, count int, acks int16) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	if _, err := s.broker(id); err != nil {
		return err
	}
	client := s.w.client(clientAddress(len(s.produces) + 1))
	var answer *kmsg.InitProducerIDResponse
	// The broker may first need a block of ids from the controller: it
	// answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, and a producer asks
	// again.
	for attempt := 0; attempt < 10 && (answer == nil || answer.ErrorCode != 0); attempt++ {
		request := kmsg.NewPtrInitProducerIDRequest()
		request.Version, request.TransactionTimeoutMillis = 4, 60_000
		answered := false
		if !client.send(id, request, func(response kmsg.Response, ok bool) {
			answered = true
			if ok {
				answer = response.(*kmsg.InitProducerIDResponse)
			}
		}) {
			return fmt.Errorf("no connection to broker %d", id)
		}
		s.RunUntil(func() bool { return answered }, clientAnswerTicks)
		s.RunUntil(func() bool { return false }, retryBackoffTicks)
	}
	if answer == nil || answer.ErrorCode != 0 {
		return fmt.Errorf("broker %d gave no producer id", id)
	}
	s.note("producer %d: producer id %d", len(s.produces)+1, answer.ProducerID)
	return s.produce(id, count, acks, &record.ProducerState{ProducerID: answer.ProducerID, ProducerEpoch: answer.ProducerEpoch})
}

// Retry resends produce n's batch, byte for byte (same producer id and
// sequence), to a broker, from the same client, as a producer does after a
// timeout or a retriable error; its answer is noted when it arrives.
func (s *Script) Retry(number int, id metadata.BrokerID) error {
	if number < 1 || number > len(s.produces) {
		return fmt.Errorf("no produce %d (there are %d)", number, len(s.produces))
	}
	if _, err := s.broker(id); err != nil {
		return err
	}
	p := &s.produces[number-1]
	p.answered = false
	request := produceRequest(s.partition, append([]byte(nil), p.batch...), p.acks, 9)
	if !s.w.client(clientAddress(number)).send(id, request, func(response kmsg.Response, ok bool) {
		s.produceAnswered(number, id, response, ok)
	}) {
		s.note("produce %d: no connection to %d", number, id)
	}
	return nil
}

const consumerClient = 0

// NewScript starts a scripted run: the brokers start and register, and
// NewScript returns once the controller has unfenced them all.
func NewScript(config ScriptConfig) (*Script, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	options := Options{Seed: config.Seed, Legacy: config.Legacy, TraceLines: 1 << 12}
	random := rand.New(rand.NewPCG(config.Seed, 0x74696465_73696d))
	s := &Script{lastSeen: map[metadata.BrokerID]replicaRow{}}
	s.w = newWorldOfShape(options, random, scriptShape(config))
	s.w.script = s
	s.w.startMachines()
	if _, ok := s.RunUntil(s.allUnfenced, scriptStartTicks); !ok {
		return nil, fmt.Errorf("the brokers did not all register within %d ticks", scriptStartTicks)
	}
	s.output = nil
	return s, nil
}

// scriptShape is a script's cluster: its brokers, one dedicated
// controller, one-tick messages, no loss, no faults and no workload of its
// own.
func scriptShape(config ScriptConfig) shape {
	s := shape{brokers: config.Brokers, partitions: 1, flushAlways: !config.FlushNever, maxDelayTicks: 1, syncRate: 1, controllers: 1,
		maxBatchBytes: 16 << 10}
	if config.ManualSync {
		s.syncRate = 0
	}
	s.retentionMs, s.retentionBytes, s.segmentBytes = config.RetentionMs, config.RetentionBytes, config.SegmentBytes
	if config.SegmentBytes > 0 {
		s.maxBatchBytes = int(min(int64(s.maxBatchBytes), config.SegmentBytes))
	}
	if config.RetentionMs != 0 || config.RetentionBytes != 0 {
		s.retentionCheckIntervalMs = 1000
	}
	return s
}

// adminRequest sends a request to the active controller and runs until
// it is answered.
func (s *Script) adminRequest(request quorum.Request) (quorum.Answer, error) {
	var id uint64
	var answer quorum.Answer
	answered := func() bool {
		if id == 0 {
			id = s.w.adminRequest(request)
			return false
		}
		var ok bool
		answer, ok = s.w.adminAnswer(id)
		return ok
	}
	if _, ok := s.RunUntil(answered, scriptStartTicks); !ok {
		return quorum.Answer{}, fmt.Errorf("the controller did not answer %s within %d ticks", request, scriptStartTicks)
	}
	return answer, nil
}

func (s *Script) allUnfenced() bool {
	for _, b := range s.w.brokers {
		if state, ok := s.w.metadataImage().Broker(b.id); !ok || state.Fenced {
			return false
		}
	}
	return true
}

// note collects a line of the current step's output.
func (s *Script) note(format string, args ...any) {
	s.output = append(s.output, fmt.Sprintf(format, args...))
}

// event notes what the world traces as it happens (the controller's
// records, truncations, new leaderships, a violation), with its tick.
func (s *Script) event(text string) {
	s.note("[%d] %s", s.w.now, text)
}

// Output returns the output collected since the last call.
func (s *Script) Output() []string {
	out := s.output
	s.output = nil
	return out
}

// broker returns a broker by id, or an error naming the ids there are.
func (s *Script) broker(id metadata.BrokerID) (*brokerProcess, error) {
	if id < 1 || int(id) > len(s.w.brokers) {
		return nil, fmt.Errorf("no broker %d (brokers are 1..%d)", id, len(s.w.brokers))
	}
	return s.w.broker(id), nil
}

// CreateTopic creates the script's topic: one partition on the given
// replicas, in that order (the first is the preferred leader), and runs
// until every replica hosts it.
func (s *Script) CreateTopic(name string, replicas []metadata.BrokerID, minInsyncReplicas int) error {
	if s.topic {
		return fmt.Errorf("a script has one topic, and it exists")
	}
	if err := s.createTopic(name, replicas, minInsyncReplicas); err != nil {
		return err
	}
	s.topic = true
	s.partition = metadata.TopicPartition{Topic: name, Partition: 0}
	hosted := func() bool {
		for _, id := range replicas {
			if node := s.w.broker(id).node; node == nil || len(node.Partitions()) == 0 {
				return false
			}
		}
		return true
	}
	if _, ok := s.RunUntil(hosted, scriptStartTicks); !ok {
		return fmt.Errorf("the replicas did not all open the partition within %d ticks", scriptStartTicks)
	}
	return nil
}

func (s *Script) createTopic(name string, replicas []metadata.BrokerID, minInsyncReplicas int) error {
	for _, id := range replicas {
		if _, err := s.broker(id); err != nil {
			return err
		}
	}
	answer, err := s.adminRequest(quorum.Request{CreateTopic: &controller.CreateTopicRequest{
		Name: name, Partitions: 1, ReplicationFactor: len(replicas),
		Config:      metadata.TopicConfig{MinInsyncReplicas: minInsyncReplicas},
		Assignments: [][]metadata.BrokerID{replicas},
	}})
	if err != nil {
		return err
	}
	if answer.ErrorCode != 0 {
		return fmt.Errorf("create topic %s: %s", name, controller.CodeName(answer.ErrorCode))
	}
	return nil
}

// RecreateTopic deletes the script's topic and creates it again under its
// name on the given replicas: another incarnation, with another topic id
// and leader epochs from 0 again. It runs until the first replica leads
// the new incarnation; a broker whose metadata is held keeps the old one.
// The checker forgets what was acknowledged and read of the old one.
func (s *Script) RecreateTopic(replicas []metadata.BrokerID, minInsyncReplicas int) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	answer, err := s.adminRequest(quorum.Request{DeleteTopic: &quorum.DeleteTopicRequest{Name: s.partition.Topic}})
	if err != nil {
		return err
	}
	if answer.ErrorCode != 0 {
		return fmt.Errorf("delete topic %s: %s", s.partition.Topic, controller.CodeName(answer.ErrorCode))
	}
	if err := s.createTopic(s.partition.Topic, replicas, minInsyncReplicas); err != nil {
		return err
	}
	s.w.checker.forget(s.partition)
	id, _ := s.w.metadataImage().TopicID(s.partition.Topic)
	leads := func() bool {
		node := s.w.broker(replicas[0]).node
		if node == nil {
			return false
		}
		applied, _ := node.Image().TopicID(s.partition.Topic)
		return applied == id && s.Leads(replicas[0])
	}
	if _, ok := s.RunUntil(leads, scriptStartTicks); !ok {
		return fmt.Errorf("broker %d did not lead the new topic within %d ticks", replicas[0], scriptStartTicks)
	}
	return nil
}

func (s *Script) needTopic() error {
	if !s.topic {
		return fmt.Errorf("no topic yet (create one first)")
	}
	return nil
}

// Produce sends one batch of count records to a broker, with the given
// acks, as a new producer; its answer is noted when it arrives.
func (s *Script) Produce(id metadata.BrokerID, count int, acks int16) error {
	return s.produce(id, count, acks, nil)
}

func (s *Script) produce(id metadata.BrokerID, count int, acks int16, producer *record.ProducerState) error {
	if err := s.needTopic(); err != nil {
		return err
	}
	if count < 1 || count > 10_000 {
		return fmt.Errorf("count=%d: a produce sends 1 to 10000 records", count)
	}
	if _, err := s.broker(id); err != nil {
		return err
	}
	records := make([]record.Record, count)
	for i := range records {
		records[i] = record.Record{Value: []byte(fmt.Sprintf("p%d-%d", len(s.produces)+1, i))}
	}
	batch := record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: s.w.now * 10, Producer: producer})
	s.produces = append(s.produces, scriptProduce{acks: acks, batch: batch})
	number := len(s.produces)
	request := produceRequest(s.partition, append([]byte(nil), batch...), acks, 9)
	sent := s.w.client(clientAddress(number)).send(id, request, func(response kmsg.Response, ok bool) {
		s.produceAnswered(number, id, response, ok)
	})
	if !sent {
		s.note("produce %d: no connection to %d", number, id)
	}
	return nil
}

// produceAnswered takes a broker's answer to one of the script's
// producers; ok false is its connection failing first.
func (s *Script) produceAnswered(number int, from metadata.BrokerID, response kmsg.Response, ok bool) {
	p := &s.produces[number-1]
	p.answered = true
	if !ok {
		s.note("produce %d: the connection to %d failed", number, from)
		return
	}
	code, base := produceResult(response.(*kmsg.ProduceResponse))
	if code != 0 {
		s.note("produce %d answered by %d: %s", number, from, errorName(code))
		return
	}
	end := base + record.Offset(recordCount(p.batch))
	p.acked = true
	s.note("produce %d answered by %d: acked offsets [%d, %d)", number, from, base, end)
	if p.acks == replica.AcksAll {
		s.w.checker.observeAck(s.partition, base, p.batch)
	}
}

func recordCount(batch []byte) int32 {
	header, err := record.ParseHeader(batch)
	if err != nil {
		panic(err)
	}
	return header.LastOffsetDelta + 1
}
