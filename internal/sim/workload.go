package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	// keys draws a compacted topic's keys, from a stream of its own so
	// that compaction leaves the seed's schedule as it was.
	keys *rand.Rand
}

type consumer struct {
	id       int
	position map[metadata.TopicPartition]record.Offset
	pending  map[metadata.TopicPartition]int64
}

func newWorkload(w *world) *workload {
	load := &workload{w: w, keys: rand.New(rand.NewPCG(w.options.Seed, compactionStream+1))}
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
	w.adminStep()
	w.groupStep()
	w.consumerStep()
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

// consume sends a consumer's next request for a partition to its leader:
// ListOffsets for the latest offset or a Fetch from its position, each with
// the leader epoch its metadata gives (KIP-320), at a version drawn from
// those that carry it; now and then OffsetForLeaderEpoch, as a consumer
// validating its position after a leader change does.
func (load *workload) consume(c *consumer, tp metadata.TopicPartition) {
	state, ok := load.leaderOf(tp)
	if !ok {
		return
	}
	w := load.w
	if sent, waiting := c.pending[tp]; waiting && w.now-sent < clientRequestLostTicks {
		return
	}
	var request kmsg.Request
	switch draw := w.random.IntN(10); {
	case draw < 5:
		request = listOffsetsRequest(tp, state.LeaderEpoch, int16(4+w.random.IntN(4)))
	case draw < 9:
		request = fetchRequest(tp, state.LeaderEpoch, c.position[tp], 4<<10, int16(9+w.random.IntN(4)))
	default:
		request = offsetForLeaderEpochRequest(tp, state.LeaderEpoch, int16(2+w.random.IntN(3)))
	}
	from := clientAddress(c.id)
	leader := state.Leader
	sent := w.client(from).send(leader, request, func(response kmsg.Response, ok bool) {
		delete(c.pending, tp)
		if ok {
			load.consumed(c, tp, leader, response)
		}
	})
	if sent {
		c.pending[tp] = w.now
		w.stats.consumes++
	}
}

func listOffsetsRequest(tp metadata.TopicPartition, epoch record.LeaderEpoch, version int16) *kmsg.ListOffsetsRequest {
	request := kmsg.NewPtrListOffsetsRequest()
	request.Version, request.ReplicaID = version, -1
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = tp.Topic
	partition := kmsg.NewListOffsetsRequestTopicPartition()
	partition.Partition, partition.CurrentLeaderEpoch, partition.Timestamp = tp.Partition, int32(epoch), replica.LatestTimestamp
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	return request
}

func fetchRequest(tp metadata.TopicPartition, epoch record.LeaderEpoch, offset record.Offset, maxBytes int32, version int16) *kmsg.FetchRequest {
	request := kmsg.NewPtrFetchRequest()
	request.Version, request.ReplicaID = version, -1
	request.MaxWaitMillis, request.MinBytes, request.MaxBytes = 0, 0, maxBytes
	request.SessionID, request.SessionEpoch = 0, -1
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = tp.Topic
	partition := kmsg.NewFetchRequestTopicPartition()
	partition.Partition, partition.CurrentLeaderEpoch, partition.FetchOffset = tp.Partition, int32(epoch), int64(offset)
	partition.PartitionMaxBytes = maxBytes
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	return request
}

func offsetForLeaderEpochRequest(tp metadata.TopicPartition, epoch record.LeaderEpoch, version int16) *kmsg.OffsetForLeaderEpochRequest {
	request := kmsg.NewPtrOffsetForLeaderEpochRequest()
	request.Version, request.ReplicaID = version, -1
	topic := kmsg.NewOffsetForLeaderEpochRequestTopic()
	topic.Topic = tp.Topic
	partition := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	partition.Partition, partition.CurrentLeaderEpoch, partition.LeaderEpoch = tp.Partition, int32(epoch), int32(epoch)
	topic.Partitions = append(topic.Partitions, partition)
	request.Topics = append(request.Topics, topic)
	return request
}

// consumed shows the checker what a consumer was answered: the high
// watermark it saw, and the records it read.
func (load *workload) consumed(c *consumer, tp metadata.TopicPartition, leader metadata.BrokerID, response kmsg.Response) {
	client := clientAddress(c.id)
	switch response := response.(type) {
	case *kmsg.ListOffsetsResponse:
		if code, offset, ok := listOffsetsResult(response); ok && code == 0 {
			load.w.checker.observeHighWatermark(client, tp, offset, fmt.Sprintf("ListOffsets from b%d", leader))
		}
	case *kmsg.FetchResponse:
		partition, ok := fetchResult(response)
		if !ok || partition.ErrorCode != 0 {
			return
		}
		highWatermark := record.Offset(partition.HighWatermark)
		load.w.checker.observeHighWatermark(client, tp, highWatermark, fmt.Sprintf("a fetch from b%d", leader))
		next := load.w.checker.observeRead(tp, partition.RecordBatches, highWatermark, c.position[tp])
		c.position[tp] = max(c.position[tp], next)
	}
}

// listOffsetsResult is the one partition's code and offset.
func listOffsetsResult(response *kmsg.ListOffsetsResponse) (int16, record.Offset, bool) {
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return 0, 0, false
	}
	partition := response.Topics[0].Partitions[0]
	return partition.ErrorCode, record.Offset(partition.Offset), true
}

// fetchResult is the one partition of a fetch response, checked to be the
// only one.
func fetchResult(response *kmsg.FetchResponse) (kmsg.FetchResponseTopicPartition, bool) {
	if response.ErrorCode != 0 || len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, false
	}
	return response.Topics[0].Partitions[0], true
}
