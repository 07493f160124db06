package frontend

import (
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/wire"
)

// pendingClient is one partition request awaiting the node's answer.
// expires bounds how long it may wait: a partition deleted under a waiting
// acks=all produce never answers, and its caller must not wait forever.
type pendingClient struct {
	answer  func(broker.ClientAnswer)
	expires int64
}

// Grace and sweep periods for pending partition requests, in ticks.
const (
	// pendingGraceTicks is added to a request's own timeout before it is
	// answered REQUEST_TIMED_OUT here: the replica answers first.
	pendingGraceTicks = 100
	// sweepEveryTicks is how often pending requests are checked for expiry.
	sweepEveryTicks = 100
)

func (b *backend) frontEnd() *FrontEnd { return (*FrontEnd)(b) }

func (b *backend) node() *broker.Node { return b.lifecycle.Node() }

// Cluster lists this broker, always (a client is talking to it), and every
// registered, unfenced broker whose Kafka address is known.
func (b *backend) Cluster() wire.Cluster {
	self := b.config.ID
	cluster := wire.Cluster{ClusterID: b.config.ClusterID, BrokerID: self, Config: wire.BrokerConfig{
		DefaultPartitions: b.config.DefaultPartitions, DefaultReplicationFactor: b.config.DefaultReplicationFactor, MinInsyncReplicas: 1,
		AutoCreateTopics: b.config.AutoCreateTopics,
		SegmentBytes:     b.config.SegmentBytes, RetentionBytes: b.config.RetentionBytes, RetentionMs: b.config.RetentionMs,
		MessageMaxBytes: b.config.MaxBatchBytes, Static: b.config.StaticConfigs, Defaults: b.config.DefaultConfigs,
	}}
	if cluster.Config.RetentionMs == 0 {
		cluster.Config.RetentionMs = broker.DefaultRetentionMs
	}
	if cluster.Config.RetentionBytes == 0 {
		cluster.Config.RetentionBytes = -1
	}
	cluster.Brokers = append(cluster.Brokers, endpoint(self, b.config.Advertised))
	if node := b.node(); node != nil {
		cluster.DynamicDefaults = node.Image().BrokerDefaultConfigs()
		for _, state := range node.Image().Brokers() {
			address := b.frontEnd().kafkaAddress(state.ID)
			if state.ID != self && address != "" && !state.Fenced {
				cluster.Brokers = append(cluster.Brokers, endpoint(state.ID, address))
			}
		}
	}
	slices.SortFunc(cluster.Brokers, func(x, y wire.Broker) int { return int(x.ID - y.ID) })
	// Clients send CreateTopics and the like to the controller Metadata
	// names; it must be a broker they can reach. Any broker forwards them
	// (KIP-590), so without a reachable active controller, this one.
	cluster.ControllerID = self
	active := b.frontEnd().activeController()
	for _, listed := range cluster.Brokers {
		if listed.ID == active {
			cluster.ControllerID = active
		}
	}
	return cluster
}

// kafkaAddress is where a broker's Kafka listener is reached: the endpoint
// it registered, else the one the configuration names, else "".
func (fe *FrontEnd) kafkaAddress(id metadata.BrokerID) string {
	if node := fe.Node(); node != nil {
		if registered := node.Image().Endpoint(id); registered != "" {
			return registered
		}
	}
	return fe.config.KafkaListeners[id]
}

