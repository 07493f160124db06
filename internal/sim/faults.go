package sim

import "github.com/tidelog/tide/internal/metadata"

// injectFaults draws this tick's faults from the seed's rates: crashes
// (process crashes keep the page cache, power losses do not), a power loss
// of every broker at once, pauses long enough to be fenced (a zombie that
// wakes with stale state), network partitions (one way, both ways, or a
// broker isolated from everyone including the controller) that heal after a
// while, preferred leader elections and controlled shutdowns.
func (w *world) injectFaults() {
	s := w.shape
	r := w.random
	b := w.brokers[r.IntN(len(w.brokers))]
	fault := w.drawFault()
	if w.now < w.options.FaultsFrom {
		// Drawn the same way, so the schedule after FaultsFrom stays close
		// to the full run's, but not injected.
		fault = ""
	}
	switch fault {
	case "total-power-loss":
		w.trace("every broker loses power")
		for _, each := range w.brokers {
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
		w.controller.electPreferred()
	case FaultShutdown:
		w.beginShutdown(b)
	case FaultZombie:
		w.makeZombie()
	}
	w.healPartitions()
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
	}
	return ""
}

// makeZombie composes the faults of KAFKA-6880: a follower is cut off from
// the controller (it keeps fetching with the metadata it has) and the
// leader it follows shuts down, so that leadership moves away and, with a
// preferred election, may come back while the follower knows nothing of it.
func (w *world) makeZombie() {
	partitions := w.controller.image.Partitions()
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
	for _, l := range []link{{brokerAddress(zombie.id), controllerAddress}, {controllerAddress, brokerAddress(zombie.id)}} {
		w.network.cut[l] = true
		w.partitionsUntil = append(w.partitionsUntil, cutUntil{l, until})
	}
	w.stats.zombies++
	w.trace("b%d becomes a zombie for %s until %d: cut off the controller while its leader b%d shuts down", zombie.id, state.TopicPartition, until, state.Leader)
	w.beginShutdown(w.broker(state.Leader))
}

// partition cuts links for a while.
func (w *world) partition() {
	r := w.random
	a := w.brokers[r.IntN(len(w.brokers))]
	from := brokerAddress(a.id)
	var cut []link
	switch r.IntN(4) {
	case 3: // cut a broker off the controller only: it keeps replicating
		// while it misses metadata, the zombie of KAFKA-6880
		cut = append(cut, link{from, controllerAddress}, link{controllerAddress, from})
	case 0: // isolate a broker from everyone, the controller included
		for _, other := range w.brokers {
			if other != a {
				cut = append(cut, link{from, brokerAddress(other.id)}, link{brokerAddress(other.id), from})
			}
		}
		cut = append(cut, link{from, controllerAddress}, link{controllerAddress, from})
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
	for _, l := range cut {
		w.network.cut[l] = true
		w.partitionsUntil = append(w.partitionsUntil, cutUntil{l, until})
	}
	w.stats.partitions++
	w.trace("network partition: %v until %d", cut, until)
}

type cutUntil struct {
	link  link
	until int64
}

func (w *world) healPartitions() {
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
