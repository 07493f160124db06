package scenario

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// controllerID addresses the test cluster's controller in its network.
const controllerID metadata.BrokerID = 0

var testPartition = metadata.TopicPartition{Topic: "t", Partition: 0}

// This file and core_memlog_test.go are the core-level harness of
// TestRandomSchedules (random_test.go): the pure replication core
// (internal/replica) over in-memory logs, with a hand-made controller, so
// that thousands of random schedules run in seconds. The seed scenarios do
// not use it: they run on the simulator (sim.Script).

// cluster is a test cluster: replicas of one partition on brokers 1..n, each
// with an in-memory log, a network whose messages are delivered one by one
// as a test says, and a controller that owns the partition state, elects
// leaders as told and compare-and-sets ISR changes.
type cluster struct {
	config   replica.Config
	autoSync bool
	brokers  map[metadata.BrokerID]*testBroker
	state    metadata.PartitionState
	network  []envelope
	nextID   uint64
	// acked are the batches acknowledged to producers with acks=all.
	acked []ackedBatch
	// produced maps a pending produce request to its acks.
	produced map[uint64]int16
	// observedHighWatermark is the largest latest offset a client saw.
	observedHighWatermark record.Offset
	// readLimitBytes, when positive, caps what fetch responses carry: a
	// follower that catches up only part of the way.
	readLimitBytes int64
	failures       []string
	log            []string
}

type testBroker struct {
	id          metadata.BrokerID
	epoch       metadata.BrokerEpoch
	replica     *replica.Replica
	log         *memLog
	alive       bool
	pendingSync bool
}

// envelope is a message in flight. Exactly one payload is set.
type envelope struct {
	from, to       metadata.BrokerID
	fetch          *replica.FetchRequest
	fetchResponse  *replica.FetchResponse
	offsets        *replica.OffsetsForLeaderEpochRequest
	offsetsAnswer  *replica.OffsetsForLeaderEpochAnswer
	proposal       *replica.ISRChange
	alterResponse  *replica.AlterPartitionResponse
	partitionState *metadata.PartitionState
}

func (e envelope) String() string {
	switch {
	case e.fetch != nil:
		return fmt.Sprintf("%d->%d fetch offset=%d epoch=%d last-fetched-epoch=%d", e.from, e.to, e.fetch.FetchOffset, e.fetch.CurrentLeaderEpoch, e.fetch.LastFetchedEpoch)
	case e.fetchResponse != nil:
		r := e.fetchResponse
		text := fmt.Sprintf("%d->%d fetch-response", e.from, e.to)
		if r.ErrorCode != 0 {
			return text + " " + kerr.ErrorForCode(r.ErrorCode).Error()
		}
		if r.DivergingEpoch != nil {
			return text + fmt.Sprintf(" diverging epoch=%d end=%d", r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset)
		}
		return text + fmt.Sprintf(" records=[%d, %d) hw=%d", r.ReadFrom, readEnd(r), r.HighWatermark)
	case e.offsets != nil:
		return fmt.Sprintf("%d->%d offsets-for-leader-epoch epoch=%d current-epoch=%d", e.from, e.to, e.offsets.LeaderEpoch, e.offsets.CurrentLeaderEpoch)
	case e.offsetsAnswer != nil:
		if e.offsetsAnswer.ErrorCode != 0 {
			return fmt.Sprintf("%d->%d offsets-for-leader-epoch-response %s", e.from, e.to, kerr.ErrorForCode(e.offsetsAnswer.ErrorCode).Error())
		}
		return fmt.Sprintf("%d->%d offsets-for-leader-epoch-response epoch=%d end=%d", e.from, e.to, e.offsetsAnswer.LeaderEpoch, e.offsetsAnswer.EndOffset)
	case e.proposal != nil:
		return fmt.Sprintf("%d->controller %s", e.from, e.proposal)
	case e.alterResponse != nil:
		return fmt.Sprintf("controller->%d alter-partition-response %d", e.to, e.alterResponse.ErrorCode)
	}
	return fmt.Sprintf("controller->%d metadata leader=%d epoch=%d isr=%v", e.to, e.partitionState.Leader, e.partitionState.LeaderEpoch, e.partitionState.ISR)
}

