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
	options Options
	random  *rand.Rand
	rules   rules.Rules
	shape   shape
	now     int64
	network *network
	// brokers are the broker machines, by id (brokers[id-1]); machines are
	// every machine, the dedicated controllers' too; controllers are the
	// metadata quorum's nodes, wherever they run.
	brokers     []*brokerProcess
	machines    []*brokerProcess
	controllers []*controllerNode
	voters      []metadata.BrokerID
	// raftSource feeds etcd/raft's election jitter during this world's
	// raft calls (raftrand.go).
	raftSource *rand.ChaCha8
	admin      adminState
	// lastImage is the newest committed metadata seen (metadataImage);
	// tracedOffset the last metadata offset traced.
	lastImage    *metadata.Image
	tracedOffset int64
	workload     *workload
	checker      *checker
	holders      *holders // who holds each partition's committed records (offline.go)
	stats        Stats
	traceLog     *traceLog
	// partitionsUntil says when each cut link heals; scheduled are the
	// later steps of composed faults, by tick.
	partitionsUntil []cutUntil
	scheduled       []scheduledStep
	// chainUntil is when the running failover chain ends.
	chainUntil int64
	// script, in a scripted run, takes the clients' answers and restarts
	// brokers itself; nil in random runs.
	script *Script
}

// brokerProcess is one machine: a broker, a controller of the metadata
// quorum, or both (Kafka's combined mode). Its disk outlives its
// processes; a crash, a power loss or a pause takes both roles at once.
type brokerProcess struct {
	id   metadata.BrokerID
	disk *disk.MemFS
	// runsBroker is false on a dedicated controller's machine; controller
	// is the machine's controller node, or nil.
	runsBroker bool
	controller *controllerNode
	// lifecycle is the running broker's side of the controller protocol,
	// nil while down; node its broker once registered.
	lifecycle   *broker.Lifecycle
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
	cleanEpoch metadata.BrokerEpoch
	// vouched says the running incarnation registered vouching for its log;
	// with flush=never only such an incarnation's clean stop may vouch for
	// the next one.
	vouched      bool
	shuttingDown bool
	// lostBy says how the broker last lost what its log held, or could no
	// longer vouch for it.
	lostBy string
}

func (w *world) trace(format string, args ...any) {
	event := fmt.Sprintf(format, args...)
	w.traceLog.add(w.now, event)
	if w.script != nil {
		w.script.event(event)
	}
}

func (w *world) broker(id metadata.BrokerID) *brokerProcess { return w.brokers[id-1] }

// machineOf returns the machine an address lives on, or nil.
func (w *world) machineOf(a address) *brokerProcess {
	for _, m := range w.machines {
		if (m.runsBroker && a == brokerAddress(m.id)) || (m.controller != nil && a == controllerAddress(m.controller.id)) {
			return m
		}
	}
	return nil
}

// startMachine starts a machine's processes: its controller opens its raft
// log, its broker registers before it serves.
func (w *world) startMachine(b *brokerProcess) {
	b.up, b.paused, b.node, b.incarnation = true, false, nil, b.incarnation+1
	b.shuttingDown = false
	if b.controller != nil {
		w.startController(b)
	}
	if b.runsBroker {
		w.startBroker(b)
	}
	w.trace("%s starts (incarnation %d)", w.machineName(b), b.incarnation)
}

func (w *world) machineName(b *brokerProcess) string {
	switch {
	case !b.runsBroker:
		return controllerAddress(b.controller.id).String()
	case b.controller != nil:
		return fmt.Sprintf("b%d+c%d", b.id, b.controller.id)
	}
	return fmt.Sprintf("b%d", b.id)
}

