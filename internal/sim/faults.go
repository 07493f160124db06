package sim

import "github.com/tidelog/tide/internal/metadata"

// injectFaults draws this tick's faults from the seed's rates: crashes
// (process crashes keep the page cache, power losses do not), a power loss
// of every machine at once, pauses long enough to be fenced (a zombie that
// wakes with stale state), network partitions (one way, both ways, or a
// machine isolated from everyone) that heal after a while, preferred
// leader elections, controlled shutdowns, and the metadata quorum's own:
// a controller's machine crashing or pausing, a controller cut off.
func (w *world) injectFaults() {
	s := w.shape
	r := w.random
	b := w.brokers[r.IntN(len(w.brokers))]
	c := w.controllers[r.IntN(len(w.controllers))]
	fault := w.drawFault()
	if w.now < w.options.FaultsFrom {
		// Drawn the same way, so the schedule after FaultsFrom stays close
		// to the full run's, but not injected.
		fault = ""
	}
	switch fault {
	case "total-power-loss":
		w.trace("every machine loses power")
		for _, each := range w.machines {
			w.crash(each, true)
		}
	case FaultCrash:
		w.crash(b, r.Float64() < s.powerLossShare)
	case FaultPause:
		w.pause(b, 10+r.Int64N(3*sessionTimeoutTicks))
	case FaultPartition:
		w.partition()
	case FaultPreferred:
		w.stats.preferred++
		w.trace("preferred leader election")
		w.electPreferred()
	case FaultShutdown:
		w.beginShutdown(b)
	case FaultZombie:
		w.makeZombie()
	case FaultControllerCrash:
		w.stats.controllerCrashes++
		w.crash(c.machine, r.Float64() < s.powerLossShare)
	case FaultControllerPause:
		w.stats.controllerPauses++
		w.pause(c.machine, 10+r.Int64N(3*raftElectionTicks))
	case FaultControllerPartition:
		w.partitionController(c)
	case FaultFailoverChain:
		w.failoverChain()
	}
	w.maybeReassign()
	w.runScheduled()
	w.healPartitions()
}

// scheduledStep is a later step of a composed fault.
type scheduledStep struct {
	at   int64
	step func()
}

func (w *world) schedule(at int64, step func()) {
	w.scheduled = append(w.scheduled, scheduledStep{at, step})
}

// runScheduled runs the steps that are due, in the order scheduled.
func (w *world) runScheduled() {
	var later []scheduledStep
	due := w.scheduled
	w.scheduled = nil
	for _, s := range due {
		if w.now >= s.at {
			s.step()
		} else {
			later = append(later, s)
		}
	}
	w.scheduled = append(later, w.scheduled...)
}

// failoverChain composes the faults of KAFKA-7128: a follower of a
// partition crashes and leaves the ISR; the leader crashes, and another
// member leads with a high watermark that may lag its log; the follower
// comes back and catches up to that high watermark; then the new leader
// crashes too, while the follower may not yet hold what it led. Whoever is
// elected then must hold every committed record.
func (w *world) failoverChain() {
	partitions := w.workloadPartitions()
	if len(partitions) == 0 || w.now < w.chainUntil {
		return // one chain at a time: two would blur each other
	}
	state := partitions[w.random.IntN(len(partitions))]
	if state.Leader == metadata.NoBroker || len(state.ISR) < 2 || len(state.Replicas) < 3 {
		return
	}
	var follower metadata.BrokerID = metadata.NoBroker
	for _, id := range state.ISR {
		if id != state.Leader {
			follower = id
		}
	}
	w.stats.failoverChains++
	w.trace("failover chain on %s: b%d, then leader b%d, then the next leader", state.TopicPartition, follower, state.Leader)
	if w.random.IntN(2) == 0 && !w.shape.withoutDiskReplacement {
		w.replaceDataDisk(w.broker(follower)) // it comes back as a new, empty replica
	} else {
		w.crash(w.broker(follower), false)
	}
	w.broker(follower).restartAt = 0 // the chain restarts it
	first := w.now + sessionTimeoutTicks + 10 + w.random.Int64N(40)
	w.schedule(first, func() { w.crash(w.broker(state.Leader), false) })
	back := first + sessionTimeoutTicks + 10 + w.random.Int64N(60)
	w.schedule(back, func() {
		if b := w.broker(follower); !b.up {
			b.restartAt = 0
			w.startMachine(b)
		}
	})
	// The moment the follower is back in the ISR, the leader crashes: with
	// rule kafka-7128 on it has then caught up past the leader's epoch
	// start; without it, it may hold no more than a lagging high watermark.
	w.chainUntil = back + 400
	w.watch(back, back+400, func() bool {
		next, _ := w.metadataImage().Partition(state.TopicPartition)
		if !next.InISR(follower) || next.Leader == metadata.NoBroker || next.Leader == follower {
			return false
		}
		w.crash(w.broker(next.Leader), false)
		return true
	})
}