func readEnd(r *replica.FetchResponse) record.Offset {
	end := r.ReadFrom
	it := record.NewIterator(r.Records, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		end = it.Header().NextOffset()
	}
	return end
}

type ackedBatch struct {
	base, next record.Offset
	bytes      []byte
}

func newCluster(brokers int, config replica.Config) *cluster {
	c := &cluster{config: config, autoSync: true, brokers: map[metadata.BrokerID]*testBroker{}, produced: map[uint64]int16{}}
	c.state = metadata.PartitionState{TopicPartition: testPartition, Leader: metadata.NoBroker, LeaderEpoch: -1, PartitionEpoch: -1}
	for id := metadata.BrokerID(1); id <= metadata.BrokerID(brokers); id++ {
		c.state.Replicas = append(c.state.Replicas, id)
		c.brokers[id] = &testBroker{id: id, log: &memLog{}}
		c.start(id)
	}
	return c
}

// start creates a broker's replica from its log, as a new incarnation.
func (c *cluster) start(id metadata.BrokerID) {
	b := c.brokers[id]
	b.epoch++
	b.alive = true
	config := c.config
	config.Broker, config.Partition = id, testPartition
	replica, err := replica.New(config, b.log.state())
	if err != nil {
		panic(err)
	}
	replica.SetBrokerEpoch(b.epoch)
	b.replica = replica
	c.publishBrokers()
}

