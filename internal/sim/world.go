package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// world is one simulated cluster.
type world struct {
	options    Options
	random     *rand.Rand
	rules      rules.Rules
	shape      shape
	now        int64
	network    *network
	controller *logicalController
	brokers    []*brokerProcess
	workload   *workload
	checker    *checker
	stats      Stats
	traceLog   *traceLog
	// partitionsUntil says when each cut link heals.
	partitionsUntil []cutUntil
	// script, in a scripted run, takes the clients' answers and restarts
	// brokers itself; nil in random runs.
	script *Script
}

// brokerProcess is one broker machine: its disk outlives its process.
type brokerProcess struct {
	id   metadata.BrokerID
	disk *disk.MemFS
	// node is the running broker, nil while down or not yet registered.
	node        *broker.Node
	up          bool
	paused      bool
	pausedUntil int64
	restartAt   int64
	// incarnation counts the process's starts; registration names it.
	incarnation int
	// cleanEpoch is the epoch of the incarnation whose log the next one
	// vouches for when it registers (KIP-966's PreviousBrokerEpoch), or
	// NoBrokerEpoch: the last incarnation after a clean shutdown, and after
	// any stop with flush=always, whose log loses nothing it acknowledged.
	cleanEpoch    metadata.BrokerEpoch
	registering   int64
	lastHeartbeat int64
	// vouched says the running incarnation registered vouching for its log;
	// with flush=never only such an incarnation's clean stop may vouch for
	// the next one.
	vouched      bool
	shuttingDown bool
}

func (w *world) trace(format string, args ...any) {
	event := fmt.Sprintf(format, args...)
	w.traceLog.add(w.now, event)
	if w.script != nil {
		w.script.event(event)
	}
}

func (w *world) broker(id metadata.BrokerID) *brokerProcess { return w.brokers[id-1] }

// startBroker starts a broker process; it registers before it serves.
func (w *world) startBroker(b *brokerProcess) {
	b.up, b.paused, b.node, b.incarnation = true, false, nil, b.incarnation+1
	b.registering, b.shuttingDown = -registerRetryTicks, false
	w.trace("b%d starts (incarnation %d)", b.id, b.incarnation)
}

// stepBroker advances one broker by a tick: register, heartbeat, tick the
// node and send what it has.
func (w *world) stepBroker(b *brokerProcess) {
	if !b.up {
		if b.restartAt > 0 && w.now >= b.restartAt {
			b.restartAt = 0
			w.startBroker(b)
		}
		return
	}
	if b.paused {
		if w.now >= b.pausedUntil {
			w.resume(b)
		}
		return
	}
	if b.node == nil {
		if w.now-b.registering >= registerRetryTicks {
			b.registering = w.now
			w.network.send(&message{from: brokerAddress(b.id), to: controllerAddress, register: &registerRequest{
				incarnation: fmt.Sprintf("b%d-%d", b.id, b.incarnation), previousEpoch: b.cleanEpoch,
			}})
		}
		return
	}
	if w.now-b.lastHeartbeat >= heartbeatTicks {
		b.lastHeartbeat = w.now
		w.network.send(&message{from: brokerAddress(b.id), to: controllerAddress, heartbeat: &heartbeatRequest{
			epoch: b.node.Epoch(), appliedOffset: b.node.MetadataOffset(), wantShutdown: b.shuttingDown,
		}})
	}
	if w.random.Float64() < w.shape.syncRate {
		b.node.SyncAll()
	}
	b.node.Tick()
	w.flush(b)
	if b.shuttingDown {
		w.maybeFinishShutdown(b)
	}
}

// flush sends what a node has in its outbox.
func (w *world) flush(b *brokerProcess) {
	outbox := b.node.TakeOutbox()
	from := brokerAddress(b.id)
	for _, out := range outbox.Peers {
		peer := out.Message
		w.network.send(&message{from: from, to: brokerAddress(out.To), peer: &peer})
	}
	for _, answer := range outbox.Clients {
		copied := answer
		w.network.send(&message{from: from, to: address(copied.Client), clientAnswer: &copied})
	}
	for _, proposal := range outbox.Proposals {
		w.network.send(&message{from: from, to: controllerAddress, alterPartition: &alterRequest{epoch: b.node.Epoch(), change: proposal}})
	}
	if outbox.AllocateProducerIDs {
		w.network.send(&message{from: from, to: controllerAddress, allocateProducerIDs: &allocateProducerIDsRequest{epoch: b.node.Epoch()}})
	}
}

