package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

var seeds = flag.Int("seeds", 200, "how many seeds TestSeeds runs")

// TestSeeds runs seeded simulations with every rule on: none may break an
// invariant.
func TestSeeds(t *testing.T) {
	count := *seeds
	if testing.Short() {
		count = 50
	}
	for seed := 1; seed <= count; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			result := Run(Options{Seed: uint64(seed)})
			if result.Violation != nil {
				t.Fatalf("%s\n%s\n%s", result.Shape, result.Violation, strings.Join(result.Trace, "\n"))
			}
		})
	}
}

// The same seed gives the same run, byte for byte; another seed another.
func TestSameSeedSameRun(t *testing.T) {
	first, second := Run(Options{Seed: 42, Detail: true}), Run(Options{Seed: 42, Detail: true})
	if first.Hash != second.Hash || strings.Join(first.Trace, "\n") != strings.Join(second.Trace, "\n") {
		t.Fatalf("seed 42 ran differently twice: %x and %x", first.Hash, second.Hash)
	}
	if other := Run(Options{Seed: 43}); other.Hash == first.Hash {
		t.Fatalf("seeds 42 and 43 gave the same run")
	}
}

// runUntil runs a seed's world until condition holds, with faults off so
// the cluster makes progress.
func runUntil(t *testing.T, seed uint64, condition func(*world) bool) *world {
	t.Helper()
	w := newWorld(Options{Seed: seed})
	w.startMachines()
	var creator topicCreator
	for w.now < 5000 {
		created := w.now >= 20 && w.createTopicStep(&creator)
		w.tick(created, false)
		if created && condition(w) {
			return w
		}
	}
	t.Fatal("the condition never held")
	return nil
}

func requireViolation(t *testing.T, w *world, invariant string) {
	t.Helper()
	if w.checker.violation == nil || w.checker.violation.Invariant != invariant {
		t.Fatalf("want a %s violation, got %v", invariant, w.checker.violation)
	}
	t.Log(w.checker.violation)
}