func (c *cluster) ids() []metadata.BrokerID {
	var ids []metadata.BrokerID
	for id := range c.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// publishBrokers tells every replica which brokers are alive (unfenced) and
// their epochs, as the metadata image would.
func (c *cluster) publishBrokers() {
	var states []metadata.BrokerState
	for _, id := range c.ids() {
		b := c.brokers[id]
		states = append(states, metadata.BrokerState{ID: id, Epoch: b.epoch, Fenced: !b.alive})
	}
	for _, id := range c.ids() {
		if b := c.brokers[id]; b.alive {
			b.replica.SetBrokers(states)
			c.process(id)
		}
	}
}

// setState makes state the partition's state and sends it to every broker;
// it reaches each when delivered.
func (c *cluster) setState(state metadata.PartitionState) {
	c.state = state.Clone()
	for _, id := range c.ids() {
		copied := state.Clone()
		c.send(envelope{from: controllerID, to: id, partitionState: &copied})
	}
}

func (c *cluster) send(e envelope) { c.network = append(c.network, e) }

// deliver delivers the oldest message matching the filter (or the newest,
// when newest is set) and reports whether there was one.
func (c *cluster) deliver(from, to metadata.BrokerID, matchFrom, matchTo bool, newest ...bool) (envelope, bool) {
	order := make([]int, len(c.network))
	for i := range order {
		order[i] = i
		if len(newest) > 0 && newest[0] {
			order[i] = len(c.network) - 1 - i
		}
	}
	for _, i := range order {
		e := c.network[i]
		if (matchFrom && e.from != from) || (matchTo && e.to != to) {
			continue
		}
		c.network = append(c.network[:i:i], c.network[i+1:]...)
		c.handle(e)
		return e, true
	}
	return envelope{}, false
}

// deliverBusy delivers the oldest message that is not an idle fetch, and
// reports whether there was one. An idle fetch would tell the leader nothing
// new about the follower's log and bring back nothing new: a real leader
// parks it (long poll), and delivering it would only start the next
// identical one. (It may still let a caught-up follower join the ISR; the
// random schedules deliver idle fetches too.)
func (c *cluster) deliverBusy() bool {
	for i, e := range c.network {
		if c.idleFetch(e) {
			continue
		}
		c.network = append(c.network[:i:i], c.network[i+1:]...)
		c.handle(e)
		return true
	}
	return false
}

func (c *cluster) idleFetch(e envelope) bool {
	if e.fetch == nil || e.to == controllerID {
		return false
	}
	leader, follower := c.brokers[e.to], c.brokers[e.from]
	if !leader.alive || leader.replica.Role() != replica.Leader || (e.fetch.CurrentLeaderEpoch != record.NoLeaderEpoch && e.fetch.CurrentLeaderEpoch != leader.replica.State().LeaderEpoch) {
		return false
	}
	known, ok := leader.replica.FollowerLogEndOffset(e.from)
	return ok && known == e.fetch.FetchOffset && e.fetch.FetchOffset == leader.replica.LogEndOffset() &&
		follower.replica.HighWatermark() == leader.replica.HighWatermark()
}

// drop removes the oldest matching message.
func (c *cluster) drop(from, to metadata.BrokerID, matchFrom, matchTo bool) (envelope, bool) {
	for i, e := range c.network {
		if (matchFrom && e.from != from) || (matchTo && e.to != to) {
			continue
		}
		c.network = append(c.network[:i:i], c.network[i+1:]...)
		return e, true
	}
	return envelope{}, false
}

// handle hands a delivered message to its receiver. Messages to a dead
// broker are lost.
func (c *cluster) handle(e envelope) {
	if e.to == controllerID {
		c.handleProposal(e.from, *e.proposal)
		return
	}
	b := c.brokers[e.to]
	if !b.alive {
		return
	}
	switch {
	case e.fetch != nil:
		b.replica.HandleFetch(*e.fetch)
	case e.fetchResponse != nil:
		b.replica.HandleFetchResponse(*e.fetchResponse)
	case e.offsets != nil:
		b.replica.HandleOffsetsForLeaderEpoch(*e.offsets)
	case e.offsetsAnswer != nil:
		b.replica.HandleOffsetsForLeaderEpochResponse(*e.offsetsAnswer)
	case e.alterResponse != nil:
		b.replica.HandleAlterPartitionResponse(*e.alterResponse)
	case e.partitionState != nil:
		b.replica.ApplyPartitionState(*e.partitionState)
	}
	c.processFor(e.to, e.from)
}

// handleProposal is the controller's AlterPartition: compare-and-set on the
// partition epoch, and only live brokers may join (KIP-497, KIP-841).
func (c *cluster) handleProposal(from metadata.BrokerID, change replica.ISRChange) {
	response := replica.AlterPartitionResponse{Request: change}
	switch {
	case change.Leader != c.state.Leader || change.LeaderEpoch != c.state.LeaderEpoch:
		response.ErrorCode = kerr.FencedLeaderEpoch.Code
	case change.PartitionEpoch != c.state.PartitionEpoch:
		response.ErrorCode = kerr.InvalidUpdateVersion.Code
	default:
		for _, member := range change.NewISR {
			if b := c.brokers[member.ID]; !b.alive || (member.Epoch != metadata.NoBrokerEpoch && member.Epoch != b.epoch) {
				response.ErrorCode = kerr.IneligibleReplica.Code
			}
		}
	}
	if response.ErrorCode == 0 {
		next := c.state.Clone()
		next.ISR = nil
		for _, member := range change.NewISR {
			next.ISR = append(next.ISR, member.ID)
		}
		next.PartitionEpoch++
		c.setState(next)
		response.State = &next
	}
	c.send(envelope{from: controllerID, to: from, alterResponse: &response})
}

// process carries out a broker's replica.Ready until there is none.
func (c *cluster) process(id metadata.BrokerID) { c.processFor(id, -1) }

// processFor carries out a broker's replica.Ready; fetch answers go to requester.
func (c *cluster) processFor(id, requester metadata.BrokerID) {
	b := c.brokers[id]
	for b.alive && b.replica.HasReady() {
		ready := b.replica.Ready()
		for _, op := range ready.Log {
			if err := b.log.apply(op); err != nil {
				c.failures = append(c.failures, fmt.Sprintf("broker %d: log refused %s: %v", id, op, err))
			}
		}
		if ready.HighWatermark != nil {
			b.log.hw = *ready.HighWatermark
		}
		for _, message := range ready.Messages {
			c.send(envelope{from: id, to: message.To, fetch: message.Fetch, offsets: message.OffsetsForLeaderEpoch})
		}
		for _, answer := range ready.Answers {
			c.route(id, requester, answer)
		}
		for _, proposal := range ready.Proposals {
			copied := proposal
			c.send(envelope{from: id, to: controllerID, proposal: &copied})
		}
		c.failures = append(c.failures, ready.Violations...)
		if ready.Sync {
			b.pendingSync = true
		}
		if b.pendingSync && c.autoSync {
			c.sync(id)
		}
	}
}

// sync makes a broker's log durable and tells its replica.
func (c *cluster) sync(id metadata.BrokerID) {
	b := c.brokers[id]
	b.pendingSync = false
	b.log.durable = b.log.end()
	b.replica.Synced(b.log.durable)
}

func (c *cluster) route(id, requester metadata.BrokerID, answer replica.Answer) {
	b := c.brokers[id]
	switch {
	case answer.Fetch != nil && requester > 0:
		response := *answer.Fetch
		if response.ErrorCode == 0 && response.DivergingEpoch == nil {
			maxBytes := response.MaxBytes
			if c.readLimitBytes > 0 {
				maxBytes = c.readLimitBytes
			}
			response.Records = b.log.read(response.ReadFrom, response.ReadUpTo, maxBytes)
		}
		c.send(envelope{from: id, to: requester, fetchResponse: &response})
	case answer.OffsetsForLeaderEpoch != nil && requester > 0:
		c.send(envelope{from: id, to: requester, offsetsAnswer: answer.OffsetsForLeaderEpoch})
	case answer.Produce != nil:
		c.recordProduceAnswer(id, *answer.Produce)
	case answer.ListOffsets != nil:
		c.log = append(c.log, fmt.Sprintf("list-offsets from %d: %s", id, offsetOrError(answer.ListOffsets.Offset, answer.ListOffsets.ErrorCode)))
		if answer.ListOffsets.ErrorCode == 0 {
			c.observeHighWatermark(answer.ListOffsets.Offset)
		}
	case answer.Fetch != nil:
		c.log = append(c.log, fmt.Sprintf("consumer fetch from %d: high watermark %s", id, offsetOrError(answer.Fetch.HighWatermark, answer.Fetch.ErrorCode)))
		if answer.Fetch.ErrorCode == 0 {
			c.observeHighWatermark(answer.Fetch.HighWatermark)
		}
	}
}

func offsetOrError(offset record.Offset, code int16) string {
	if code != 0 {
		return kerr.ErrorForCode(code).(*kerr.Error).Message
	}
	return fmt.Sprintf("%d", offset)
}

func (c *cluster) observeHighWatermark(offset record.Offset) {
	if offset < c.observedHighWatermark {
		c.failures = append(c.failures, fmt.Sprintf("a client saw the high watermark go back from %d to %d", c.observedHighWatermark, offset))
	}
	c.observedHighWatermark = max(c.observedHighWatermark, offset)
}

func (c *cluster) recordProduceAnswer(id metadata.BrokerID, answer replica.ProduceAnswer) {
	acks := c.produced[answer.ID]
	delete(c.produced, answer.ID)
	text := fmt.Sprintf("produce %d answered by %d: ", answer.ID, id)
	if answer.ErrorCode != 0 {
		c.log = append(c.log, text+kerr.ErrorForCode(answer.ErrorCode).Error())
		return
	}
	batch, _ := c.brokers[id].log.batchAt(answer.BaseOffset)
	if acks == replica.AcksAll {
		// Only acks=all promises the write survives the leader.
		c.acked = append(c.acked, ackedBatch{base: batch.header.BaseOffset, next: batch.header.NextOffset(), bytes: batch.bytes})
	}
	c.log = append(c.log, text+fmt.Sprintf("acked offsets [%d, %d)", batch.header.BaseOffset, batch.header.NextOffset()))
}

// produce sends one batch of count records to a broker.
func (c *cluster) produce(id metadata.BrokerID, count int, acks int16) {
	records := make([]record.Record, count)
	for i := range records {
		records[i] = record.Record{Value: []byte(fmt.Sprintf("m%d", c.nextID))}
	}
	c.nextID++
	batch := record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch})
	c.produced[c.nextID] = acks
	c.brokers[id].replica.HandleProduce(replica.ProduceRequest{ID: c.nextID, Batches: batch, Acks: acks, TimeoutTicks: 1000})
	c.process(id)
}

