// Package sim is tide's second runtime: whole clusters of real brokers in
// one goroutine, each the frontend.FrontEnd tide serve drives (the Kafka
// front end, the lifecycle, the replica fetchers, over the real broker
// node, replication core and partition logs), with a virtual clock, a
// simulated network carrying Kafka's own bytes on connections that reset,
// blackhole and delay, and crashable in-memory disks, driven through fault
// schedules drawn from a seed. After every step a checker tests the
// invariants of DESIGN.md section 3; a seed reproduces a run exactly.
// docs/simulation.md describes the Kafka network and the fault model.
//
// What it owns: time, the network and the disks, the workload's clients
// and the faults; what it decides of Kafka behaviour: nothing, which is
// the point. The controller protocol travels as tide's own values
// (quorum requests and answers).
package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/rules"
)

// Options choose what to simulate.
type Options struct {
	Seed uint64
	// Legacy rules are switched off, to show the failures they prevent.
	Legacy []rules.Rule
	// RunTicks is how long faults are injected; HealTicks bounds the
	// liveness phase that follows. Zero means the defaults.
	RunTicks  int64
	HealTicks int64
	// TraceLines is how many trace events a failure keeps (default 80).
	TraceLines int
	// Without switches kinds of fault off (after the seed has drawn its
	// shape, so the cluster stays the same): for shrinking a failure.
	Without []FaultKind
	// FaultsFrom is the first tick at which faults (and message losses) are
	// injected; before it they are drawn as usual but not injected, and
	// delays and slow disks stay as drawn: for shrinking a failure.
	FaultsFrom int64
	// Detail adds every replica's appends, fetches, high watermarks and
	// proposals to the trace.
	Detail bool
	// BatchedPasses has each broker take every Kafka request due in a tick
	// in one pass of its loop and flush once after the last, as tide
	// serve's loop takes up to maxEventsPerPass queued events before it
	// flushes (internal/server), instead of flushing after each request.
	// What one request's handling put in the node's outbox (a produce
	// refused before its replica decided it) then reaches its caller only
	// after the pass's later requests were handled: a group coordinator
	// may hand out appends built on an append whose refusal it has not
	// yet been told of (rule ordered-coordinator-appends).
	BatchedPasses bool
}

// shape is the cluster and fault model one seed draws (swarm testing: every
// seed its own mix, so that rare combinations come up).
type shape struct {
	brokers           int
	partitions        int
	replicationFactor int
	minInsyncReplicas int
	flushAlways       bool
	producers         int
	consumers         int
	// idempotentShare is the chance that a producer is idempotent.
	idempotentShare float64
	// controllers is the size of the metadata quorum; combined puts them on
	// the first brokers (Kafka's combined mode), otherwise each runs on a
	// machine of its own.
	controllers int
	combined    bool
	// maxBatchBytes bounds a batch and a follower's fetch: small, a
	// follower far behind catches up over many fetches.
	maxBatchBytes int
	// retentionMs, retentionBytes and segmentBytes, when set, are the
	// brokers' retention.ms, retention.bytes and segment.bytes (zero:
	// Kafka's seven days, no limit, and 64 KiB), with
	// retention checked every retentionCheckIntervalMs of virtual time.
	retentionMs              int64
	retentionBytes           int64
	segmentBytes             int64
	retentionCheckIntervalMs int64

	// Probabilities per tick.
	produceRate     float64
	consumeRate     float64
	crashRate       float64
	powerLossShare  float64 // share of crashes that lose unsynced data
	pauseRate       float64
	partitionRate   float64
	totalPowerLoss  float64 // every broker loses power at once
	preferredRate   float64
	shutdownRate    float64
	messageLossRate float64
	zombieRate      float64
	// Faults of the metadata quorum: a controller's machine crashes or
	// pauses, or a controller is cut off the other controllers or the
	// brokers.
	controllerCrashRate     float64
	controllerPauseRate     float64
	controllerPartitionRate float64
	failoverChainRate       float64
	// reassignRate is the chance per tick of a partition move
	// (reassign.go), drawn from a stream of its own.
	reassignRate  float64
	maxDelayTicks int64
	// syncRate is the chance per tick that a broker's slow disk completes
	// the syncs asked of it; 1 is a fast disk.
	syncRate float64
	// withoutConnectionReset, withoutBlackhole and withoutDiskReplacement
	// switch off the parts of message-loss, partition and failover-chain
	// that the summary counts apart (FaultConnectionReset and the others).
	// Each fault still draws its random numbers, so the rest of the run's
	// draws stay the seed's.
	withoutConnectionReset, withoutBlackhole, withoutDiskReplacement bool
	// compaction says whether the workload topic is compacted (compaction.go).
	compaction compactionShape
}