// watch runs check every tick from from to until, until it reports done.
func (w *world) watch(from, until int64, check func() bool) {
	var again func()
	again = func() {
		if !check() && w.now < until {
			w.schedule(w.now+1, again)
		}
	}
	w.schedule(from, again)
}

// drawFault draws whether a fault happens this tick, and which.
func (w *world) drawFault() FaultKind {
	s := w.shape
	r := w.random
	switch {
	case r.Float64() < s.totalPowerLoss:
		return "total-power-loss"
	case r.Float64() < s.crashRate:
		return FaultCrash
	case r.Float64() < s.pauseRate:
		return FaultPause
	case r.Float64() < s.partitionRate:
		return FaultPartition
	case r.Float64() < s.preferredRate:
		return FaultPreferred
	case r.Float64() < s.shutdownRate:
		return FaultShutdown
	case r.Float64() < s.zombieRate:
		return FaultZombie
	case r.Float64() < s.controllerCrashRate:
		return FaultControllerCrash
	case r.Float64() < s.controllerPauseRate:
		return FaultControllerPause
	case r.Float64() < s.controllerPartitionRate:
		return FaultControllerPartition
	case r.Float64() < s.failoverChainRate:
		return FaultFailoverChain
	}
	return ""
}

// controllerLinks are the links between a broker and every controller, both
// ways: cut, the broker misses metadata but keeps replicating.
func (w *world) controllerLinks(b *brokerProcess) []link {
	var links []link
	for _, c := range w.controllers {
		links = append(links, link{brokerAddress(b.id), controllerAddress(c.id)}, link{controllerAddress(c.id), brokerAddress(b.id)})
	}
	return links
}

// addresses are a machine's endpoints.
func (b *brokerProcess) addresses() []address {
	var list []address
	if b.runsBroker {
		list = append(list, brokerAddress(b.id))
	}
	if b.controller != nil {
		list = append(list, controllerAddress(b.controller.id))
	}
	return list
}

// makeZombie composes the faults of KAFKA-6880: a follower is cut off from
// the controllers (it keeps fetching with the metadata it has) and the
// leader it follows shuts down, so that leadership moves away and, with a
// preferred election, may come back while the follower knows nothing of it.
func (w *world) makeZombie() {
	partitions := w.workloadPartitions()
	if len(partitions) == 0 {
		return
	}
	state := partitions[w.random.IntN(len(partitions))]
	if state.Leader == metadata.NoBroker || len(state.ISR) < 2 {
		return
	}
	var followers []metadata.BrokerID
	for _, id := range state.ISR {
		if id != state.Leader {
			followers = append(followers, id)
		}
	}
	zombie := w.broker(followers[w.random.IntN(len(followers))])
	until := w.now + 150 + w.random.Int64N(300)
	w.cutLinks(w.controllerLinks(zombie), until)
	w.stats.zombies++
	w.trace("b%d becomes a zombie for %s until %d: cut off the controllers while its leader b%d shuts down", zombie.id, state.TopicPartition, until, state.Leader)
	w.beginShutdown(w.broker(state.Leader))
	// Once the leader is back, preferred elections hand it leadership
	// again, in an epoch the zombie has not heard of (the second leader
	// change of KAFKA-6880).
	for at := w.now + 120; at < until; at += 40 + w.random.Int64N(40) {
		w.schedule(at, func() { w.electPreferred() })
	}
}

