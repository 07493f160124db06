package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// Stats counts what a run did.
type Stats struct {
	Ticks       int64
	produces    int
	acked       int
	consumes    int
	crashes     int
	powerLosses int
	pauses      int
	partitions  int
	preferred   int
	shutdowns   int
	truncations int
	// cleanerPasses counts the log cleaner's passes on compacted topics.
	cleanerPasses int
	messagesLost  int
	// connectionResets are Kafka connections reset by a lost packet.
	connectionResets int
	// blackholes are machines whose packets were all dropped for a while.
	blackholes int
	// apiRequests counts the Kafka requests brokers took, by API key.
	apiRequests map[int16]int
	// requestsSharingAPass counts the Kafka requests a broker took in a
	// pass that had already taken one (Options.BatchedPasses).
	requestsSharingAPass int
	// groupCommits counts the simple group consumer's acknowledged
	// offset commits (groups.go).
	groupCommits int
	// consumerCommits counts the KIP-848 members' accepted offset
	// commits (groups_consumer.go).
	consumerCommits int
	// consumerRevocations, consumerFences, consumerCrashes,
	// consumerPauses and consumerLeaves count the KIP-848 members'
	// partitions given up on the coordinator's word, fencings, crashes,
	// pauses and leaves.
	consumerRevocations int
	consumerFences      int
	consumerCrashes     int
	consumerPauses      int
	consumerLeaves      int
	// autoCreates are Metadata requests that began a topic's creation.
	autoCreates int
	zombies     int
	// The metadata quorum's faults.
	controllerCrashes    int
	controllerPauses     int
	controllerPartitions int
	failoverChains       int
	diskReplacements     int
	// offlineByDesign counts partitions left offline after healing because
	// every replica that held their committed records lost them.
	offlineByDesign int
	// retries are produce requests resent with the same batch by an
	// idempotent producer; producerResets are batches one gave up on,
	// starting over in a new producer epoch.
	retries         int
	producerResets  int
	ackedAfterRetry int
	// producerRebuilds counts replicas rebuilding their producer state
	// from the log after a truncation.
	producerRebuilds int
	// outOfOrderSequence and invalidProducerEpoch count the leaders'
	// refusals of idempotent batches.
	outOfOrderSequence   int
	invalidProducerEpoch int
	// reassignments are the partition moves asked for (reassign.go), of
	// which the controller accepted reassignmentsStarted, and
	// reassignmentsFinished were seen done.
	reassignments         int
	reassignmentsStarted  int
	reassignmentsFinished int
}

// Idempotence returns what the idempotent producers and the producer state
// did, by kind.
func (s Stats) Idempotence() map[string]int {
	return map[string]int{
		"retries": s.retries, "acked-after-retry": s.ackedAfterRetry, "producer-resets": s.producerResets,
		"state-rebuilds": s.producerRebuilds, "out-of-order-sequence": s.outOfOrderSequence,
		"invalid-producer-epoch": s.invalidProducerEpoch,
	}
}

// OfflineByDesign is how many partitions stayed offline after healing, as
// they may: every replica that held their committed records lost them.
func (s Stats) OfflineByDesign() int { return s.offlineByDesign }

// Faults returns the faults injected, by kind.
func (s Stats) Faults() map[string]int {
	return map[string]int{
		"crash": s.crashes, "power-loss": s.powerLosses, "pause": s.pauses, "partition": s.partitions,
		"preferred-election": s.preferred, "controlled-shutdown": s.shutdowns, "message-loss": s.messagesLost,
		"zombie": s.zombies, "controller-crash": s.controllerCrashes, "controller-pause": s.controllerPauses,
		"controller-partition": s.controllerPartitions, "failover-chain": s.failoverChains,
		"disk-replacement": s.diskReplacements, "connection-reset": s.connectionResets, "blackhole": s.blackholes,
		"reassign": s.reassignments,
	}
}

// Result is what one seed did.
type Result struct {
	Seed uint64
	// Options are the options of the run, with which Run reproduces it.
	Options   Options
	Shape     string
	Stats     Stats
	Acked     int
	Violation *Violation
	// Trace is the last events of the run; Hash digests the whole run, so
	// two runs of a seed can be compared.
	Trace []string
	Hash  uint64
}

