package sim

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// producer is one simulated producer client with at most one request in
// flight per partition (max.in.flight.requests.per.connection=1, so the
// retries of one partition never overtake each other).
// An idempotent producer (KIP-98) first gets a producer id with
// InitProducerId, numbers its batches per partition, and retries a request
// that timed out or failed with a retriable error with the very same batch,
// same sequence: the leader answers a retry of a batch it already has with
// the original offset, so a retry never writes records twice. A plain
// producer gives up instead, as retrying without idempotence would
// duplicate.
type producer struct {
	id         int
	idempotent bool
	// retry is set for idempotent producers; a test sets it for plain ones
	// too, to show that retrying without idempotence writes duplicates.
	retry bool
	// producerID is -1 until InitProducerId answers; initSentAt is when
	// it was asked, or -1.
	producerID    int64
	producerEpoch int16
	initSentAt    int64
	// initRequestID is the id of the last InitProducerId sent: an answer
	// to an earlier one must not hand a reset producer an id again.
	initRequestID uint64
	// sequences is the next sequence number per partition.
	sequences map[metadata.TopicPartition]int32
	pending   map[metadata.TopicPartition]*pendingProduce
}

type pendingProduce struct {
	id        uint64
	partition metadata.TopicPartition
	acks      int16
	batch     []byte
	// firstSentAt bounds the retries (Kafka's delivery.timeout.ms);
	// sentAt is the last attempt, retryAt when the next is due (0: none).
	firstSentAt int64
	sentAt      int64
	retryAt     int64
	attempts    int
	// answeredBy is the broker whose answer is being handled.
	answeredBy metadata.BrokerID
}

// Client timing, in ticks.
const (
	retryBackoffTicks    = 10
	deliveryTimeoutTicks = 1500
)

func newProducer(id int, idempotent bool) *producer {
	return &producer{id: id, idempotent: idempotent, retry: idempotent, producerID: -1, initSentAt: -1,
		sequences: map[metadata.TopicPartition]int32{}, pending: map[metadata.TopicPartition]*pendingProduce{}}
}

// tickProducer advances one producer: retry what is due, get an id, or
// maybe send a new batch to a partition with nothing in flight.
func (load *workload) tickProducer(p *producer) {
	w := load.w
	for _, tp := range w.partitions() {
		if pending := p.pending[tp]; pending != nil {
			load.maybeRetry(p, pending)
		}
	}
	if p.idempotent && p.producerID < 0 {
		load.maybeInitProducerID(p)
		return
	}
	if w.random.Float64() < w.shape.produceRate {
		if tp, ok := load.randomPartition(); ok && p.pending[tp] == nil {
			load.produce(p, tp)
		}
	}
}

// maybeRetry resends a batch that is due, gives up on one past the
// delivery timeout, and (for a producer that does not retry) forgets one
// whose answer never came.
func (load *workload) maybeRetry(p *producer, pending *pendingProduce) {
	w := load.w
	switch {
	case w.now-pending.firstSentAt > deliveryTimeoutTicks:
		load.abandon(p, pending.partition, "delivery timed out")
	case !p.retry && w.now-pending.sentAt > clientRequestLostTicks:
		delete(p.pending, pending.partition) // lost with a crashed broker; give up
	case p.retry && pending.retryAt == 0 && w.now-pending.sentAt > clientRequestLostTicks:
		// No answer: the request or its answer was lost.
		load.sendProduce(p, pending)
	case pending.retryAt > 0 && w.now >= pending.retryAt:
		load.sendProduce(p, pending)
	}
}

// maybeInitProducerID asks a registered broker for a producer id, with
// InitProducerId at a version drawn from the served range.
func (load *workload) maybeInitProducerID(p *producer) {
	w := load.w
	if p.initSentAt >= 0 && w.now-p.initSentAt < clientRequestLostTicks {
		return
	}
	brokers := w.metadataImage().Brokers()
	if len(brokers) == 0 {
		return
	}
	to := brokers[w.random.IntN(len(brokers))].ID
	p.initSentAt, p.initRequestID = w.now, uint64(w.now)
	asked := p.initRequestID
	request := kmsg.NewPtrInitProducerIDRequest()
	request.Version = int16(w.random.IntN(5))
	request.TransactionTimeoutMillis = 60_000
	w.client(clientAddress(p.id)).send(to, request, func(response kmsg.Response, ok bool) {
		if !ok {
			load.initProducerIDAnswered(p, asked, nil)
			return
		}
		load.initProducerIDAnswered(p, asked, response.(*kmsg.InitProducerIDResponse))
	})
}

