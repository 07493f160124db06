package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/wire"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/frontend"
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
	// membersOnly is set once healing has gone quiet: the KIP-848 members
	// heartbeat (and fetch offsets) but take no other action.
	membersOnly bool
	// raftSource feeds etcd/raft's election jitter during this world's
	// raft calls (raftrand.go).
	raftSource *rand.ChaCha8
	admin      adminState
	// reassign is the reassignment fault's state (reassign.go).
	reassign reassignState
	// lastImage is the newest committed metadata seen (metadataImage);
	// tracedOffset the last metadata offset traced.
	lastImage *metadata.Image
	// workloadList caches partitions() for lastImage.
	workloadList []metadata.TopicPartition
	tracedOffset int64
	workload     *workload
	// groups is the group workload (groups.go), consumers its KIP-848
	// members (groups_consumer.go).
	groups    *groupLoad
	consumers *consumerLoad
	checker   *checker
	holders   *holders // who holds each partition's committed records (offline.go)
	stats     Stats
	traceLog  *traceLog
	// partitionsUntil says when each cut link heals; scheduled are the
	// later steps of composed faults, by tick.
	partitionsUntil []cutUntil
	scheduled       []scheduledStep
	// chainUntil is when the running failover chain ends.
	chainUntil int64
	// script, in a scripted run, takes the clients' answers and restarts
	// brokers itself; nil in random runs.
	script *Script
	// kafka is the Kafka connections; clients the Kafka clients, by
	// address; wireRandom the seeded source of the brokers' wire handlers.
	kafka      kafkaNet
	clients    map[address]*kafkaClient
	wireRandom *rand.ChaCha8
	// topicIDRandom is the seeded source its controllers draw topic ids
	// from; diskRandom the one slow disks draw sync latencies from.
	topicIDRandom *rand.ChaCha8
	diskRandom    *rand.Rand
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
	// fe is the running broker as a runtime drives it (its Kafka front
	// end, lifecycle and replica fetchers), nil while down; lifecycle is
	// its lifecycle, node its broker once registered.
	fe        *frontend.FrontEnd
	lifecycle *broker.Lifecycle
	node      *broker.Node
	// fetcherConns are the replica fetchers' connections, by source;
	// fetcherDialAt when a failed dial may be tried again.
	fetcherConns  map[metadata.BrokerID]*simConn
	fetcherDialAt map[metadata.BrokerID]int64
	// syncs are the sync jobs its disk has not completed (disksync.go).
	syncs       diskState
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
	// losesAtRegistration says the running incarnation could not vouch for
	// its log: its registration is where the holders lose it.
	losesAtRegistration bool
	// flushDue says the broker took Kafka requests in this tick's pass
	// and has not flushed since (Options.BatchedPasses).
	flushDue bool
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
	b.loseSyncs()
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
	// An incarnation that cannot vouch for its log loses what the log
	// held when it registers (newNode): until then the ISR memberships the
	// controller records are its predecessor's, which the log no longer
	// backs either.
	b.losesAtRegistration = b.cleanEpoch == metadata.NoBrokerEpoch && b.incarnation > 1
	lifecycle, err := broker.NewLifecycle(broker.LifecycleConfig{
		ID: b.id, Incarnation: fmt.Sprintf("b%d-%d", b.id, b.incarnation), PreviousEpoch: b.cleanEpoch,
		Endpoint: kafkaAddress(b.id),
		Voters:   w.voters, HeartbeatTicks: heartbeatTicks, RequestTimeoutTicks: controllerRequestTicks,
		MaxEntries: maxMetadataPerAnswer, MetadataWaitTicks: metadataFetchMaxWaitTicks, NewNode: func(epoch metadata.BrokerEpoch) *broker.Node { return w.newNode(b, epoch) },
		FirstRequestID: uint64(b.incarnation) << 40,
		SessionLeaseMs: broker.SessionLease(sessionTimeoutTicks*10, 10),
	})
	if err != nil {
		panic(err)
	}
	b.lifecycle = lifecycle
	b.fe, err = frontend.New(w.frontendConfig(b.id), lifecycle)
	if err != nil {
		panic(err)
	}
	b.fetcherConns, b.fetcherDialAt = map[metadata.BrokerID]*simConn{}, map[metadata.BrokerID]int64{}
}

// frontendConfig is a simulated broker's front end: the production
// defaults, in the simulator's ticks, with the world's seeded randomness.
func (w *world) frontendConfig(id metadata.BrokerID) frontend.Config {
	wireConfig := wire.DefaultConfig()
	wireConfig.Random = w.wireRandom
	return frontend.Config{ID: id, ClusterID: "tide-sim", Advertised: kafkaAddress(id),
		DefaultPartitions: 1, DefaultReplicationFactor: 1, AutoCreateTopics: true, SegmentBytes: 64 << 10, MaxBatchBytes: int64(w.shape.maxBatchBytes),
		Wire: wireConfig, MaxWaitingFetches: 4096, LogDir: "data",
		Groups: w.groupConfig(), OffsetsTopicPartitions: offsetsTopicPartitions,
		Fetcher: fetcher.Config{Broker: id, MaxWaitMillis: replicaFetchMaxWaitTicks * 10, MinBytes: 1, MaxBytes: 10 << 20,
			FetchTimeoutTicks: replicaFetchMaxWaitTicks + replicaRequestTimeoutTicks, RequestTimeoutTicks: replicaRequestTimeoutTicks,
			MaxResponseBytes: 21 << 20, Rules: w.rules}}
}