// Run simulates one seed. It is a pure function of its options: the same
// seed gives the same trace and hash.
func Run(options Options) (result Result) {
	w := newWorld(options)
	result = Result{Seed: options.Seed, Options: options, Shape: w.shape.String()}
	defer func() {
		if recovered := recover(); recovered != nil {
			w.checker.fail(InvariantReplicaViolation, "panic: %v", recovered)
			result = w.result(result)
		}
	}()
	w.run(w.options.RunTicks, w.options.HealTicks)
	return w.result(result)
}

// newWorld draws a seed's cluster and fault model.
func newWorld(options Options) *world {
	if options.RunTicks == 0 {
		options.RunTicks = defaultRunTicks
	}
	if options.HealTicks == 0 {
		options.HealTicks = defaultHealTicks
	}
	if options.TraceLines == 0 {
		options.TraceLines = 80
	}
	random := rand.New(rand.NewPCG(options.Seed, 0x74696465_73696d))
	shape := drawShape(random)
	// Compaction is drawn from a stream of its own, so that a seed whose
	// topic is not compacted runs as it did before compaction existed.
	shape.drawCompaction(rand.New(rand.NewPCG(options.Seed, compactionStream)))
	// So is the reassignment fault (reassign.go).
	shape.drawReassign(rand.New(rand.NewPCG(options.Seed, reassignStream)))
	return newWorldOfShape(options, random, shape.without(options.Without))
}

// newWorldOfShape builds a world of a given shape: one drawn from the seed,
// or a script's.
func newWorldOfShape(options Options, random *rand.Rand, shape shape) *world {
	w := &world{options: options, random: random, shape: shape, traceLog: newTraceLog(options.TraceLines),
		raftSource: newRaftSource(options.Seed), tracedOffset: -1,
		kafka:   kafkaNet{conns: map[connID]*simConn{}, apiRequests: map[int16]int{}},
		clients: map[address]*kafkaClient{}, wireRandom: newWireSource(options.Seed), topicIDRandom: newTopicIDSource(options.Seed), diskRandom: rand.New(newDiskSource(options.Seed)), holders: newHolders(),
		reassign: reassignState{random: rand.New(rand.NewPCG(options.Seed, reassignStream+1))}}
	for _, rule := range options.Legacy {
		w.rules = w.rules.Without(rule)
	}
	w.network = newNetwork(w)
	w.checker = newChecker(w)
	w.workload = newWorkload(w)
	w.groups = newGroupLoad(w)
	w.consumers = newConsumerLoad(w)
	w.trace("seed %d: %s; %s", options.Seed, w.shape, w.rules)
	if len(options.Without) > 0 {
		w.trace("without faults: %v", options.Without)
	}
	return w
}

// startMachines creates the shape's machines and starts them: the brokers,
// with the quorum's controllers on the first of them (combined mode) or on
// machines of their own (dedicated controllers, ids from 1001).
func (w *world) startMachines() {
	for i := 0; i < w.shape.brokers; i++ {
		b := &brokerProcess{id: metadata.BrokerID(i + 1), disk: disk.NewMem(), cleanEpoch: metadata.NoBrokerEpoch, runsBroker: true}
		w.brokers = append(w.brokers, b)
		w.machines = append(w.machines, b)
	}
	for i := 0; i < w.shape.controllers; i++ {
		host := &brokerProcess{disk: disk.NewMem(), cleanEpoch: metadata.NoBrokerEpoch}
		id := metadata.BrokerID(dedicatedControllerBase + i)
		if w.shape.combined {
			host, id = w.brokers[i], metadata.BrokerID(i+1)
		} else {
			host.id = id
			w.machines = append(w.machines, host)
		}
		host.controller = &controllerNode{id: id, machine: host}
		w.controllers = append(w.controllers, host.controller)
		w.voters = append(w.voters, id)
	}
	for _, b := range w.machines {
		w.startMachine(b)
	}
}