// Each invariant's check is shown catching a violation made by hand: a
// checker that cannot fail proves nothing.
func TestCheckerCatchesAckedWriteLost(t *testing.T) {
	w := runUntil(t, seedCompacted(false), func(w *world) bool {
		return w.stats.acked > 3 && w.checker.violation == nil && len(w.checker.acked) > 0
	})
	for tp := range w.checker.acked {
		state, _ := w.metadataImage().Partition(tp)
		if _, log, ok := w.broker(state.Leader).node.Replica(tp); ok {
			if _, err := log.TruncateTo(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.checker.checkLogs(false)
	requireViolation(t, w, InvariantAckedWriteLost)
}

// TestCheckerCatchesCompactionLostValue: on a compacted topic the same
// loss is caught record by record (compaction.go).
func TestCheckerCatchesCompactionLostValue(t *testing.T) {
	w := runUntil(t, seedCompacted(true), func(w *world) bool {
		return w.stats.acked > 3 && w.checker.violation == nil && len(w.checker.acked) > 0
	})
	for tp := range w.checker.acked {
		state, _ := w.metadataImage().Partition(tp)
		if _, log, ok := w.broker(state.Leader).node.Replica(tp); ok {
			if _, err := log.TruncateTo(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.checker.checkLogs(false)
	requireViolation(t, w, InvariantCompactionLostValue)
}

// seedCompacted returns the first seed from 7 whose workload topic is
// compacted, or is not.
func seedCompacted(compacted bool) uint64 {
	seed := uint64(7)
	for newWorld(Options{Seed: seed}).shape.compaction.on != compacted {
		seed++
	}
	return seed
}

func TestCheckerCatchesHighWatermarkGoingBack(t *testing.T) {
	w := newWorld(Options{Seed: 1})
	tp := metadata.TopicPartition{Topic: "events"}
	w.checker.observeHighWatermark(clientAddress(0), tp, 10, "a test")
	w.checker.observeHighWatermark(clientAddress(1), tp, 5, "a test") // another client: fine
	if w.checker.violation != nil {
		t.Fatalf("clients are independent: %v", w.checker.violation)
	}
	w.checker.observeHighWatermark(clientAddress(0), tp, 9, "a test")
	requireViolation(t, w, InvariantHighWatermarkBack)
}

func TestCheckerCatchesPrefixDisagreement(t *testing.T) {
	w := newWorld(Options{Seed: 1})
	a := liveLog{broker: 1, highWatermark: 20, batches: map[record.Offset]batchID{0: {0, 10, 1, 100}, 10: {10, 20, 2, 100}}, offsets: []record.Offset{0, 10}}
	b := liveLog{broker: 2, highWatermark: 20, batches: map[record.Offset]batchID{0: {0, 10, 1, 100}, 10: {10, 20, 3, 100}}, offsets: []record.Offset{0, 10}}
	w.checker.checkAgreement(metadata.TopicPartition{Topic: "events"}, []liveLog{a, b})
	requireViolation(t, w, InvariantPrefixesDisagree)
}

func TestCheckerCatchesTwoLeadersInOneEpoch(t *testing.T) {
	w := runUntil(t, 3, func(w *world) bool { return len(w.checker.leaders) > 0 })
	for key, leader := range w.checker.leaders {
		w.checker.leaders[key] = leader + 100
	}
	w.checker.checkOneLeaderPerEpoch()
	requireViolation(t, w, InvariantTwoLeadersOneEpoch)
}

func TestCheckerCatchesTwoControllersInOneTerm(t *testing.T) {
	w := runUntil(t, 3, func(w *world) bool { return len(w.checker.activeControllers) > 0 })
	for term := range w.checker.activeControllers {
		w.checker.activeControllers[term] = 999
	}
	w.checker.checkOneControllerPerTerm()
	requireViolation(t, w, InvariantTwoControllers)
}

func TestCheckerCatchesReadTakenBack(t *testing.T) {
	w := newWorld(Options{Seed: 1})
	batch := record.Build(record.BuildOptions{BaseOffset: 5, Records: []record.Record{{Value: []byte("x")}, {Value: []byte("y")}}})
	w.checker.observeRead(metadata.TopicPartition{Topic: "events"}, batch, 6, 5)
	requireViolation(t, w, InvariantReadTakenBack)
}

func TestCheckerCatchesNoRecovery(t *testing.T) {
	w := runUntil(t, 5, func(w *world) bool { return w.now > 100 })
	// A cut that healing does not remove: one replica stays unreachable.
	w.heal(100)
	w.checker.violation = nil
	down := w.broker(w.metadataImage().Partitions()[0].Replicas[0])
	for _, l := range w.controllerLinks(down) {
		w.network.cut[l] = true
	}
	w.crash(down, false)
	down.restartAt = 1 << 60
	deadline := w.now + 400
	for w.now < deadline && w.checker.violation == nil {
		w.tick(false, false)
	}
	if w.converged() {
		t.Fatal("a cluster with a broker down converged")
	}
	w.checker.fail(InvariantNoRecovery, "%s", w.unconverged())
	requireViolation(t, w, InvariantNoRecovery)
}

// Invariant 6 also asks that writes succeed once faults heal: a partition
// with no acknowledged write since healing fails it.
func TestCheckerCatchesNoWriteAfterHealing(t *testing.T) {
	w := runUntil(t, 9, func(w *world) bool { return w.stats.acked > 0 })
	w.checkProducedAfterHealing(w.now)
	requireViolation(t, w, InvariantNoRecovery)
}

func TestCheckerCatchesAckedDuplicate(t *testing.T) {
	w := newWorld(Options{Seed: 1})
	tp := metadata.TopicPartition{Topic: "events"}
	w.checker.acked[tp] = []batchID{{0, 2, 7, 100}}
	log := liveLog{broker: 1, highWatermark: 6, batches: map[record.Offset]batchID{0: {0, 2, 7, 100}, 2: {2, 4, 8, 100}, 4: {4, 6, 7, 100}}, offsets: []record.Offset{0, 2, 4}}
	w.checker.checkNoDuplicates(tp, []liveLog{log})
	requireViolation(t, w, InvariantAckedDuplicated)
}

// Two plain producers that build the same records in the same tick (seeds
// 1692 and 20779: one tombstone of the same key) build byte-identical
// batches, and the log rightly holds that content twice: the checker allows
// a content as many copies as batches were built with it, and no more.
func TestCheckerTellsIdenticalBatchesFromRetries(t *testing.T) {
	tp := metadata.TopicPartition{Topic: "events"}
	twice := liveLog{broker: 1, highWatermark: 2, batches: map[record.Offset]batchID{0: {0, 1, 7, 58}, 1: {1, 2, 7, 58}}, offsets: []record.Offset{0, 1}}
	w := newWorld(Options{Seed: 1})
	w.checker.acked[tp] = []batchID{{0, 1, 7, 58}}
	w.checker.built[tp] = map[content]int{{7, 58}: 2}
	w.checker.checkNoDuplicates(tp, []liveLog{twice})
	if w.checker.violation != nil {
		t.Fatalf("two batches built alike, held twice: %v", w.checker.violation)
	}
	thrice := twice
	thrice.highWatermark, thrice.batches, thrice.offsets = 3, map[record.Offset]batchID{0: {0, 1, 7, 58}, 1: {1, 2, 7, 58}, 2: {2, 3, 7, 58}}, []record.Offset{0, 1, 2}
	w.checker.checkNoDuplicates(tp, []liveLog{thrice})
	requireViolation(t, w, InvariantAckedDuplicated)
	w = newWorld(Options{Seed: 1})
	w.checker.acked[tp] = []batchID{{0, 1, 7, 58}}
	w.checker.built[tp] = map[content]int{{7, 58}: 1}
	w.checker.checkNoDuplicates(tp, []liveLog{twice})
	requireViolation(t, w, InvariantAckedDuplicated)
}

// Seeds 1692 and 20779 failed acknowledged-write-duplicated on identical
// batches of two plain producers (TestCheckerTellsIdenticalBatchesFromRetries).
func TestIdenticalPlainBatchesSeeds(t *testing.T) {
	for _, seed := range []uint64{1692, 20779} {
		if result := Run(Options{Seed: seed}); result.Violation != nil {
			t.Errorf("seed %d: %s", seed, result.Violation)
		}
	}
}

// A follower's log below its own high watermark is committed: the checker
// learns from it, so a record the follower's cleaner removed because a later
// committed record of its key superseded it is not reported lost when that
// follower leads (seed 41482), while the same log with the later record
// never seen committed still is.
func TestCheckerLearnsCommittedRecordsFromFollowers(t *testing.T) {
	tp := metadata.TopicPartition{Topic: workloadTopic}
	batch := func(base record.Offset, value string) []byte {
		b := record.Build(record.BuildOptions{Records: []record.Record{{Key: []byte("k2"), Value: []byte(value)}}, LeaderEpoch: 3, BaseTimestampMs: 10})
		record.SetBaseOffset(b, base)
		return b
	}
	empty := record.EmptyBatch(0, 0, 3, 10, nil, 0)
	later := batch(1, "v784")
	cleaned := append(append([]byte(nil), empty...), later...)
	leader := liveLog{broker: 3, leader: true, highWatermark: 1, data: cleaned, committed: empty}
	follower := liveLog{broker: 2, highWatermark: 2, data: cleaned, committed: cleaned}
	for _, withFollower := range []bool{true, false} {
		w := newWorld(Options{Seed: seedCompacted(true)})
		w.checker.learn(tp, batch(0, "v760"))
		logs := []liveLog{leader}
		if withFollower {
			logs = append(logs, follower)
		}
		w.checker.checkCompacted(tp, logs, false)
		if withFollower && w.checker.violation != nil {
			t.Fatalf("superseded by a record committed on a follower: %v", w.checker.violation)
		}
		if !withFollower {
			requireViolation(t, w, InvariantCompactionLostValue)
		}
	}
	if result := Run(Options{Seed: 41482}); result.Violation != nil {
		t.Fatalf("seed 41482: %s", result.Violation)
	}
}

// runWorld runs a prepared world to the end, as Run does.
func runWorld(w *world) (violation *Violation) {
	defer func() {
		if recovered := recover(); recovered != nil {
			violation = &Violation{Invariant: InvariantReplicaViolation, Detail: fmt.Sprint(recovered)}
		}
	}()
	w.run(w.options.RunTicks, w.options.HealTicks)
	return w.checker.violation
}

// Idempotent producers retry with the same sequence and no seed finds a
// duplicate; producers that retry the same way without a producer id write
// acknowledged records twice, and the checker finds it. Without that
// second half the first would prove nothing.
func TestRetriesDuplicateOnlyWithoutIdempotence(t *testing.T) {
	retried := 0
	for seed := uint64(1); seed <= 20; seed++ {
		result := Run(Options{Seed: seed})
		if result.Violation != nil {
			t.Fatalf("seed %d: %s", seed, result.Violation)
		}
		retried += result.Stats.ackedAfterRetry
	}
	if retried == 0 {
		t.Fatal("no write was acknowledged after a retry: the seeds do not exercise idempotence")
	}
	for seed := uint64(1); seed <= 300; seed++ {
		w := newWorld(Options{Seed: seed})
		for _, p := range w.workload.producers {
			p.idempotent, p.retry = false, true
		}
		if violation := runWorld(w); violation != nil && violation.Invariant == InvariantAckedDuplicated {
			t.Logf("seed %d without idempotence: %s", seed, violation)
			return
		}
	}
	t.Fatal("no seed found the duplicates of retries without idempotence")
}

// Seeds 10 and 81 (flush=always) end with partitions whose every
// replica that held the committed records lost its data disk: with unclean
// election off they must stay offline, and the liveness check excuses them
// for that reason, naming the losses, and for no other partition.
func TestOfflineByDesignIsExcused(t *testing.T) {
	for _, seed := range []struct {
		seed     uint64
		excusals []string
	}{
		// The seeds the issue named, which the simulator's Kafka network
		// has since given other schedules: 22714 passes with nothing to
		// excuse; 40496 reached the case again once sync jobs wrote the
		// appended bytes, and passes with nothing to excuse since group
		// coordinators stop at their session lease (rule coordinator-lease),
		// which changed its group traffic.
		{22714, nil},
		{40496, nil},
		// Seeds of today's simulator that reach the case: a partition
		// whose only copy of its committed records was on a broker whose
		// data disk was replaced (flush=always).
		// (Seeds 60 and 121, then 54 and 21, then 71 and 21, then 148 and
		// 199, then 148 and 21 were the pins; brokers learning metadata by
		// long poll, the admin workload's auto-created topics, the group
		// workload's requests, followers fetching by topic id, a fetcher
		// that waits for the partitions it served, brokers asking for
		// producer ids at start, and the KIP-848 group members with sync
		// jobs completing as disk events gave them other schedules; the
		// coordinator lease moved seed 10's loss from b3 at 2369 to b2 at
		// 2788, and took seed 22's, for which seed 81 stands.)
		{10, []string{
			"__consumer_offsets-0 offline by design: every replica that held its committed records lost them (b2 had its data disk replaced at 2788)",
			"__consumer_offsets-1 offline by design: every replica that held its committed records lost them (b2 had its data disk replaced at 2788)"}},
		{81, []string{
			"scratch-1-0 offline by design: every replica that held its committed records lost them (b3 had its data disk replaced at 1349)"}},
	} {
		// Pinned as they ran before the reassignment fault, whose first
		// move gives a seed another schedule from then on.
		result := Run(Options{Seed: seed.seed, Without: []FaultKind{FaultReassign}})
		if result.Violation != nil {
			t.Fatalf("seed %d: %s\n%s", seed.seed, result.Violation, strings.Join(result.Trace, "\n"))
		}
		if got := result.Stats.OfflineByDesign(); got != len(seed.excusals) {
			t.Errorf("seed %d: %d partitions offline by design, want %d", seed.seed, got, len(seed.excusals))
		}
		trace := strings.Join(result.Trace, "\n")
		for _, excusal := range seed.excusals {
			if !strings.Contains(trace, excusal) {
				t.Errorf("seed %d: the trace does not say %q", seed.seed, excusal)
			}
		}
	}
}

// The account of who holds a partition's committed records, step by step:
// an ISR at min.insync.replicas forgets the replicas outside it, a replica
// added by the leader has caught up, one elected from the ELR holds only
// what it held, and a partition is excused only once every holder lost its
// data since it last caught up.
func TestHoldersExcuseOnlyWhenEveryHolderLostItsData(t *testing.T) {
	h := newHolders()
	tp := metadata.TopicPartition{Topic: "events"}
	change := func(now int64, leader metadata.BrokerID, leaderEpoch record.LeaderEpoch, epoch metadata.PartitionEpoch, isr ...metadata.BrokerID) {
		h.apply(now, metadata.PartitionChange{TopicPartition: tp, Leader: leader, ISR: isr, LeaderEpoch: leaderEpoch, PartitionEpoch: epoch})
	}
	excused := func(want bool) {
		t.Helper()
		if reason, ok := h.offlineByDesign(tp); ok != want {
			t.Fatalf("excused %t (%s), want %t", ok, reason, want)
		}
	}
	h.apply(10, metadata.CreateTopic{Name: "events", Config: metadata.TopicConfig{MinInsyncReplicas: 2},
		Partitions: []metadata.PartitionState{{TopicPartition: tp, Replicas: []metadata.BrokerID{1, 2, 3}, ISR: []metadata.BrokerID{1, 2, 3}}}})
	change(20, 1, 0, 1, 1, 2) // b3 leaves an ISR still at min.insync.replicas: it may miss commits
	h.lose(2, 30, "had its data disk replaced at 25")
	change(40, metadata.NoBroker, 1, 2) // b1 and b2 fenced: both would be in the ELR
	excused(false)                      // b1 still holds everything, b3 never counts
	change(50, 1, 2, 3, 1)              // b1 elected from the ELR
	change(60, 1, 2, 4, 1, 2)           // b2 caught up (after its loss) and was added by the leader
	h.lose(1, 70, "")
	change(80, metadata.NoBroker, 3, 5)
	excused(false) // b2 holds it again since 60
	h.lose(2, 90, "stopped uncleanly at 85 with flush=never")
	excused(true)
	if reason, _ := h.offlineByDesign(tp); reason != "every replica that held its committed records lost them "+
		"(b1 never vouched for its log, b2 stopped uncleanly at 85 with flush=never)" {
		t.Fatalf("reason %q", reason)
	}

	// Elected out of an empty ISR, a replica that lost its data does not
	// hold the committed records again: only catching up does that.
	h = newHolders()
	h.apply(10, metadata.CreateTopic{Name: "events", Config: metadata.TopicConfig{MinInsyncReplicas: 2},
		Partitions: []metadata.PartitionState{{TopicPartition: tp, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}}}})
	change(20, 1, 0, 1, 1)
	h.lose(1, 30, "")
	h.lose(2, 30, "")
	change(40, 2, 1, 2, 2) // from ISR [1] to [2] in one record: b2 elected from the ELR
	change(50, metadata.NoBroker, 2, 3)
	excused(true)
}

// With BatchedPasses a broker takes the Kafka requests due in a tick in
// one pass, as tide serve's loop takes what queued up before it flushes:
// the run is still a pure function of its seed, requests do share passes,
// and the schedule is another than with a flush after each request.
func TestBatchedPassesShareAPass(t *testing.T) {
	batched := Options{Seed: 42, BatchedPasses: true}
	first, second := Run(batched), Run(batched)
	if first.Hash != second.Hash {
		t.Fatalf("seed 42 with batched passes ran differently twice: %x and %x", first.Hash, second.Hash)
	}
	if first.Violation != nil {
		t.Fatalf("seed 42 with batched passes: %s", first.Violation)
	}
	if first.Stats.requestsSharingAPass == 0 {
		t.Fatalf("no Kafka request shared a pass with another")
	}
	if unbatched := Run(Options{Seed: 42}); unbatched.Hash == first.Hash || unbatched.Stats.requestsSharingAPass != 0 {
		t.Fatalf("batched passes changed nothing: %x, %d requests sharing a pass without them", unbatched.Hash, unbatched.Stats.requestsSharingAPass)
	}
	t.Logf("%d Kafka requests shared a pass with an earlier one", first.Stats.requestsSharingAPass)
}