// newNode creates the node once the controller gave the incarnation an
// epoch.
//
// The brokers' write backlog (broker.Config.PendingBytesMax) is two
// batches, far below tide serve's 32 MiB, so that a slow disk fills it
// and the simulator's checkers see produces refused with
// REQUEST_TIMED_OUT and followers refetching (docs/storage.md, "The sync
// pipeline"); the simulator's volumes would not reach the default.
func (w *world) newNode(b *brokerProcess, epoch metadata.BrokerEpoch) *broker.Node {
	b.node = broker.New(broker.Config{
		ID: b.id, FS: b.disk, Dir: "data", FlushAlways: w.shape.flushAlways,
		SegmentBytes: w.segmentBytes(), MaxBatchBytes: w.shape.maxBatchBytes, PendingBytesMax: 2 * int64(w.shape.maxBatchBytes),
		RetentionMs: w.shape.retentionMs, RetentionBytes: w.shape.retentionBytes, RetentionCheckIntervalMs: w.shape.retentionCheckIntervalMs,
		ReplicaLagTicks: replicaLagTicks, FetchRetryTicks: fetchRetryTicks, ProposalRetryTicks: proposalRetryTicks,
		FetchTimeoutTicks:  replicaFetchTimeoutTicks,
		MaxPendingProduces: 1000, Rules: w.rules, ZeroCopyReads: true,
		CleanerConfigs: w.cleanerConfigs(), CleanerIntervalTicks: w.shape.compaction.intervalTicks,
	}, epoch)
	b.node.Observe(w.checker.observe(b))
	b.node.ObserveCleaner(w.observeCleaner(b))
	if b.losesAtRegistration {
		w.holders.lose(b.id, w.now, b.lostBy)
		b.losesAtRegistration = false
	}
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

// A simulated broker's disk is memory: DescribeLogDirs reports it as a
// volume of simulatedVolumeBytes, less what the partition logs hold,
// measured every volumeIntervalTicks as tide serve measures its statfs
// every second.
const (
	simulatedVolumeBytes = 1 << 30
	volumeIntervalTicks  = 100
)

func simulatedVolume(node *broker.Node) frontend.Volume {
	volume := frontend.Volume{TotalBytes: simulatedVolumeBytes, UsableBytes: simulatedVolumeBytes}
	if node == nil {
		return volume
	}
	for _, tp := range node.Partitions() {
		if _, log, ok := node.Replica(tp); ok {
			volume.UsableBytes -= log.SizeBytes()
		}
	}
	volume.UsableBytes = max(volume.UsableBytes, 0)
	return volume
}

// stepBroker ticks a broker (its lifecycle registers, heartbeats and ticks
// the node) and sends what it has.
func (w *world) stepBroker(b *brokerProcess) {
	if b.node != nil {
		w.beginSyncs(b)
		if w.random.Float64() < w.shape.syncRate {
			w.completeSyncs(b, false)
		}
	}
	b.fe.SetControllerHint(w.controllerHint(b))
	b.fe.SetClock(w.now * 10) // a tick is a virtual 10 ms, as producers' timestamps count them
	b.fe.SetMonotonicClock(w.now * 10)
	if w.now%volumeIntervalTicks == 0 {
		b.fe.SetVolume(simulatedVolume(b.node))
	}
	b.fe.Tick()
	w.maintainFetchers(b)
	w.flush(b)
	if b.shuttingDown && b.lifecycle.ShutDown() {
		w.finishShutdown(b)
	}
}

// flush sends what a broker's front end has for others after an input:
// its requests to the controller (its lifecycle's and the ones it
// forwards) and its replica fetchers' requests; its answers to Kafka
// requests went out as they were made.
func (w *world) flush(b *brokerProcess) {
	if b.fe == nil {
		return
	}
	out := b.fe.Flush()
	from := brokerAddress(b.id)
	for _, request := range out.Controller {
		copied := request.Request
		w.network.send(&message{from: from, to: controllerAddress(request.To), request: &copied})
	}
	w.carryOutFetcher(b, out.Fetcher)
}

// controllerHint is what a broker's runtime tells its front end of the
// active controller: with a controller on the same machine (combined
// mode), what that controller knows; else nothing.
func (w *world) controllerHint(b *brokerProcess) metadata.BrokerID {
	c := b.controller
	switch {
	case c == nil || !c.running():
		return metadata.NoBroker
	case c.q.Active():
		return c.id
	}
	return c.q.Leader()
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
	if b.fe == nil {
		return
	}
	switch {
	case m.answer != nil:
		if err := b.fe.HandleControllerAnswer(*m.answer); err != nil {
			panic(err)
		}
	case m.kafka != nil:
		w.deliverKafka(b, m)
		return
	case b.node == nil:
		return
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
	b.up, b.fe, b.node, b.lifecycle, b.paused = false, nil, nil, nil, false
	b.loseSyncs() // what they would have synced is lost with a power loss
	w.closeConnsOf(b)
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
	b.up, b.fe, b.node, b.lifecycle, b.shuttingDown = false, nil, nil, nil, false
	b.loseSyncs() // the node's Close synced its logs
	w.closeConnsOf(b)
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
