package sim

import (
	"fmt"
	"strings"
)

// FaultKind names one kind of fault the simulator injects, so a run can be
// made without it (Options.Without): shrinking a failure drops the kinds it
// does not need, and an engineer can ask for a run with only the faults
// they suspect.
type FaultKind string

// The kinds of fault, in the order Shrink tries to drop them: the ones that
// make a trace hardest to read go first.
const (
	FaultMessageLoss = FaultKind("message-loss") // peer messages lost at a seeded rate
	FaultDelay       = FaultKind("delay")        // delays above one tick, reordering across links
	FaultSlowDisk    = FaultKind("slow-disk")    // syncs complete late
	FaultPartition   = FaultKind("partition")    // cut links, one way, both ways, isolation
	FaultPause       = FaultKind("pause")        // a process stops and wakes with stale state
	FaultZombie      = FaultKind("zombie")       // KAFKA-6880's composed fault
	FaultPreferred   = FaultKind("preferred-election")
	FaultShutdown    = FaultKind("controlled-shutdown")
	FaultPowerLoss   = FaultKind("power-loss") // crashes that lose unsynced data, one broker or all
	FaultCrash       = FaultKind("crash")      // process crashes (and power losses)
	// The metadata quorum's: a controller's machine crashes (a combined
	// one takes its broker along) or pauses; a controller is cut off.
	FaultControllerCrash     = FaultKind("controller-crash")
	FaultControllerPause     = FaultKind("controller-pause")
	FaultControllerPartition = FaultKind("controller-partition")
	// FaultFailoverChain is KAFKA-7128's composed fault (failoverChain).
	FaultFailoverChain = FaultKind("failover-chain")
	// Three kinds are parts of the ones above, counted apart in a run's
	// summary and switched off apart: a lost packet on a Kafka connection
	// resets it (message-loss's part on Kafka connections); a blackholed
	// machine (partition's silent kind); a replaced data disk (a failover
	// chain's first fault, which then crashes the broker instead).
	FaultConnectionReset = FaultKind("connection-reset")
	FaultBlackhole       = FaultKind("blackhole")
	FaultDiskReplacement = FaultKind("disk-replacement")
	// FaultReassign moves partitions between brokers (reassign.go).
	FaultReassign = FaultKind("reassign")
)

// FaultKinds returns every kind, in Shrink's order.
func FaultKinds() []FaultKind {
	return []FaultKind{FaultMessageLoss, FaultConnectionReset, FaultDelay, FaultSlowDisk, FaultPartition, FaultBlackhole, FaultPause, FaultZombie,
		FaultPreferred, FaultShutdown, FaultReassign, FaultFailoverChain, FaultDiskReplacement, FaultControllerPartition, FaultControllerPause,
		FaultControllerCrash, FaultPowerLoss, FaultCrash}
}

// ParseFaultKinds parses fault kind names, for the command line.
func ParseFaultKinds(names []string) ([]FaultKind, error) {
	var kinds []FaultKind
	for _, name := range names {
		known := false
		for _, kind := range FaultKinds() {
			if string(kind) == name {
				kinds, known = append(kinds, kind), true
			}
		}
		if !known {
			var all []string
			for _, kind := range FaultKinds() {
				all = append(all, string(kind))
			}
			return nil, fmt.Errorf("unknown fault kind %q (kinds: %s)", name, strings.Join(all, ", "))
		}
	}
	return kinds, nil
}

// without switches fault kinds off in a drawn shape. It runs after the
// whole shape is drawn, so the seed's cluster and the random numbers drawn
// for it stay the same.
func (s shape) without(kinds []FaultKind) shape {
	for _, kind := range kinds {
		switch kind {
		case FaultMessageLoss:
			s.messageLossRate = 0
		case FaultDelay:
			s.maxDelayTicks = 1
		case FaultSlowDisk:
			s.syncRate = 1
		case FaultPartition:
			s.partitionRate = 0
		case FaultPause:
			s.pauseRate = 0
		case FaultZombie:
			s.zombieRate = 0
		case FaultPreferred:
			s.preferredRate = 0
		case FaultShutdown:
			s.shutdownRate = 0
		case FaultPowerLoss:
			s.powerLossShare, s.totalPowerLoss = 0, 0
		case FaultCrash:
			s.crashRate, s.totalPowerLoss = 0, 0
		case FaultControllerCrash:
			s.controllerCrashRate = 0
		case FaultControllerPause:
			s.controllerPauseRate = 0
		case FaultControllerPartition:
			s.controllerPartitionRate = 0
		case FaultFailoverChain:
			s.failoverChainRate = 0
		case FaultConnectionReset:
			s.withoutConnectionReset = true
		case FaultBlackhole:
			s.withoutBlackhole = true
		case FaultDiskReplacement:
			s.withoutDiskReplacement = true
		case FaultReassign:
			s.reassignRate = 0
		}
	}
	return s
}