// crash kills a broker: it loses what its log did not sync and every
// message in flight to it.
func (c *cluster) crash(id metadata.BrokerID) {
	b := c.brokers[id]
	b.alive = false
	b.log.crash()
	kept := c.network[:0]
	for _, e := range c.network {
		if e.to != id && e.from != id {
			kept = append(kept, e)
		}
	}
	c.network = kept
	c.publishBrokers()
}

// check returns what went wrong: committed (acked) batches missing from the
// leader's log, a client that saw the high watermark go back, logs that
// disagree below the high watermark, and the violations replicas reported.
func (c *cluster) check() []string {
	failures := slices.Clone(c.failures)
	leader, ok := c.brokers[c.state.Leader]
	for _, acked := range c.acked {
		if !ok || !leader.alive {
			break
		}
		batch, found := leader.log.batchAt(acked.base)
		if !found || !slices.Equal(batch.bytes, acked.bytes) {
			failures = append(failures, fmt.Sprintf("committed offsets %d..%d lost", acked.base, acked.next-1))
		}
	}
	failures = append(failures, c.divergence()...)
	return slices.Compact(failures)
}

// liveness reports a partition whose elected leader is alive but does not
// act as leader of the current epoch: no follower can make progress.
func (c *cluster) liveness() []string {
	leader, ok := c.brokers[c.state.Leader]
	if !ok || !leader.alive {
		return nil
	}
	if leader.replica.Role() != replica.Leader || leader.replica.State().LeaderEpoch != c.state.LeaderEpoch {
		return []string{fmt.Sprintf("r%d, elected leader of epoch %d, acts as %s in epoch %d: the partition is stuck",
			leader.id, c.state.LeaderEpoch, leader.replica.Role(), leader.replica.State().LeaderEpoch)}
	}
	return nil
}

