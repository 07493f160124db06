package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/wire"
)

// debugReplicaID is Kafka's debugging replica id (DEBUGGING_REPLICA_ID):
// any replica, leader or follower, answers it with its own offsets, which
// is how describe sees how far each replica has the log.
const debugReplicaID = -2

// replicaKey names one replica of a topic: its partition and its broker.
type replicaKey struct {
	partition int32
	broker    int32
}

// replicaState is what one replica said of itself, in one answer: its high
// watermark, log start offset and log end offset from a Fetch as replica id
// -2 carrying wire.LogEndOffsetTag. The log end offset comes from the
// ListOffsets that placed the Fetch only when the broker does not answer the
// tag (not tide). Offsets it did not give are -1.
type replicaState struct {
	// unreachable is why the broker gave no answer at all.
	unreachable error
	// failure is the Kafka error code a request for this replica got.
	failure        error
	logEndOffset   int64
	highWatermark  int64
	logStartOffset int64
	// oneAnswer says the three offsets came in one answer (the broker
	// answered wire.LogEndOffsetTag).
	oneAnswer bool
}

// replicaStates asks every broker that hosts a replica of the topic for the
// state of all its replicas, one ListOffsets and one Fetch per broker, sent
// straight to it (not to the leader, as clients do), every broker at once
// within one timeout.
func (o *clientOptions) replicaStates(ctx context.Context, client *kgo.Client, metadata *kmsg.MetadataResponse,
	topic kmsg.MetadataResponseTopic) map[replicaKey]replicaState {
	hosted := map[int32][]int32{} // broker id: the partitions it hosts
	for _, partition := range topic.Partitions {
		for _, broker := range partition.Replicas {
			hosted[broker] = append(hosted[broker], partition.Partition)
		}
	}
	known := map[int32]bool{}
	for _, broker := range metadata.Brokers {
		known[broker.NodeID] = true
	}
	attempt, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	states := map[replicaKey]replicaState{}
	var mutex sync.Mutex
	var wait sync.WaitGroup
	for broker, partitions := range hosted {
		wait.Go(func() {
			var answered map[int32]replicaState
			if known[broker] {
				answered = queryReplicas(attempt, client.Broker(int(broker)), *topic.Topic, topic.TopicID, partitions)
			} else {
				answered = unreachable(partitions, fmt.Errorf("not in the cluster's broker list"))
			}
			mutex.Lock()
			defer mutex.Unlock()
			for partition, state := range answered {
				states[replicaKey{partition, broker}] = state
			}
		})
	}
	wait.Wait()
	return states
}

func unreachable(partitions []int32, err error) map[int32]replicaState {
	states := map[int32]replicaState{}
	for _, partition := range partitions {
		states[partition] = replicaState{unreachable: err, logEndOffset: -1, highWatermark: -1, logStartOffset: -1}
	}
	return states
}

// queryReplicas asks one broker for its replicas of the partitions: their
// log end offsets first, to place a Fetch at each, which reads no records
// (a debugging fetch reads at most up to the high watermark) and brings
// back the high watermark, log start offset and, in wire.LogEndOffsetTag,
// the log end offset, all three from one answer of the replica. Taking the
// log end from the ListOffsets instead could show a high watermark above
// it (a negative lag): records committed between the two answers raise the
// high watermark past the log end the first one gave. A partition whose
// ListOffsets failed is not fetched: its error is the answer.
func queryReplicas(ctx context.Context, broker *kgo.Broker, topic string, topicID [16]byte, partitions []int32) map[int32]replicaState {
	states := map[int32]replicaState{}
	listed, err := broker.Request(ctx, debugListOffsets(topic, partitions))
	if err != nil {
		return unreachable(partitions, err)
	}
	for _, answered := range listed.(*kmsg.ListOffsetsResponse).Topics {
		for _, part := range answered.Partitions {
			state := replicaState{failure: kafkaError(part.ErrorCode, nil), logEndOffset: part.Offset, highWatermark: -1, logStartOffset: -1}
			if state.failure != nil {
				state.logEndOffset = -1
			}
			states[part.Partition] = state
		}
	}
	var fetchable []int32
	for _, partition := range partitions {
		if state, ok := states[partition]; !ok {
			states[partition] = replicaState{failure: fmt.Errorf("no answer for the partition"), logEndOffset: -1, highWatermark: -1, logStartOffset: -1}
		} else if state.failure == nil {
			fetchable = append(fetchable, partition)
		}
	}
	if len(fetchable) == 0 {
		return states
	}
	fetched, err := broker.Request(ctx, debugFetch(topic, topicID, fetchable, states))
	if err != nil {
		return unreachable(partitions, err)
	}
	response := fetched.(*kmsg.FetchResponse)
	for _, answered := range response.Topics {
		for _, part := range answered.Partitions {
			state := states[part.Partition]
			state.failure = kafkaError(part.ErrorCode, nil)
			if state.failure == nil {
				state.failure = kafkaError(response.ErrorCode, nil)
			}
			state.highWatermark, state.logStartOffset = part.HighWatermark, part.LogStartOffset
			if end, ok := fetchedLogEnd(part); ok && state.failure == nil {
				state.logEndOffset, state.oneAnswer = end, true
			}
			states[part.Partition] = state
		}
	}
	return states
}