// dedicatedControllerBase is the first id of a dedicated controller.
const dedicatedControllerBase = 1001

func (w *world) result(result Result) Result {
	result.Stats = w.stats
	result.Stats.Ticks = w.now
	result.Stats.apiRequests = w.kafka.apiRequests
	result.Acked = w.stats.acked
	result.Violation = w.checker.violation
	result.Trace = w.traceLog.lines()
	result.Hash = w.traceLog.hash.Sum64()
	return result
}

func (w *world) run(runTicks, healTicks int64) {
	w.startMachines()
	var creator topicCreator
	for w.now < runTicks && w.checker.violation == nil {
		topicCreated := w.now >= 20 && w.createTopicStep(&creator)
		w.tick(topicCreated, true)
	}
	if w.checker.violation != nil {
		return
	}
	w.heal(healTicks)
}

// tick advances the world by one tick.
func (w *world) tick(workload, faults bool) {
	w.now++
	if faults {
		w.injectFaults()
	} else {
		w.followMoves() // moves still under way finish while healing
	}
	if workload {
		w.workload.tick()
	} else if w.membersOnly {
		w.consumerStep() // heartbeats only: the group settles (groups_settle.go)
	}
	w.resetLostConns()
	for _, m := range w.network.due() {
		w.dispatch(m)
	}
	w.flushPasses()
	w.tickClients()
	for _, b := range w.machines {
		w.stepMachine(b)
	}
	w.checker.step()
	w.traceLog.digest(w)
}

// dispatch delivers a message to its destination.
func (w *world) dispatch(m *message) {
	switch {
	case m.to > 0:
		if machine := w.machineOf(m.to); machine != nil {
			w.deliver(machine, m)
		}
	default:
		w.clientReceived(m)
	}
}

// heal ends every fault and gives the cluster time to converge: every
// broker up, every partition led, its high watermark at its log end, every
// replica back in the ISR. Then every acknowledged write must be on every
// replica (invariants 1 and 6).
func (w *world) heal(healTicks int64) {
	w.trace("healing")
	w.network.cut = map[link]bool{}
	w.network.blackholed = map[address]int64{}
	w.partitionsUntil = nil
	for _, b := range w.machines {
		switch {
		case b.paused:
			w.resume(b)
		case !b.up:
			w.startMachine(b)
			b.restartAt = 0
		}
	}
	healedAt := w.now
	deadline := w.now + healTicks
	quietFrom := w.now + healTicks/2
	for w.now < deadline && w.checker.violation == nil {
		// Past quietFrom nothing is written but what the KIP-848 members'
		// heartbeats are, as a live consumer goes on heartbeating after
		// the cluster heals.
		w.membersOnly = w.now >= quietFrom
		w.tick(w.now < quietFrom, false)
		if w.now >= quietFrom && w.converged() {
			w.traceOfflineByDesign()
			w.checkProducedAfterHealing(healedAt)
			w.checker.checkLogs(true)
			if w.checker.violation == nil {
				w.settleConsumerGroup()
			}
			return
		}
	}
	if w.checker.violation == nil {
		w.checker.fail(InvariantNoRecovery, "the cluster did not converge within %d ticks of healing: %s", healTicks, w.unconverged())
	}
}

// checkProducedAfterHealing is the other half of invariant 6: once faults
// heal, writes succeed again. Every partition must have had a write
// acknowledged with acks=all since healing began.
func (w *world) checkProducedAfterHealing(healedAt int64) {
	for _, state := range w.metadataImage().Partitions() {
		if w.allowedOffline(state) || state.Topic != workloadTopic {
			continue
		}
		if w.checker.lastAck[state.TopicPartition] <= healedAt {
			w.checker.fail(InvariantNoRecovery, "%s: no write was acknowledged in the %d ticks after healing", state.TopicPartition, w.now-healedAt)
		}
	}
}

// converged reports whether every partition has a leader whose high
// watermark is at its log end, with every replica in the ISR and at the
// same log end, and whether leadership is back in balance: nothing is left
// for rule auto-leader-rebalance to elect, which the active controller
// does within leaderRebalanceTicks of every replica rejoining its ISR.
func (w *world) converged() bool { return w.unconverged() == "" }