// initProducerIDAnswered takes the answer to the InitProducerId asked as
// request asked; nil is no answer (the connection failed).
func (load *workload) initProducerIDAnswered(p *producer, asked uint64, answer *kmsg.InitProducerIDResponse) {
	if answer == nil || answer.ErrorCode != 0 {
		if asked == p.initRequestID {
			p.initSentAt = load.w.now - clientRequestLostTicks + retryBackoffTicks
		}
		return
	}
	if !p.idempotent || p.producerID >= 0 || asked != p.initRequestID {
		return
	}
	p.producerID, p.producerEpoch = answer.ProducerID, answer.ProducerEpoch
	load.w.checker.observeProducerID(p.id, p.producerID)
	p.sequences = map[metadata.TopicPartition]int32{}
	load.w.trace("producer %d: producer id %d", p.id, p.producerID)
}

// produce builds a new batch for tp and sends it.
func (load *workload) produce(p *producer, tp metadata.TopicPartition) {
	if _, ok := load.leaderOf(tp); !ok {
		return
	}
	w := load.w
	count := 1 + w.random.IntN(3)
	records := make([]record.Record, count)
	for i := range records {
		load.nextValue++
		records[i] = record.Record{Value: []byte(fmt.Sprintf("v%d", load.nextValue))}
	}
	if w.shape.compaction.on {
		records = load.compactedRecords(count)
	}
	options := record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: w.now * 10}
	if p.idempotent {
		options.Producer = &record.ProducerState{ProducerID: p.producerID, ProducerEpoch: p.producerEpoch, BaseSequence: p.sequences[tp]}
		p.sequences[tp] += int32(count)
	}
	acks := replica.AcksAll
	if w.random.IntN(10) == 0 {
		acks = replica.AcksLeader
	}
	pending := &pendingProduce{id: uint64(w.now), partition: tp, acks: acks, batch: record.Build(options), firstSentAt: w.now}
	w.checker.observeBuilt(tp, pending.batch)
	p.pending[tp] = pending
	load.sendProduce(p, pending)
}

// sendProduce sends the pending batch, byte for byte as the first time, to
// the leader the client now believes in.
func (load *workload) sendProduce(p *producer, pending *pendingProduce) {
	w := load.w
	pending.sentAt, pending.retryAt = w.now, 0
	state, ok := load.leaderOf(pending.partition)
	if !ok {
		pending.retryAt = w.now + retryBackoffTicks
		return
	}
	pending.attempts++
	if pending.attempts > 1 {
		w.stats.retries++
		header, _ := record.ParseHeader(pending.batch)
		w.trace("producer %d: retry %d of %s seq %d to b%d", p.id, pending.attempts-1, pending.partition, header.BaseSequence, state.Leader)
	}
	request := produceRequest(pending.partition, append([]byte(nil), pending.batch...), pending.acks, int16(3+w.random.IntN(7)))
	sent := w.client(clientAddress(p.id)).send(state.Leader, request, func(response kmsg.Response, ok bool) {
		if !ok {
			load.produceFailed(p, pending)
			return
		}
		code, base := produceResult(response.(*kmsg.ProduceResponse))
		pending.answeredBy = state.Leader
		load.produceAnswered(p, pending, code, base)
	})
	if !sent {
		pending.retryAt = w.now + retryBackoffTicks
		return
	}
	w.stats.produces++
}