// startBroker starts the broker's lifecycle: it registers with the
// controller, and its node starts once it has a broker epoch.
func (w *world) startBroker(b *brokerProcess) {
	if b.cleanEpoch == metadata.NoBrokerEpoch && b.incarnation > 1 {
		w.holders.lose(b.id, w.now, b.lostBy)
	}
	lifecycle, err := broker.NewLifecycle(broker.LifecycleConfig{
		ID: b.id, Incarnation: fmt.Sprintf("b%d-%d", b.id, b.incarnation), PreviousEpoch: b.cleanEpoch,
		Voters: w.voters, HeartbeatTicks: heartbeatTicks, RequestTimeoutTicks: controllerRequestTicks,
		MaxEntries: maxMetadataPerAnswer, NewNode: func(epoch metadata.BrokerEpoch) *broker.Node { return w.newNode(b, epoch) },
		FirstRequestID: uint64(b.incarnation) << 40,
	})
	if err != nil {
		panic(err)
	}
	b.lifecycle = lifecycle
}

// newNode creates the node once the controller gave the incarnation an
// epoch.
func (w *world) newNode(b *brokerProcess, epoch metadata.BrokerEpoch) *broker.Node {
	b.node = broker.New(broker.Config{
		ID: b.id, FS: b.disk, Dir: "data", FlushAlways: w.shape.flushAlways,
		SegmentBytes: 64 << 10, MaxBatchBytes: w.shape.maxBatchBytes,
		ReplicaLagTicks: replicaLagTicks, FetchRetryTicks: fetchRetryTicks, ProposalRetryTicks: proposalRetryTicks,
		MaxPendingProduces: 1000, Rules: w.rules, SyncLater: true,
	}, epoch)
	b.node.Observe(w.checker.observe(b))
	b.vouched = b.cleanEpoch != metadata.NoBrokerEpoch
	b.cleanEpoch = metadata.NoBrokerEpoch
	w.trace("b%d registered with epoch %d", b.id, epoch)
	return b.node
}

// stepMachine advances one machine by a tick.
func (w *world) stepMachine(b *brokerProcess) {
	if !b.up {
		if b.restartAt > 0 && w.now >= b.restartAt {
			b.restartAt = 0
			w.startMachine(b)
		}
		return
	}
	if b.paused {
		if w.now >= b.pausedUntil {
			w.resume(b)
		}
		return
	}
	if b.controller != nil {
		w.stepController(b.controller)
	}
	if b.runsBroker {
		w.stepBroker(b)
	}
}

// stepBroker ticks a broker (its lifecycle registers, heartbeats and ticks
// the node) and sends what it has.
func (w *world) stepBroker(b *brokerProcess) {
	if b.node != nil && w.random.Float64() < w.shape.syncRate {
		b.node.SyncAll()
	}
	b.lifecycle.Tick()
	w.flush(b)
	if b.shuttingDown && b.lifecycle.ShutDown() {
		w.finishShutdown(b)
	}
}

// flush sends what a broker has for others: its requests to the
// controller, its replication traffic and its clients' answers.
func (w *world) flush(b *brokerProcess) {
	from := brokerAddress(b.id)
	b.lifecycle.Collect()
	for _, out := range b.lifecycle.TakeRequests() {
		request := out.Request
		w.network.send(&message{from: from, to: controllerAddress(out.To), request: &request})
	}
	if b.node == nil {
		return
	}
	outbox := b.node.TakeOutbox()
	for _, out := range outbox.Peers {
		peer := out.Message
		w.network.send(&message{from: from, to: brokerAddress(out.To), peer: &peer})
	}
	for _, answer := range outbox.Clients {
		copied := answer
		w.network.send(&message{from: from, to: address(copied.Client), clientAnswer: &copied})
	}
}

// deliver hands a message to the machine it is for.
func (w *world) deliver(b *brokerProcess, m *message) {
	if !b.up {
		return
	}
	if b.paused {
		w.network.held = append(w.network.held, m)
		return
	}
	if m.to.isController() {
		w.deliverToController(b.controller, m)
		return
	}
	if b.lifecycle == nil {
		return
	}
	if m.answer != nil {
		if err := b.lifecycle.HandleAnswer(*m.answer); err != nil {
			panic(err)
		}
		w.flush(b)
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
	case m.partitionState != nil:
		if err := b.node.ApplyPartitionState(*m.partitionState); err != nil {
			panic(err)
		}
	}
	w.flush(b)
}

