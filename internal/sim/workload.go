package sim

import (
	"fmt"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// workload is the simulated clients: producers (most of them idempotent,
// sim/producer.go) sending batches with acks=all (and some acks=1) to the
// leader they believe in and retrying what fails, and consumers
// polling the latest offset and reading committed records. Clients learn
// leaders and epochs from the controller, as from a metadata refresh, and
// send their leader epoch so a stale leader refuses them (KIP-320).
type workload struct {
	w         *world
	producers []*producer
	consumers []*consumer
	nextValue uint64
}

type consumer struct {
	id       int
	position map[metadata.TopicPartition]record.Offset
	pending  map[metadata.TopicPartition]int64
}

func newWorkload(w *world) *workload {
	load := &workload{w: w}
	for i := 0; i < w.shape.producers; i++ {
		load.producers = append(load.producers, newProducer(i, w.shape.idempotentShare > w.random.Float64()))
	}
	for i := 0; i < w.shape.consumers; i++ {
		load.consumers = append(load.consumers, &consumer{id: w.shape.producers + i, position: map[metadata.TopicPartition]record.Offset{}, pending: map[metadata.TopicPartition]int64{}})
	}
	return load
}

// leaderOf is what a client's metadata refresh would say.
func (load *workload) leaderOf(tp metadata.TopicPartition) (metadata.PartitionState, bool) {
	state, ok := load.w.metadataImage().Partition(tp)
	return state, ok && state.Leader != metadata.NoBroker
}

func (load *workload) randomPartition() (metadata.TopicPartition, bool) {
	partitions := load.w.partitions()
	if len(partitions) == 0 {
		return metadata.TopicPartition{}, false
	}
	return partitions[load.w.random.IntN(len(partitions))], true
}

func (load *workload) tick() {
	w := load.w
	for _, p := range load.producers {
		load.tickProducer(p)
	}
	for _, c := range load.consumers {
		if w.random.Float64() < w.shape.consumeRate {
			if tp, ok := load.randomPartition(); ok {
				load.consume(c, tp)
			}
		}
	}
}

func (load *workload) consume(c *consumer, tp metadata.TopicPartition) {
	state, ok := load.leaderOf(tp)
	if !ok {
		return
	}
	w := load.w
	if sent, waiting := c.pending[tp]; waiting && w.now-sent < clientRequestLostTicks {
		return
	}
	c.pending[tp] = w.now
	from := clientAddress(c.id)
	request := &broker.ClientRequest{Client: broker.ClientID(from), Partition: tp}
	if w.random.IntN(2) == 0 {
		request.ListOffsets = &replica.ListOffsetsRequest{ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: state.LeaderEpoch, Timestamp: replica.LatestTimestamp}
	} else {
		request.Fetch = &replica.FetchRequest{ReplicaID: replica.ConsumerReplicaID, ReplicaEpoch: metadata.NoBrokerEpoch,
			CurrentLeaderEpoch: state.LeaderEpoch, FetchOffset: c.position[tp], LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 4 << 10}
	}
	w.network.send(&message{from: from, to: brokerAddress(state.Leader), clientRequest: request})
	w.stats.consumes++
}

// answered takes a broker's answer to a client.
func (load *workload) answered(to address, m *message) {
	answer := m.clientAnswer
	id := int(-1 - to)
	if id < len(load.producers) {
		if answer.InitProducerID != nil {
			load.initProducerIDAnswered(load.producers[id], answer.InitProducerID)
			return
		}
		load.produceAnswered(load.producers[id], answer)
		return
	}
	c := load.consumers[id-len(load.producers)]
	delete(c.pending, answer.Partition)
	switch {
	case answer.ListOffsets != nil && answer.ListOffsets.ErrorCode == 0:
		load.w.checker.observeHighWatermark(to, answer.Partition, answer.ListOffsets.Offset, fmt.Sprintf("ListOffsets from %s", m.from))
	case answer.Fetch != nil && answer.Fetch.ErrorCode == 0:
		load.w.checker.observeHighWatermark(to, answer.Partition, answer.Fetch.HighWatermark, fmt.Sprintf("a fetch from %s", m.from))
		next := load.w.checker.observeRead(answer.Partition, answer.Fetch.Records, answer.Fetch.HighWatermark, c.position[answer.Partition])
		c.position[answer.Partition] = max(c.position[answer.Partition], next)
	}
}