func drawShape(random *rand.Rand) shape {
	s := shape{
		brokers:    3 + random.IntN(3),
		partitions: 1 + random.IntN(3),
		producers:  1 + random.IntN(3),
		consumers:  1 + random.IntN(2),
	}
	s.replicationFactor = min(s.brokers, 2+random.IntN(2))
	s.minInsyncReplicas = 1 + random.IntN(s.replicationFactor-1)
	s.flushAlways = random.IntN(5) != 0
	s.produceRate = 0.2 + random.Float64()*0.6
	s.consumeRate = 0.1 + random.Float64()*0.4
	s.crashRate = random.Float64() * 0.01
	s.powerLossShare = random.Float64()
	s.pauseRate = random.Float64() * 0.005
	s.partitionRate = random.Float64() * 0.006
	s.totalPowerLoss = random.Float64() * 0.0015
	s.preferredRate = random.Float64() * 0.01
	s.shutdownRate = random.Float64() * 0.004
	s.messageLossRate = random.Float64() * 0.03
	if random.IntN(4) == 0 {
		// Churn: leadership moves often, as in a rolling restart with
		// preferred elections after it (the mailing-list thread, KAFKA-6880).
		s.preferredRate = 0.02 + random.Float64()*0.05
		s.shutdownRate = 0.005 + random.Float64()*0.02
		s.partitionRate = 0.005 + random.Float64()*0.01
		s.zombieRate = random.Float64() * 0.01
	}
	s.maxDelayTicks = 1 + random.Int64N(5)
	s.idempotentShare = 0.75
	s.syncRate = 1
	if random.IntN(2) == 0 {
		s.syncRate = 0.05 + random.Float64()*0.5
	}
	if !s.flushAlways {
		// With flush=never a power loss may lose acknowledged writes by
		// design; only process crashes, which keep the page cache.
		s.powerLossShare, s.totalPowerLoss = 0, 0
	}
	s.drawControllers(random)
	s.maxBatchBytes = 16 << 10
	if random.IntN(2) == 0 {
		s.maxBatchBytes = 512 + random.IntN(3584)
	}
	if random.IntN(3) == 0 {
		// Failovers in a row, KAFKA-7128's (failoverChain). Its lagging
		// high watermark needs min.insync.replicas above one, so that a
		// leader alone in the ISR cannot move it (KAFKA-15583).
		s.failoverChainRate = 0.001 + random.Float64()*0.004
		s.replicationFactor, s.minInsyncReplicas = 3, 2
	}
	return s
}

// drawControllers draws the metadata quorum: one or three voters, on the
// brokers or on machines of their own, and its fault rates.
func (s *shape) drawControllers(random *rand.Rand) {
	s.controllers = 3
	if random.IntN(5) == 0 {
		s.controllers = 1
	}
	s.combined = random.IntN(2) == 0
	s.controllerCrashRate = random.Float64() * 0.003
	s.controllerPauseRate = random.Float64() * 0.002
	s.controllerPartitionRate = random.Float64() * 0.003
}

func (s shape) String() string {
	flush := "never"
	if s.flushAlways {
		flush = "always"
	}
	placement := "dedicated"
	if s.combined {
		placement = "combined"
	}
	compacted := ""
	if s.compaction.on {
		compacted = fmt.Sprintf(", compacted (%d keys, %d-byte segments)", s.compaction.keys, s.compaction.segmentBytes)
	}
	return fmt.Sprintf("%d brokers, %d %s controllers, %d partitions, rf %d, min.insync %d, flush=%s, %d producers, %d consumers%s",
		s.brokers, s.controllers, placement, s.partitions, s.replicationFactor, s.minInsyncReplicas, flush, s.producers, s.consumers, compacted)
}

// Timing, in ticks (a tick is a virtual 10 ms).
const (
	defaultRunTicks     = 3000
	defaultHealTicks    = 3000
	heartbeatTicks      = 5
	sessionTimeoutTicks = 60
	replicaLagTicks     = 100
	fetchRetryTicks     = 20
	// A follower's fetcher asks its leader to hold a fetch up to
	// replicaFetchMaxWaitTicks (replica.fetch.wait.max.ms, 100 ms here)
	// and gives a request up replicaRequestTimeoutTicks past that; the
	// replica itself gives a fetch up only after both.
	replicaFetchMaxWaitTicks   = 10
	replicaRequestTimeoutTicks = 30
	replicaFetchTimeoutTicks   = 2 * (replicaFetchMaxWaitTicks + replicaRequestTimeoutTicks)
	proposalRetryTicks         = 40
	produceTimeoutTicks        = 300
	checkEveryTicks            = 50
	// leaderRebalanceTicks is the controllers' leader imbalance check
	// (leader.imbalance.check.interval.seconds; 5 s of virtual time, not
	// Kafka's 300 s, so that it runs several times a run, faults and all),
	// at Kafka's leader.imbalance.per.broker.percentage.
	leaderRebalanceTicks      = 500
	leaderImbalancePercentage = controller.DefaultLeaderImbalancePercentage
	maxMetadataPerAnswer      = 1 << 20
	clientRequestLostTicks    = 400
)