// divergence compares every pair of live logs below the smaller high
// watermark.
func (c *cluster) divergence() []string {
	var failures []string
	ids := c.ids()
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			left, right := c.brokers[a], c.brokers[b]
			if !left.alive || !right.alive {
				continue
			}
			below := min(left.log.hw, right.log.hw)
			for offset := max(left.log.start, right.log.start); offset < below; offset++ {
				x, okLeft := left.log.batchAt(offset)
				y, okRight := right.log.batchAt(offset)
				if okLeft != okRight || !slices.Equal(x.bytes, y.bytes) {
					failures = append(failures, fmt.Sprintf("replicas %d and %d disagree at offset %d below the high watermark", a, b, offset))
					break
				}
			}
		}
	}
	return failures
}

// describe is the state table the scenarios print, as the seed documents
// draw it.
func (c *cluster) describe() string {
	var out strings.Builder
	fmt.Fprintf(&out, "ISR: (%s)  Leader: %s  leader-epoch=%d partition-epoch=%d\n", joinIDs(c.state.ISR), leaderName(c.state.Leader), c.state.LeaderEpoch, c.state.PartitionEpoch)
	for _, id := range c.ids() {
		b := c.brokers[id]
		status := b.replica.Role().String()
		if !b.alive {
			status = "offline"
		}
		var epochs []string
		for _, entry := range b.log.epochs.Entries() {
			epochs = append(epochs, fmt.Sprintf("%d@%d", entry.Epoch, entry.StartOffset))
		}
		fmt.Fprintf(&out, "r%d: [hw=%d, leo=%d] %s epoch=%d epochs=%s\n", id, b.log.hw, b.log.end(), status, b.replica.State().LeaderEpoch, strings.Join(epochs, ","))
	}
	if len(c.network) > 0 {
		fmt.Fprintf(&out, "in flight:\n")
		for _, e := range c.network {
			fmt.Fprintf(&out, "  %s\n", e)
		}
	}
	return out.String()
}

func joinIDs(ids []metadata.BrokerID) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = fmt.Sprintf("r%d", id)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func leaderName(id metadata.BrokerID) string {
	if id == metadata.NoBroker {
		return "none"
	}
	return fmt.Sprintf("r%d", id)
}

// legacyConfig is the replica configuration of the test cluster.
func testConfig(flushAlways bool, legacy []rules.Rule) replica.Config {
	config := replica.Config{
		MinInsyncReplicas: 1, ReplicaLagTicks: 10, FetchRetryTicks: 3, ProposalRetryTicks: 5,
		FlushAlways: flushAlways, MaxBatchBytes: 1 << 20, MaxPendingProduces: 1000,
	}
	for _, rule := range legacy {
		config.Rules = config.Rules.Without(rule)
	}
	return config
}