// endpoint splits a host:port address ([host]:port for IPv6) into a
// Metadata broker entry; a port that does not parse is 0.
func endpoint(id metadata.BrokerID, address string) wire.Broker {
	host, portText := address, ""
	if i := strings.LastIndexByte(address, ':'); i >= 0 {
		host, portText = address[:i], address[i+1:]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	port, _ := strconv.Atoi(portText)
	return wire.Broker{ID: id, Host: host, Port: int32(port)}
}

// Topic is the topic as this broker's metadata image has it; with no
// image yet (not registered) there are no topics.
func (b *backend) Topic(name string) (metadata.Topic, bool) {
	if node := b.node(); node != nil {
		topic, ok := node.Image().Topic(name)
		if !ok {
			b.metadataMiss()
		}
		return topic, ok
	}
	return metadata.Topic{}, false
}

// missSpacingTicks is the least time between two early metadata fetches.
const missSpacingTicks = 5

// metadataMiss is a client naming a topic or partition this broker does
// not know: most often one just created through another broker, which this
// one would otherwise learn of only at its next heartbeat. It heartbeats at
// the next tick instead, so the client's retry finds it; at most once every
// missSpacingTicks, so that a client asking for a topic that does not exist
// costs the controller little.
func (b *backend) metadataMiss() {
	if b.lastMiss == 0 || b.now-b.lastMiss >= missSpacingTicks {
		b.lastMiss = b.now
		b.lifecycle.FetchMetadataSoon()
	}
}

// TopicNames lists the image's topics, sorted.
func (b *backend) TopicByID(id metadata.TopicID) (metadata.Topic, bool) {
	if node := b.node(); node != nil {
		if name, ok := node.Image().TopicByID(id); ok {
			return node.Image().Topic(name)
		}
		b.metadataMiss()
	}
	return metadata.Topic{}, false
}

func (b *backend) TopicNames() []string {
	if node := b.node(); node != nil {
		return node.Image().Topics()
	}
	return nil
}

// issue hands one partition request to the node under a fresh client id;
// answer gets the node's answer, or one with REQUEST_TIMED_OUT if none came
// within timeoutTicks and the grace. Without a node (not registered yet)
// the answer is LEADER_NOT_AVAILABLE, which clients retry. It returns the
// client id given, or 0 when the request was answered without the node.
func (b *backend) issue(request broker.ClientRequest, timeoutTicks int64, answer func(broker.ClientAnswer)) broker.ClientID {
	node := b.node()
	if node == nil {
		answer(broker.ClientAnswer{Partition: request.Partition, ErrorCode: kerr.LeaderNotAvailable.Code})
		return 0
	}
	b.nextClient++
	request.Client = b.nextClient
	b.pending[request.Client] = pendingClient{answer: answer, expires: b.now + max(timeoutTicks, 0) + pendingGraceTicks}
	node.HandleClient(request)
	return request.Client
}

// Produce hands the batches to the partition's replica; an acks=all answer
// comes when the high watermark passes them.
func (b *backend) Produce(partition metadata.TopicPartition, request replica.ProduceRequest, done func(replica.ProduceAnswer)) {
	id := request.ID
	if request.Acks == replica.AcksNone {
		// No response goes out, and a success gets no answer from the
		// replica: nothing is kept waiting for one.
		client := b.issue(broker.ClientRequest{Partition: partition, Produce: &request}, 0, func(broker.ClientAnswer) {})
		delete(b.pending, client) // an error answer, if any, is dropped
		done(replica.ProduceAnswer{ID: id, BaseOffset: -1, LogStartOffset: -1})
		return
	}
	b.issue(broker.ClientRequest{Partition: partition, Produce: &request}, request.TimeoutTicks, func(answer broker.ClientAnswer) {
		if answer.Produce == nil {
			done(replica.ProduceAnswer{ID: id, ErrorCode: answer.ErrorCode, BaseOffset: -1, LogStartOffset: -1})
			return
		}
		done(*answer.Produce)
	})
}

// ListOffsets asks the partition's replica.
func (b *backend) ListOffsets(partition metadata.TopicPartition, request replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer)) {
	id := request.ID
	b.issue(broker.ClientRequest{Partition: partition, ListOffsets: &request}, 0, func(answer broker.ClientAnswer) {
		if answer.ListOffsets == nil {
			done(replica.ListOffsetsAnswer{ID: id, ErrorCode: answer.ErrorCode, Offset: -1, LeaderEpoch: -1})
			return
		}
		done(*answer.ListOffsets)
	})
}

// DeleteRecords asks the partition's replica, as leader, to move its log
// start offset.
func (b *backend) DeleteRecords(partition metadata.TopicPartition, request replica.DeleteRecordsRequest, done func(replica.DeleteRecordsAnswer)) {
	id := request.ID
	b.issue(broker.ClientRequest{Partition: partition, DeleteRecords: &request}, request.TimeoutTicks, func(answer broker.ClientAnswer) {
		if answer.DeleteRecords == nil {
			done(replica.DeleteRecordsAnswer{ID: id, ErrorCode: answer.ErrorCode, LowWatermark: -1})
			return
		}
		done(*answer.DeleteRecords)
	})
}