// debugListOffsets asks for the latest offset as the debugging replica: the
// log end offset, since no isolation level applies to it. CurrentLeaderEpoch
// -1 skips the epoch check, so a replica that lags the metadata still says
// where it is.
func debugListOffsets(topic string, partitions []int32) *kmsg.ListOffsetsRequest {
	request := kmsg.NewPtrListOffsetsRequest()
	request.ReplicaID = debugReplicaID
	entry := kmsg.NewListOffsetsRequestTopic()
	entry.Topic = topic
	for _, partition := range partitions {
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Partition, part.Timestamp, part.CurrentLeaderEpoch = partition, -1, -1
		entry.Partitions = append(entry.Partitions, part)
	}
	request.Topics = append(request.Topics, entry)
	return request
}

// fetchedLogEnd is the log end offset a tide broker gave in
// wire.LogEndOffsetTag.
func fetchedLogEnd(part kmsg.FetchResponseTopicPartition) (int64, bool) {
	end, found := int64(-1), false
	part.UnknownTags.Each(func(key uint32, value []byte) {
		if key == wire.LogEndOffsetTag {
			reader := kbin.Reader{Src: value}
			end, found = reader.Varlong(), true
		}
	})
	return end, found
}

// debugFetch fetches each partition at its log end offset as the debugging
// replica, waiting for nothing, with room for one byte: the answer is the
// offsets, not records, and asks for the log end offset too
// (wire.LogEndOffsetTag). The topic goes by name and by id: kgo sends the
// broker's highest Fetch version, and v13+ name topics by id (KIP-516).
func debugFetch(topic string, topicID [16]byte, partitions []int32, states map[int32]replicaState) *kmsg.FetchRequest {
	request := kmsg.NewPtrFetchRequest()
	request.ReplicaID, request.ReplicaState.ID = debugReplicaID, debugReplicaID
	request.MaxWaitMillis, request.MinBytes, request.MaxBytes = 0, 0, 1
	request.SessionEpoch = -1 // no fetch session
	request.UnknownTags.Set(wire.LogEndOffsetTag, nil)
	entry := kmsg.NewFetchRequestTopic()
	entry.Topic, entry.TopicID = topic, topicID
	for _, partition := range partitions {
		part := kmsg.NewFetchRequestTopicPartition()
		part.Partition, part.FetchOffset, part.PartitionMaxBytes = partition, states[partition].logEndOffset, 1
		part.CurrentLeaderEpoch, part.LastFetchedEpoch = -1, -1
		entry.Partitions = append(entry.Partitions, part)
	}
	request.Topics = append(request.Topics, entry)
	return request
}

// printReplicas writes one line per replica of a partition, in the
// partition's replica order: its role as Metadata has it, its own log start
// offset, high watermark and log end offset, and its lag, how many offsets
// its log end trails the leader's.
func printReplicas(out io.Writer, partition kmsg.MetadataResponseTopicPartition, states map[replicaKey]replicaState) {
	leaderEnd := int64(-1)
	if leader, ok := states[replicaKey{partition.Partition, partition.Leader}]; ok && leader.unreachable == nil {
		leaderEnd = leader.logEndOffset
	}
	for _, broker := range partition.Replicas {
		role := "follower"
		if broker == partition.Leader {
			role = "leader"
		}
		if slices.Contains(partition.OfflineReplicas, broker) {
			role += ", offline"
		}
		status := "not asked"
		if state, ok := states[replicaKey{partition.Partition, broker}]; ok {
			status = replicaStatus(state, leaderEnd)
		}
		fmt.Fprintf(out, "    replica %d (%s): %s\n", broker, role, status)
	}
}

// replicaStatus describes what one replica said, with its lag behind the
// leader's log end offset when both are known (leaderEnd -1 when not).
func replicaStatus(state replicaState, leaderEnd int64) string {
	var status string
	switch {
	case state.unreachable != nil:
		return "unreachable (" + state.unreachable.Error() + ")"
	case state.logEndOffset < 0:
		return "error " + state.failure.Error()
	case state.failure != nil:
		status = fmt.Sprintf("log end offset %d, high watermark unknown (error %s)", state.logEndOffset, state.failure)
	default:
		status = fmt.Sprintf("log start offset %d, high watermark %d, log end offset %d", state.logStartOffset, state.highWatermark, state.logEndOffset)
	}
	if leaderEnd < 0 {
		return status + ", lag unknown"
	}
	return status + fmt.Sprintf(", lag %d", leaderEnd-state.logEndOffset)
}