// deliver hands a message to a broker.
func (w *world) deliver(b *brokerProcess, m *message) {
	if !b.up {
		return
	}
	if b.paused {
		w.network.held = append(w.network.held, m)
		return
	}
	if m.registered != nil {
		w.registered(b, m.registered)
		return
	}
	if b.node == nil {
		return
	}
	switch {
	case m.peer != nil:
		b.node.HandlePeer(metadata.BrokerID(m.from), *m.peer)
	case m.clientRequest != nil:
		b.node.HandleClient(*m.clientRequest)
	case m.metadata != nil:
		if err := b.node.ApplyMetadata(m.metadata.entries); err != nil {
			panic(err)
		}
	case m.alterAnswer != nil:
		b.node.HandleAlterPartitionResponse(m.alterAnswer.partition, m.alterAnswer.response)
	case m.producerIDs != nil:
		b.node.HandleAllocateProducerIDsResponse(m.producerIDs.block.FirstProducerID, m.producerIDs.block.Length, m.producerIDs.errorCode)
	case m.partitionState != nil:
		if err := b.node.ApplyPartitionState(*m.partitionState); err != nil {
			panic(err)
		}
	}
	w.flush(b)
}

// registered creates the node once the controller gave it an epoch.
func (w *world) registered(b *brokerProcess, answer *registerAnswer) {
	if b.node != nil || answer.errorCode != 0 {
		return
	}
	b.node = broker.New(broker.Config{
		ID: b.id, FS: b.disk, Dir: "data", FlushAlways: w.shape.flushAlways,
		SegmentBytes: 64 << 10, MaxBatchBytes: 16 << 10,
		ReplicaLagTicks: replicaLagTicks, FetchRetryTicks: fetchRetryTicks, ProposalRetryTicks: proposalRetryTicks,
		MaxPendingProduces: 1000, Rules: w.rules, SyncLater: true,
	}, answer.epoch)
	b.node.Observe(w.checker.observe(b))
	b.vouched = b.cleanEpoch != metadata.NoBrokerEpoch
	b.cleanEpoch = metadata.NoBrokerEpoch
	w.trace("b%d registered with epoch %d", b.id, answer.epoch)
}

// crash kills a broker process. A power loss also loses what its disk had
// not synced; a process crash keeps the page cache.
func (w *world) crash(b *brokerProcess, powerLoss bool) {
	if !b.up {
		return
	}
	switch {
	case !w.shape.flushAlways:
		b.cleanEpoch = metadata.NoBrokerEpoch
	case b.node != nil:
		b.cleanEpoch = b.node.Epoch()
	}
	b.up, b.node, b.paused = false, nil, false
	if powerLoss {
		options := disk.DefaultCrashOptions(int64(w.random.Uint64() >> 1))
		if w.script != nil {
			// A script's power loss keeps exactly what was synced, so that
			// what it shows does not depend on a draw.
			options.Survival, options.TornProbability = disk.SurviveNothing, 0
		}
		b.disk = b.disk.CrashCloneWith(options)
		w.stats.powerLosses++
	} else {
		w.stats.crashes++
	}
	w.network.dropTo(brokerAddress(b.id))
	b.restartAt = w.restartTick(20, 300)
	w.trace("b%d %s%s", b.id, map[bool]string{true: "loses power", false: "crashes"}[powerLoss], restartText(b.restartAt))
}

func restartText(at int64) string {
	if at == 0 {
		return ""
	}
	return fmt.Sprintf("; restarts at %d", at)
}

// restartTick draws when a stopped broker restarts by itself: never in a
// scripted run (0), where the script restarts it.
func (w *world) restartTick(least, spread int64) int64 {
	at := w.now + least + w.random.Int64N(spread)
	if w.script != nil {
		return 0
	}
	return at
}

func (w *world) pause(b *brokerProcess, ticks int64) {
	if !b.up || b.paused {
		return
	}
	b.paused, b.pausedUntil = true, w.now+ticks
	w.stats.pauses++
	w.trace("b%d pauses for %d ticks", b.id, ticks)
}

func (w *world) resume(b *brokerProcess) {
	b.paused = false
	w.trace("b%d resumes", b.id)
	held := w.network.held
	w.network.held = nil
	for _, m := range held {
		if m.to == brokerAddress(b.id) {
			w.deliver(b, m)
		} else {
			w.network.held = append(w.network.held, m)
		}
	}
}

// beginShutdown starts a controlled shutdown: the broker asks to shut down
// with its heartbeats, the controller moves its leaderships away, and once
// it is fenced the process stops cleanly.
func (w *world) beginShutdown(b *brokerProcess) {
	if !b.up || b.paused || b.node == nil || b.shuttingDown {
		return
	}
	b.shuttingDown = true
	w.stats.shutdowns++
	w.trace("b%d begins a controlled shutdown", b.id)
}

func (w *world) maybeFinishShutdown(b *brokerProcess) {
	state, ok := w.controller.image.Broker(b.id)
	if !ok || state.Epoch != b.node.Epoch() || !state.Fenced {
		return
	}
	epoch := b.node.Epoch()
	if err := b.node.Close(); err != nil {
		panic(err)
	}
	b.up, b.node, b.shuttingDown = false, nil, false
	if w.shape.flushAlways || b.vouched {
		b.cleanEpoch = epoch
	}
	w.network.dropTo(brokerAddress(b.id))
	b.restartAt = w.restartTick(10, 100)
	w.trace("b%d stopped cleanly%s", b.id, restartText(b.restartAt))
}