// produceRequest is a Produce of one batch to one partition, at a version
// from the served range.
func produceRequest(tp metadata.TopicPartition, batch []byte, acks int16, version int16) *kmsg.ProduceRequest {
	request := kmsg.NewPtrProduceRequest()
	request.Version, request.Acks, request.TimeoutMillis = version, acks, int32(produceTimeoutTicks*10)
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = tp.Topic
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Partition, partition.Records = tp.Partition, batch
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	return request
}

// produceResult is the one partition's code and base offset of a Produce
// response, or UNKNOWN_SERVER_ERROR when the response does not carry it.
func produceResult(response *kmsg.ProduceResponse) (int16, record.Offset) {
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code, -1
	}
	partition := response.Topics[0].Partitions[0]
	return partition.ErrorCode, record.Offset(partition.BaseOffset)
}

// produceFailed is a produce whose connection failed before it was
// answered: the request or its answer may have been lost, so an
// idempotent producer resends the same batch, and a plain one gives up.
func (load *workload) produceFailed(p *producer, pending *pendingProduce) {
	if p.pending[pending.partition] != pending {
		return
	}
	if !p.retry {
		delete(p.pending, pending.partition)
		return
	}
	if pending.retryAt == 0 {
		pending.retryAt = load.w.now + retryBackoffTicks
	}
}

func (load *workload) produceAnswered(p *producer, pending *pendingProduce, code int16, base record.Offset) {
	if p.pending[pending.partition] != pending {
		return // an answer to a batch given up since
	}
	switch code {
	case kerr.OutOfOrderSequenceNumber.Code:
		load.w.stats.outOfOrderSequence++
	case kerr.InvalidProducerEpoch.Code:
		load.w.stats.invalidProducerEpoch++
	}
	if code == kerr.OutOfOrderSequenceNumber.Code || code == kerr.InvalidProducerEpoch.Code {
		header, _ := record.ParseHeader(pending.batch)
		load.w.trace("producer %d: %s epoch %d seq %d (acks=%d) refused: %s", p.id, pending.partition, header.ProducerEpoch, header.BaseSequence, pending.acks, kerr.ErrorForCode(code).Error())
	}
	switch {
	case code == 0:
		delete(p.pending, pending.partition)
		load.w.stats.acked++
		if pending.attempts > 1 {
			load.w.stats.ackedAfterRetry++
		}
		if pending.acks == replica.AcksAll {
			load.w.checker.observeAck(pending.partition, base, pending.batch)
			load.w.checker.learnAckedEpoch(pending.partition, base, pending.batch, pending.answeredBy)
		}
	case p.retry && retriable(code):
		if pending.retryAt == 0 {
			pending.retryAt = load.w.now + retryBackoffTicks
		}
	default:
		load.abandon(p, pending.partition, kerr.ErrorForCode(code).Error())
	}
}

// retriable reports the errors after which Kafka's producer resends the
// batch as it is.
func retriable(code int16) bool {
	err, ok := kerr.ErrorForCode(code).(*kerr.Error)
	return ok && err.Retriable
}

// abandon gives up on the pending batch of tp. An idempotent producer then
// no longer knows whether the batch is in the log, so its next batch's
// sequence may not follow what the leader has. It starts over in a new
// producer epoch, every partition's sequence back at 0, as Kafka's
// idempotent producer bumps its epoch itself (KIP-360); leaders accept a
// newer epoch from sequence 0 and refuse the old epoch from then on. Only
// at the last epoch does it take a new producer id. Batches still in flight
// to other partitions keep the epoch they were built with.
func (load *workload) abandon(p *producer, tp metadata.TopicPartition, why string) {
	if p.pending[tp] == nil {
		return
	}
	delete(p.pending, tp)
	if !p.idempotent {
		return
	}
	load.w.stats.producerResets++
	if p.producerEpoch < math.MaxInt16 {
		p.producerEpoch++
		p.sequences = map[metadata.TopicPartition]int32{}
		load.w.trace("producer %d: gives up on %s (%s), bumps its epoch to %d", p.id, tp, why, p.producerEpoch)
		return
	}
	load.w.trace("producer %d: gives up on %s (%s), new producer id", p.id, tp, why)
	p.producerID, p.initSentAt = -1, -1
}