// maxShrinkRuns bounds the runs one Shrink makes.
const maxShrinkRuns = 80

// Shrink looks for a smaller run that breaks the same invariant as a failing
// one: first without each kind of fault it can do without, then with the
// shortest fault phase (RunTicks) and the latest start of faults
// (FaultsFrom) that still fail, then once more without kinds the shorter
// run no longer needs. Every try is a whole run, so the
// result is a run that really fails, reproduced by its options; tried says
// after each run what was tried and whether it still failed. The search is
// greedy: the result is small, not the smallest.
func Shrink(failing Options, tried func(Options, Result)) (Options, Result) {
	best := Run(failing)
	if best.Violation == nil {
		return failing, best
	}
	invariant := best.Violation.Invariant
	runs := 1
	attempt := func(candidate Options) bool {
		if runs >= maxShrinkRuns {
			return false
		}
		runs++
		result := Run(candidate)
		if tried != nil {
			tried(candidate, result)
		}
		if result.Violation == nil || result.Violation.Invariant != invariant {
			return false
		}
		failing, best = candidate, result
		return true
	}
	dropKinds(failing, attempt)
	shortenRun(failing, best, attempt)
	delayFaults(failing, best, attempt)
	dropKinds(failing, attempt)
	return failing, best
}

// dropKinds tries the run without each kind of fault not yet dropped.
func dropKinds(failing Options, attempt func(Options) bool) {
	for _, kind := range FaultKinds() {
		if failing.hasWithout(kind) {
			continue
		}
		candidate := failing
		candidate.Without = append(append([]FaultKind(nil), failing.Without...), kind)
		if attempt(candidate) {
			failing = candidate
		}
	}
}

// shortenRun bisects the fault phase's length. A violation seen at tick T
// of the fault phase needs at most T ticks of it; fewer may do, since the
// liveness phase that follows can still show it.
func shortenRun(failing Options, best Result, attempt func(Options) bool) {
	failingTicks := failing.runTicks()
	if tick := best.Violation.Tick; tick < failingTicks {
		// The same prefix of the same run: it fails the same way.
		candidate := failing
		candidate.RunTicks = tick
		if attempt(candidate) {
			failing, failingTicks = candidate, tick
		}
	}
	bisect(failingTicks, 0, func(failing, passing int64) bool { return failing-passing <= max(10, failing/50) },
		func(ticks int64) bool {
			candidate := failing
			candidate.RunTicks = ticks
			if !attempt(candidate) {
				return false
			}
			failing = candidate
			return true
		})
}

// delayFaults bisects the tick faults start at: the faults long before the
// violation are often not needed, and a run without them reads shorter.
func delayFaults(failing Options, best Result, attempt func(Options) bool) {
	bisect(failing.FaultsFrom, min(best.Violation.Tick, failing.runTicks()),
		func(failing, passing int64) bool { return passing-failing <= max(10, passing/50) },
		func(from int64) bool {
			candidate := failing
			candidate.FaultsFrom = from
			if !attempt(candidate) {
				return false
			}
			failing = candidate
			return true
		})
}

// bisect narrows the gap between a value known to fail and one known to
// pass by trying the middle, until close says the two are close enough.
func bisect(failing, passing int64, close func(failing, passing int64) bool, try func(int64) bool) {
	for !close(failing, passing) {
		middle := (failing + passing) / 2
		if try(middle) {
			failing = middle
		} else {
			passing = middle
		}
	}
}

func (o Options) hasWithout(kind FaultKind) bool {
	for _, each := range o.Without {
		if each == kind {
			return true
		}
	}
	return false
}

func (o Options) runTicks() int64 {
	if o.RunTicks == 0 {
		return defaultRunTicks
	}
	return o.RunTicks
}

// Command is the command line that reproduces a run with these options.
func (o Options) Command() string {
	command := fmt.Sprintf("go run ./cmd/tide sim --seed %d", o.Seed)
	for _, rule := range o.Legacy {
		command += " --legacy " + string(rule)
	}
	if len(o.Without) > 0 {
		var names []string
		for _, kind := range o.Without {
			names = append(names, string(kind))
		}
		command += " --without " + strings.Join(names, ",")
	}
	if o.FaultsFrom != 0 {
		command += fmt.Sprintf(" --faults-from %d", o.FaultsFrom)
	}
	if o.RunTicks != 0 {
		command += fmt.Sprintf(" --run-ticks %d", o.RunTicks)
	}
	if o.BatchedPasses {
		command += " --batched-passes"
	}
	return command
}