// partition cuts links between brokers for a while.
func (w *world) partition() {
	r := w.random
	a := w.brokers[r.IntN(len(w.brokers))]
	from := brokerAddress(a.id)
	var cut []link
	switch r.IntN(4) {
	case 3: // cut a broker off the controllers only: it keeps replicating
		// while it misses metadata, the zombie of KAFKA-6880
		cut = w.controllerLinks(a)
	case 0: // blackhole a machine: everything it sends or is sent is
		// dropped, clients' packets too, and every connection stays open
		until := w.now + 20 + r.Int64N(400)
		if !w.shape.withoutBlackhole {
			w.blackhole(a, until)
		}
		return
	case 1: // two brokers cannot talk, both ways
		b := w.brokers[r.IntN(len(w.brokers))]
		if a == b {
			return
		}
		cut = append(cut, link{from, brokerAddress(b.id)}, link{brokerAddress(b.id), from})
	default: // one way
		b := w.brokers[r.IntN(len(w.brokers))]
		if a == b {
			return
		}
		cut = append(cut, link{from, brokerAddress(b.id)})
	}
	until := w.now + 20 + r.Int64N(400)
	w.cutLinks(cut, until)
	w.stats.partitions++
	w.trace("network partition: %v until %d", cut, until)
}

// partitionController cuts a controller off the other controllers (a
// leader that cannot reach a majority must stop deciding; a follower must
// not disrupt the leader when it returns), off the brokers, or both.
func (w *world) partitionController(c *controllerNode) {
	r := w.random
	self := controllerAddress(c.id)
	var cut []link
	kind := r.IntN(3)
	if kind != 1 {
		for _, other := range w.controllers {
			if other != c {
				cut = append(cut, link{self, controllerAddress(other.id)}, link{controllerAddress(other.id), self})
			}
		}
	}
	if kind != 0 {
		for _, b := range w.brokers {
			cut = append(cut, link{self, brokerAddress(b.id)}, link{brokerAddress(b.id), self})
		}
	}
	until := w.now + 20 + r.Int64N(300)
	w.cutLinks(cut, until)
	w.stats.controllerPartitions++
	w.trace("controller partition: c%d cut off %s until %d", c.id, [...]string{"the other controllers", "the brokers", "everyone"}[kind], until)
}

// blackhole drops every packet to and from a machine's addresses until
// the tick given, leaving its connections open: neither side learns of it
// but by its own timeouts (a fetcher's, a client's, the controller's
// session timeout).
func (w *world) blackhole(b *brokerProcess, until int64) {
	for _, a := range b.addresses() {
		w.network.blackholed[a] = until
	}
	w.stats.blackholes++
	w.trace("%s is blackholed until %d", w.machineName(b), until)
}

func (w *world) cutLinks(links []link, until int64) {
	for _, l := range links {
		w.network.cut[l] = true
		w.partitionsUntil = append(w.partitionsUntil, cutUntil{l, until})
	}
}

type cutUntil struct {
	link  link
	until int64
}

func (w *world) healPartitions() {
	for _, a := range sortedAddresses(w.network.blackholed) {
		if w.now >= w.network.blackholed[a] {
			delete(w.network.blackholed, a)
		}
	}
	kept := w.partitionsUntil[:0]
	for _, c := range w.partitionsUntil {
		if w.now >= c.until {
			delete(w.network.cut, c.link)
			continue
		}
		kept = append(kept, c)
	}
	w.partitionsUntil = kept
}

func sortedAddresses(m map[address]int64) []address {
	list := make([]address, 0, len(m))
	for a := range m {
		list = append(list, a)
	}
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && list[j] < list[j-1]; j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	return list
}