// crash kills a machine's processes. A power loss also loses what its disk
// had not synced; a process crash keeps the page cache.
func (w *world) crash(b *brokerProcess, powerLoss bool) {
	if !b.up {
		return
	}
	switch {
	case !w.shape.flushAlways:
		b.cleanEpoch = metadata.NoBrokerEpoch
		b.lostBy = fmt.Sprintf("stopped uncleanly at %d with flush=never", w.now)
	case b.node != nil:
		b.cleanEpoch = b.node.Epoch()
	}
	b.up, b.node, b.lifecycle, b.paused = false, nil, nil, false
	if b.controller != nil {
		b.controller.stop()
	}
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
	w.dropMachine(b)
	b.restartAt = w.restartTick(20, 300)
	w.trace("%s %s%s", w.machineName(b), map[bool]string{true: "loses power", false: "crashes"}[powerLoss], restartText(b.restartAt))
}

// replaceDataDisk crashes a broker and replaces the disk of its partition
// logs with an empty one (a failed data disk; the metadata log, on another
// disk, survives). The next incarnation cannot vouch for a log it lost.
func (w *world) replaceDataDisk(b *brokerProcess) {
	w.crash(b, false)
	if err := removeTree(b.disk, "data"); err != nil {
		panic(err)
	}
	b.cleanEpoch = metadata.NoBrokerEpoch
	b.lostBy = fmt.Sprintf("had its data disk replaced at %d", w.now)
	w.stats.diskReplacements++
	w.trace("b%d's data disk is replaced with an empty one", b.id)
}

// removeTree removes a directory and everything in it, durably.
func removeTree(fs disk.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // nothing there
	}
	for _, name := range names {
		child := dir + "/" + name
		if _, err := fs.List(child); err == nil {
			if err := removeTree(fs, child); err != nil {
				return err
			}
			continue
		}
		if err := fs.Remove(child); err != nil {
			return err
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return err
	}
	return fs.Remove(dir)
}

// dropMachine loses what is in flight to or from a machine's processes.
func (w *world) dropMachine(b *brokerProcess) {
	if b.runsBroker {
		w.network.dropTo(brokerAddress(b.id))
	}
	if b.controller != nil {
		w.network.dropTo(controllerAddress(b.controller.id))
	}
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
	w.trace("%s pauses for %d ticks", w.machineName(b), ticks)
}

func (w *world) resume(b *brokerProcess) {
	b.paused = false
	w.trace("%s resumes", w.machineName(b))
	held := w.network.held
	w.network.held = nil
	for _, m := range held {
		if w.machineOf(m.to) == b {
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
	if !b.up || b.paused || b.node == nil || b.shuttingDown || !b.runsBroker {
		return
	}
	b.shuttingDown = true
	b.lifecycle.BeginShutdown()
	w.stats.shutdowns++
	w.trace("b%d begins a controlled shutdown", b.id)
}

// finishShutdown stops a broker whose controlled shutdown completed; a
// controller on the same machine stops with it.
func (w *world) finishShutdown(b *brokerProcess) {
	epoch := b.node.Epoch()
	if err := b.node.Close(); err != nil {
		panic(err)
	}
	b.up, b.node, b.lifecycle, b.shuttingDown = false, nil, nil, false
	if b.controller != nil {
		b.controller.stop()
	}
	if w.shape.flushAlways || b.vouched {
		b.cleanEpoch = epoch
	}
	w.dropMachine(b)
	b.restartAt = w.restartTick(10, 100)
	w.trace("b%d stopped cleanly%s", b.id, restartText(b.restartAt))
}
