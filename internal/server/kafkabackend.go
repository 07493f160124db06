package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/wire"
)

// kafkaBackend is wire's Backend over this node's broker: partition
// requests go to the broker's node (HandleClient) and its answers come back
// through the node's outbox; controller requests (CreateTopics,
// DeleteTopics, ElectLeaders) go to the active controller the way the
// lifecycle's requests go. It runs on the node loop only, like the cores.
type kafkaBackend struct {
	s *Server
	// now counts the node loop's ticks.
	now int64
	// advertised is this broker's Kafka address for Metadata.
	advertised string
	clusterID  string
	// pending are the partition requests handed to the node and not yet
	// answered, by the client id each was given: one id per request, so an
	// answer that names only the client and the partition (the node's
	// UNKNOWN_TOPIC_OR_PARTITION) still finds its caller. The node renumbers
	// produce request ids internally and restores them in its answers.
	pending    map[broker.ClientID]pendingClient
	nextClient broker.ClientID
	// fetches are the fetches waiting for data (Kafka's long poll).
	fetches []*waitingFetch
	// followerHW is the high watermark last sent to each follower for each
	// partition: a parked follower fetch completes once the leader's has
	// moved past it (see fetchRead).
	followerHW map[followerPartition]record.Offset
	// calls are the controller requests in flight, by request id; visible
	// the successful ones waiting for this broker's image to show them.
	calls    map[uint64]*controllerCall
	visible  []*visibleWait
	nextCall uint64
	// lastMiss is when a request last named a topic or partition this
	// broker's metadata does not have (see metadataMiss).
	lastMiss int64
}

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

func newKafkaBackend(s *Server, advertised string) *kafkaBackend {
	return &kafkaBackend{s: s, advertised: advertised, clusterID: clusterID(s.config.Controllers),
		pending: map[broker.ClientID]pendingClient{}, calls: map[uint64]*controllerCall{},
		followerHW: map[followerPartition]record.Offset{}}
}

// clusterID names the cluster after its voter set, the same on every node
// and across restarts; tide keeps no cluster id of its own yet.
func clusterID(controllers map[metadata.BrokerID]string) string {
	var text strings.Builder
	for _, id := range (Config{Controllers: controllers}).voters() {
		text.WriteString(strconv.Itoa(int(id)) + "@" + controllers[id] + ",")
	}
	sum := sha256.Sum256([]byte(text.String()))
	return "tide-" + hex.EncodeToString(sum[:8])
}

func (b *kafkaBackend) node() *broker.Node { return b.s.lifecycle.Node() }

// Cluster lists this broker, always (a client is talking to it), and every
// registered, unfenced broker whose Kafka address is known.
func (b *kafkaBackend) Cluster() wire.Cluster {
	self := b.s.config.ID
	cluster := wire.Cluster{ClusterID: b.clusterID, BrokerID: self, Config: wire.BrokerConfig{
		DefaultPartitions: b.s.config.DefaultPartitions, DefaultReplicationFactor: b.s.config.DefaultReplicationFactor, MinInsyncReplicas: 1,
		SegmentBytes: segmentBytes, RetentionBytes: -1, RetentionMs: -1, MessageMaxBytes: maxBatchBytes,
	}}
	cluster.Brokers = append(cluster.Brokers, endpoint(self, b.advertised))
	if node := b.node(); node != nil {
		for _, state := range node.Image().Brokers() {
			address := b.s.kafkaAddress(state.ID)
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
	active := b.s.activeController()
	for _, listed := range cluster.Brokers {
		if listed.ID == active {
			cluster.ControllerID = active
		}
	}
	return cluster
}

// kafkaAddress is where a broker's Kafka listener is reached: the endpoint
// it registered, else the one --kafka-listeners names, else "".
func (s *Server) kafkaAddress(id metadata.BrokerID) string {
	if node := s.lifecycle.Node(); node != nil {
		if registered := node.Image().Endpoint(id); registered != "" {
			return registered
		}
	}
	return s.config.KafkaListeners[id]
}

func endpoint(id metadata.BrokerID, address string) wire.Broker {
	host, portText, _ := net.SplitHostPort(address)
	port, _ := strconv.Atoi(portText)
	return wire.Broker{ID: id, Host: host, Port: int32(port)}
}

// Topic is the topic as this broker's metadata image has it; with no
// image yet (not registered) there are no topics.
func (b *kafkaBackend) Topic(name string) (metadata.Topic, bool) {
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
func (b *kafkaBackend) metadataMiss() {
	if b.lastMiss == 0 || b.now-b.lastMiss >= missSpacingTicks {
		b.lastMiss = b.now
		b.s.lifecycle.FetchMetadataSoon()
	}
}

// TopicNames lists the image's topics, sorted.
func (b *kafkaBackend) TopicNames() []string {
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
func (b *kafkaBackend) issue(request broker.ClientRequest, timeoutTicks int64, answer func(broker.ClientAnswer)) broker.ClientID {
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
func (b *kafkaBackend) Produce(partition metadata.TopicPartition, request replica.ProduceRequest, done func(replica.ProduceAnswer)) {
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
func (b *kafkaBackend) ListOffsets(partition metadata.TopicPartition, request replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer)) {
	id := request.ID
	b.issue(broker.ClientRequest{Partition: partition, ListOffsets: &request}, 0, func(answer broker.ClientAnswer) {
		if answer.ListOffsets == nil {
			done(replica.ListOffsetsAnswer{ID: id, ErrorCode: answer.ErrorCode, Offset: -1, LeaderEpoch: -1})
			return
		}
		done(*answer.ListOffsets)
	})
}

// OffsetsForLeaderEpoch asks the partition's replica where an epoch ended.
func (b *kafkaBackend) OffsetsForLeaderEpoch(partition metadata.TopicPartition, request replica.OffsetsForLeaderEpochRequest,
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
func (b *kafkaBackend) InitProducerID(_ wire.InitProducerIDRequest, done func(wire.InitProducerIDAnswer)) {
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

// drain carries the node's answers to their callers, and re-serves the
// waiting fetches whose partitions changed, until neither has anything
// left. The lifecycle collects the node's ISR proposals and producer-id
// requests first: emptying the outbox would drop them.
func (b *kafkaBackend) drain() {
	node := b.node()
	if node == nil {
		return
	}
	for {
		b.s.lifecycle.Collect()
		// A follower's requests to its leaders go to the fetchers; a
		// leader's answers to followers come back as client answers, since
		// followers' fetches arrive over the Kafka listener.
		outbox := node.TakeOutbox()
		b.s.replication.enqueue(outbox.Peers)
		for _, answer := range outbox.Clients {
			b.deliver(answer)
		}
		if !b.wakeFetches() && len(outbox.Clients) == 0 {
			return
		}
	}
}

// deliver hands one answer to its caller; an answer to a request that
// already expired is dropped.
func (b *kafkaBackend) deliver(answer broker.ClientAnswer) {
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

// tick advances the backend's clock: fetches whose wait ended are
// answered, controller requests retried or timed out, and now and then
// partition requests that never got an answer expire.
func (b *kafkaBackend) tick() {
	b.now++
	b.tickControllerCalls()
	if b.now%sweepEveryTicks == 0 {
		b.expirePending()
	}
}

func (b *kafkaBackend) expirePending() {
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