// OffsetsForLeaderEpoch asks the partition's replica where an epoch ended.
func (b *backend) OffsetsForLeaderEpoch(partition metadata.TopicPartition, request replica.OffsetsForLeaderEpochRequest,
	done func(replica.OffsetsForLeaderEpochAnswer)) {
	id := request.ID
	b.issue(broker.ClientRequest{Partition: partition, OffsetsForLeaderEpoch: &request}, 0, func(answer broker.ClientAnswer) {
		if answer.OffsetsForLeaderEpoch == nil {
			done(replica.OffsetsForLeaderEpochAnswer{ID: id, ErrorCode: answer.ErrorCode, LeaderEpoch: -1, EndOffset: -1})
			return
		}
		done(*answer.OffsetsForLeaderEpoch)
	})
}

// InitProducerID takes the next id of the broker's block (KIP-730). A
// producer asking for its epoch to be bumped (KIP-360) gets a fresh id with
// epoch 0 instead, which is as safe: its sequences start afresh everywhere.
// While the broker waits for a block the answer is
// COORDINATOR_LOAD_IN_PROGRESS, which producers retry.
func (b *backend) InitProducerID(_ wire.InitProducerIDRequest, done func(wire.InitProducerIDAnswer)) {
	failed := wire.InitProducerIDAnswer{ErrorCode: kerr.CoordinatorLoadInProgress.Code, ProducerID: wire.NoProducerID, ProducerEpoch: wire.NoProducerEpoch}
	if b.node() == nil {
		done(failed)
		return
	}
	b.issue(broker.ClientRequest{InitProducerID: &broker.InitProducerIDRequest{ID: 1}}, 0, func(answer broker.ClientAnswer) {
		if answer.InitProducerID == nil {
			done(failed)
			return
		}
		done(wire.InitProducerIDAnswer{ErrorCode: answer.InitProducerID.ErrorCode,
			ProducerID: wire.ProducerID(answer.InitProducerID.ProducerID), ProducerEpoch: wire.ProducerEpoch(answer.InitProducerID.ProducerEpoch)})
	})
}

// drain carries the node's answers to their callers and its fetches to
// the fetchers, and re-serves the waiting fetches whose partitions
// changed, until neither has anything left. The lifecycle collects the
// node's ISR proposals and producer-id requests first: emptying the outbox
// would drop them.
func (b *backend) drain() {
	node := b.node()
	if node == nil {
		return
	}
	for {
		delivered := b.deliverOutbox()
		if !b.wakeFetches() && delivered == 0 {
			return
		}
	}
}

// deliverOutbox carries what the node's outbox holds now to where it goes
// and returns how many answers it delivered. The lifecycle collects the
// node's ISR proposals and producer-id requests first: emptying the outbox
// would drop them. A follower's requests to its leaders go to the
// fetchers; a leader's answers to followers come back as client answers,
// since followers' fetches arrive over the Kafka listener.
func (b *backend) deliverOutbox() int {
	node := b.node()
	if node == nil {
		return 0
	}
	b.lifecycle.Collect()
	outbox := node.TakeOutbox()
	for _, out := range outbox.Peers {
		b.fetcher.Enqueue(out, b.frontEnd().kafkaAddress(out.To))
	}
	for _, answer := range outbox.Clients {
		b.deliver(answer)
	}
	return len(outbox.Clients)
}

// deliver hands one answer to its caller; an answer to a request that
// already expired is dropped.
func (b *backend) deliver(answer broker.ClientAnswer) {
	waiting, ok := b.pending[answer.Client]
	if !ok {
		return
	}
	delete(b.pending, answer.Client)
	if answer.ErrorCode == kerr.UnknownTopicOrPartition.Code {
		b.metadataMiss()
	}
	waiting.answer(answer)
}

func (b *backend) expirePending() {
	var expired []broker.ClientID
	for client, waiting := range b.pending {
		if b.now >= waiting.expires {
			expired = append(expired, client)
		}
	}
	slices.Sort(expired)
	for _, client := range expired {
		b.deliver(broker.ClientAnswer{Client: client, ErrorCode: kerr.RequestTimedOut.Code})
	}
}