func (w *world) unconverged() string {
	for _, state := range w.metadataImage().Partitions() {
		if w.allowedOffline(state) {
			continue
		}
		if state.Leader == metadata.NoBroker {
			return fmt.Sprintf("%s has no leader%s", state.TopicPartition, w.holders.describeIntact(state.TopicPartition))
		}
		if len(state.ISR) != len(state.Replicas) {
			return fmt.Sprintf("%s has ISR %v of replicas %v", state.TopicPartition, state.ISR, state.Replicas)
		}
		leader := w.broker(state.Leader)
		if leader.node == nil {
			return fmt.Sprintf("%s: leader b%d is not running", state.TopicPartition, state.Leader)
		}
		r, _, ok := leader.node.Replica(state.TopicPartition)
		if !ok || r.Role() != replica.Leader || r.HighWatermark() != r.LogEndOffset() {
			return fmt.Sprintf("%s: leader b%d has not committed its log", state.TopicPartition, state.Leader)
		}
		for _, id := range state.Replicas {
			b := w.broker(id)
			if b.node == nil {
				return fmt.Sprintf("%s: b%d is not running", state.TopicPartition, id)
			}
			follower, _, ok := b.node.Replica(state.TopicPartition)
			if !ok || follower.LogEndOffset() != r.LogEndOffset() {
				return fmt.Sprintf("%s: b%d has not caught up", state.TopicPartition, id)
			}
		}
	}
	return w.unbalanced()
}

// unbalanced describes the preferred elections rule auto-leader-rebalance
// would still make, or is empty.
func (w *world) unbalanced() string {
	records, _, err := controller.Rebalance(w.metadataImage(), leaderImbalancePercentage)
	if err != nil {
		panic(fmt.Sprintf("sim: rebalance check: %v", err))
	}
	if len(records) > 0 {
		return fmt.Sprintf("leadership is off balance: the controller has yet to decide %v", records[0])
	}
	return ""
}

// traceLog keeps the last events of a run and a digest of all of them.
type traceLog struct {
	limit  int
	events []string
	hash   interface{ Sum64() uint64 }
	writer interface{ Write([]byte) (int, error) }
	// scratch is digest's buffer, kept between ticks.
	scratch []byte
}

func newTraceLog(limit int) *traceLog {
	h := fnv.New64a()
	return &traceLog{limit: limit, hash: h, writer: h}
}

func (t *traceLog) add(tick int64, event string) {
	line := fmt.Sprintf("%6d  %s", tick, event)
	t.writer.Write([]byte(line))
	t.events = append(t.events, line)
	if len(t.events) > 4*t.limit {
		t.events = append([]string(nil), t.events[len(t.events)-t.limit:]...)
	}
}

func (t *traceLog) lines() []string {
	return append([]string(nil), t.events[max(0, len(t.events)-t.limit):]...)
}

// digest folds every replica's offsets into the run's hash each tick, so a
// determinism test compares whole runs, not only their events.
func (t *traceLog) digest(w *world) {
	b := t.scratch[:0]
	for _, broker := range w.brokers {
		if broker.node == nil {
			continue
		}
		for _, tp := range broker.node.Partitions() {
			r, _, _ := broker.node.Replica(tp)
			b = strconv.AppendInt(b, int64(broker.id), 10)
			b = append(b, ':')
			b = append(b, tp.Topic...)
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(tp.Partition), 10)
			for _, n := range []int64{int64(r.LogEndOffset()), int64(r.HighWatermark()), int64(r.State().LeaderEpoch)} {
				b = append(b, ':')
				b = strconv.AppendInt(b, n, 10)
			}
			b = append(b, ';')
		}
	}
	t.writer.Write(b)
	t.scratch = b
}

// ParseLegacy parses rule names, for the command line.
func ParseLegacy(names []string) ([]rules.Rule, error) {
	var list []rules.Rule
	for _, name := range names {
		rule, err := rules.Parse(name)
		if err != nil {
			return nil, err
		}
		list = append(list, rule)
	}
	return list, nil
}
