package sim

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// The invariants of DESIGN.md section 3.
const (
	InvariantAckedWriteLost     = "acknowledged-write-lost"
	InvariantHighWatermarkBack  = "high-watermark-went-back"
	InvariantPrefixesDisagree   = "committed-prefixes-disagree"
	InvariantTwoLeadersOneEpoch = "two-leaders-in-one-epoch"
	InvariantReadTakenBack      = "read-taken-back"
	InvariantNoRecovery         = "does-not-recover"
	InvariantReplicaViolation   = "replica-invariant"
	InvariantAckedDuplicated    = "acknowledged-write-duplicated"
	InvariantProducerIDReused   = "producer-id-reused"
	// InvariantDeletedUncommitted is invariant 8's retention half: a log
	// start offset (retention, DeleteRecords, a follower following its
	// leader) above the replica's high watermark.
	InvariantDeletedUncommitted = "deleted-uncommitted-records"
	// InvariantTwoControllers: two controllers decided in one raft term
	// (Raft's election safety, as the controller depends on it).
	InvariantTwoControllers = "two-active-controllers-in-one-term"
)

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Tick      int64
	Detail    string
	// First and Last are the offsets concerned, where the invariant has
	// them (else -1): the first and last offset of a lost write or a read
	// taken back; the offset where replicas disagree (both); for a high
	// watermark that went back, the highest a client saw (First) and the
	// one it was served after it (Last). Scenarios word their verdicts with
	// them.
	First, Last record.Offset
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at tick %d: %s", v.Invariant, v.Tick, v.Detail)
}

// batchID identifies a batch by where it is and what it holds: its base
// offset, its CRC-32C (which covers every record byte) and its length.
type batchID struct {
	base   record.Offset
	next   record.Offset
	crc    uint32
	length int32
}

func identify(header record.Header) batchID {
	return batchID{base: header.BaseOffset, next: header.NextOffset(), crc: header.CRC, length: header.BatchLength}
}

// checker watches a run and records the first broken invariant.
type checker struct {
	w *world
	// acked are the batches acknowledged with acks=all; read are the batches
	// consumers read below the high watermark. Neither may ever disappear.
	acked map[metadata.TopicPartition][]batchID
	read  map[metadata.TopicPartition]map[record.Offset]batchID
	// built counts, per content, the distinct batches the producers built
	// for each partition (not their retries): two plain producers can build
	// byte-identical batches (the same tombstone of one key in one tick),
	// and the log then rightly holds that content twice.
	built map[metadata.TopicPartition]map[content]int
	// highestHighWatermark is the largest high watermark each client saw
	// of each partition. A client's requests for a partition are sequential,
	// so its observations come in the order they were served.
	highestHighWatermark map[clientPartition]record.Offset
	leaders              map[leaderKey]metadata.BrokerID
	// activeControllers is the controller seen active in each raft term.
	activeControllers map[uint64]metadata.BrokerID
	// lastAck is when each partition last had a write acknowledged with
	// acks=all, for the liveness check.
	lastAck map[metadata.TopicPartition]int64
	// producerIDs are the producer ids brokers handed out, with the
	// producer that got each: two producers sharing one would have their
	// batches taken for each other's retries.
	producerIDs map[int64]int
	// compaction holds what is known of compacted partitions.
	compaction compactionChecker
	violation  *Violation
}

type clientPartition struct {
	client    address
	partition metadata.TopicPartition
}

// leaderKey names a leadership: a topic deleted and created again under
// its name starts its epochs again, so the topic's id (as the leading
// broker's image has it) tells the two incarnations apart.
type leaderKey struct {
	topicID   metadata.TopicID
	partition metadata.TopicPartition
	epoch     record.LeaderEpoch
}

func newChecker(w *world) *checker {
	return &checker{
		w: w, acked: map[metadata.TopicPartition][]batchID{}, built: map[metadata.TopicPartition]map[content]int{}, read: map[metadata.TopicPartition]map[record.Offset]batchID{},
		highestHighWatermark: map[clientPartition]record.Offset{}, leaders: map[leaderKey]metadata.BrokerID{},
		activeControllers: map[uint64]metadata.BrokerID{},
		lastAck:           map[metadata.TopicPartition]int64{}, producerIDs: map[int64]int{},
	}
}

func (c *checker) fail(invariant, format string, args ...any) {
	c.failAt(invariant, -1, -1, format, args...)
}

// failAt records a violation concerning offsets first..last.
func (c *checker) failAt(invariant string, first, last record.Offset, format string, args ...any) {
	if c.violation != nil {
		return
	}
	c.violation = &Violation{Invariant: invariant, Tick: c.w.now, Detail: fmt.Sprintf(format, args...), First: first, Last: last}
	c.w.trace("VIOLATION %s", c.violation)
}

// observe returns the function a node calls with every Ready: replica
// invariant violations recorded under a switched-off rule end the run.
func (c *checker) observe(b *brokerProcess) func(metadata.TopicPartition, replica.Ready) {
	return func(tp metadata.TopicPartition, ready replica.Ready) {
		for _, op := range ready.Log {
			if op.Kind == replica.Truncate || op.Kind == replica.TruncateFully {
				c.w.stats.truncations++
				c.w.trace("b%d %s: %s", b.id, tp, op)
			}
			if op.Kind == replica.AssignEpoch {
				c.w.trace("b%d %s: leads, %s", b.id, tp, op)
			}
		}
		if ready.RebuildProducerState {
			c.w.stats.producerRebuilds++
			c.w.trace("b%d %s: rebuilds its producer state from the log", b.id, tp)
		}
		if c.w.options.Detail && ready.HighWatermark != nil {
			c.w.trace("b%d %s: high watermark %d", b.id, tp, *ready.HighWatermark)
		}
		if c.w.options.Detail {
			for _, m := range ready.Messages {
				if m.Fetch != nil {
					c.w.trace("b%d %s: fetch at %d epoch %d", b.id, tp, m.Fetch.FetchOffset, m.Fetch.CurrentLeaderEpoch)
				}
			}
			for _, op := range ready.Log {
				if op.Kind == replica.Append {
					c.w.trace("b%d %s: append %d bytes at %d", b.id, tp, len(op.Batches), record.BaseOffset(op.Batches))
				}
			}
			for _, p := range ready.Proposals {
				c.w.trace("b%d %s: propose %s", b.id, tp, p)
			}
		}
		for _, violation := range ready.Violations {
			c.fail(InvariantReplicaViolation, "%s", violation)
		}
	}
}

func (c *checker) observeAck(tp metadata.TopicPartition, base record.Offset, batch []byte) {
	header, err := record.ParseHeader(batch)
	if err != nil {
		panic(err)
	}
	header.BaseOffset = base
	c.acked[tp] = append(c.acked[tp], identify(header))
	c.lastAck[tp] = c.w.now
	if c.compacted(tp) {
		stamped := bytes.Clone(batch)
		record.SetBaseOffset(stamped, base)
		c.learn(tp, stamped)
	}
}

// forget drops what the checker knows of a partition whose topic was
// deleted: the topic created again under its name starts another log.
func (c *checker) forget(tp metadata.TopicPartition) {
	delete(c.acked, tp)
	delete(c.read, tp)
	delete(c.built, tp)
	delete(c.lastAck, tp)
	for seen := range c.highestHighWatermark {
		if seen.partition == tp {
			delete(c.highestHighWatermark, seen)
		}
	}
}

// observeBuilt counts a batch a producer built, once however often it is
// sent (see checker.built).
func (c *checker) observeBuilt(tp metadata.TopicPartition, batch []byte) {
	header, err := record.ParseHeader(batch)
	if err != nil {
		panic(err)
	}
	if c.built[tp] == nil {
		c.built[tp] = map[content]int{}
	}
	c.built[tp][content{header.CRC, header.BatchLength}]++
}

// observeProducerID checks that no producer id is ever handed out twice.
func (c *checker) observeProducerID(client int, producerID int64) {
	if other, seen := c.producerIDs[producerID]; seen {
		c.fail(InvariantProducerIDReused, "producer id %d handed to producer %d, and before to producer %d", producerID, client, other)
	}
	c.producerIDs[producerID] = client
}

// observeHighWatermark checks that no client ever sees a partition's high
// watermark go back (invariant 2).
func (c *checker) observeHighWatermark(client address, tp metadata.TopicPartition, highWatermark record.Offset, source string) {
	key := clientPartition{client, tp}
	if highest, seen := c.highestHighWatermark[key]; seen && highWatermark < highest {
		c.failAt(InvariantHighWatermarkBack, highest, highWatermark, "%s: %s answered %s high watermark %d after it saw %d", tp, source, client, highWatermark, highest)
	}
	c.highestHighWatermark[key] = max(c.highestHighWatermark[key], highWatermark)
}

// observeRead records the batches a consumer read, and returns the offset
// after them.
func (c *checker) observeRead(tp metadata.TopicPartition, batches []byte, highWatermark, position record.Offset) record.Offset {
	if c.read[tp] == nil {
		c.read[tp] = map[record.Offset]batchID{}
	}
	next := position
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		header := it.Header()
		if header.NextOffset() > highWatermark {
			c.failAt(InvariantReadTakenBack, header.BaseOffset, header.NextOffset()-1, "%s: a consumer read offsets up to %d above the high watermark %d", tp, header.NextOffset(), highWatermark)
		}
		c.read[tp][header.BaseOffset] = identify(header)
		next = header.NextOffset()
	}
	if err := it.Err(); err != nil {
		c.fail(InvariantReadTakenBack, "%s: a consumer got damaged batches: %v", tp, err)
		return next
	}
	if c.compacted(tp) {
		c.learn(tp, batches)
	}
	return next
}

// step runs the cheap checks every tick and the log checks periodically.
func (c *checker) step() {
	c.checkOneLeaderPerEpoch()
	c.checkOneControllerPerTerm()
	if c.w.now%checkEveryTicks == 0 {
		c.checkLogs(false)
	}
}

// checkOneControllerPerTerm checks that at most one controller is active
// in any raft term: two would decide against different images.
func (c *checker) checkOneControllerPerTerm() {
	for _, node := range c.w.controllers {
		if !node.running() || !node.q.Active() {
			continue
		}
		term := node.q.Term()
		if other, ok := c.activeControllers[term]; ok && other != node.id {
			c.fail(InvariantTwoControllers, "c%d and c%d both active in term %d", other, node.id, term)
		}
		c.activeControllers[term] = node.id
	}
}

// checkOneLeaderPerEpoch is invariant 4: at most one replica leads a given
// leader epoch of a partition.
func (c *checker) checkOneLeaderPerEpoch() {
	for _, b := range c.w.brokers {
		if !b.up || b.node == nil {
			continue
		}
		for _, tp := range b.node.Partitions() {
			r, _, _ := b.node.Replica(tp)
			if r.Role() != replica.Leader {
				continue
			}
			id, _ := b.node.Image().TopicID(tp.Topic)
			key := leaderKey{id, tp, r.State().LeaderEpoch}
			if other, ok := c.leaders[key]; ok && other != b.id {
				c.fail(InvariantTwoLeadersOneEpoch, "%s: b%d and b%d both lead epoch %d", tp, other, b.id, key.epoch)
			}
			c.leaders[key] = b.id
		}
	}
}

// liveLog is one running replica's committed batches.
type liveLog struct {
	broker        metadata.BrokerID
	epochs        string
	highWatermark record.Offset
	// logStart is the log start offset: batches wholly below it were
	// deleted (retention, DeleteRecords), which invariants 1 and 5 allow
	// of committed records (invariant 8).
	logStart record.Offset
	batches  map[record.Offset]batchID
	offsets  []record.Offset
	leader   bool
	// start is the log start offset; data the whole log's batches, and
	// committed those below the high watermark (for compacted partitions).
	start           record.Offset
	data, committed []byte
}

// checkLogs checks invariants 1, 3 and 5 against the logs of the running
// replicas: every acknowledged and every read batch is on the current
// leader; and replicas agree below their high watermarks. With final set,
// every acknowledged batch must be on every replica.
func (c *checker) checkLogs(final bool) {
	for _, state := range c.w.metadataImage().Partitions() {
		if final && c.w.allowedOffline(state) {
			continue
		}
		logs := c.liveLogs(state)
		c.checkNoDuplicates(state.TopicPartition, logs)
		if c.compacted(state.TopicPartition) {
			// The cleaner rewrites batches, each replica on its own:
			// records, not batches, must stay (compaction.go).
			c.checkCompacted(state.TopicPartition, logs, final)
			continue
		}
		c.checkAgreement(state.TopicPartition, logs)
		for _, log := range logs {
			if log.logStart > log.highWatermark {
				c.failAt(InvariantDeletedUncommitted, log.highWatermark, log.logStart-1, "%s: b%d's log starts at %d, above its high watermark %d",
					state.TopicPartition, log.broker, log.logStart, log.highWatermark)
			}
			if !log.leader && !final {
				continue
			}
			for _, acked := range c.acked[state.TopicPartition] {
				if acked.next <= log.logStart {
					continue // deleted once committed, as retention may
				}
				if got, ok := log.batches[acked.base]; !ok || got != acked {
					c.failAt(InvariantAckedWriteLost, acked.base, acked.next-1, "%s: offsets %d..%d were acknowledged with acks=all, but b%d (%s) %s",
						state.TopicPartition, acked.base, acked.next-1, log.broker, roleName(log.leader), describeMissing(ok))
				}
			}
			for _, read := range sortedReads(c.read[state.TopicPartition]) {
				if read.next <= log.logStart {
					continue
				}
				if got, ok := log.batches[read.base]; !ok || got != read {
					c.failAt(InvariantReadTakenBack, read.base, read.next-1, "%s: offsets %d..%d were read by a consumer, but b%d (%s) %s",
						state.TopicPartition, read.base, read.next-1, log.broker, roleName(log.leader), describeMissing(ok))
				}
			}
		}
	}
}

func roleName(leader bool) string {
	if leader {
		return "the leader"
	}
	return "a follower"
}

func describeMissing(present bool) string {
	if present {
		return "holds other records there"
	}
	return "does not have them"
}

func sortedReads(reads map[record.Offset]batchID) []batchID {
	list := make([]batchID, 0, len(reads))
	for _, read := range reads {
		list = append(list, read)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].base < list[j].base })
	return list
}

// liveLogs reads the logs of a partition's running replicas. Only the
// leader of the controller's current epoch counts as leader.
func (c *checker) liveLogs(state metadata.PartitionState) []liveLog {
	var logs []liveLog
	for _, id := range state.Replicas {
		b := c.w.broker(id)
		if !b.up || b.paused || b.node == nil {
			continue
		}
		r, log, ok := b.node.Replica(state.TopicPartition)
		if !ok {
			continue
		}
		live := liveLog{broker: id, highWatermark: r.HighWatermark(), logStart: log.LogStartOffset(), batches: map[record.Offset]batchID{}, epochs: fmt.Sprint(log.Epochs())}
		live.leader = r.Role() == replica.Leader && r.State().LeaderEpoch == state.LeaderEpoch && id == state.Leader
		result, err := log.Read(log.LogStartOffset(), 1<<40, log.LogEndOffset())
		if err != nil {
			panic(fmt.Sprintf("b%d %s: read: %v", id, state.TopicPartition, err))
		}
		data, err := result.AppendTo(nil)
		if err != nil {
			panic(err)
		}
		live.start, live.data = log.LogStartOffset(), data
		it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 30})
		for it.Next() {
			header := it.Header()
			live.batches[header.BaseOffset] = identify(header)
			live.offsets = append(live.offsets, header.BaseOffset)
			if header.NextOffset() <= live.highWatermark {
				live.committed = data[:it.Position()+header.Size()]
			}
		}
		logs = append(logs, live)
	}
	return logs
}

// content identifies a batch by what it holds, wherever it is: the CRC-32C
// covers every record byte and the producer's id and sequence, so a batch
// resent by a retry has the same content as the original.
type content struct {
	crc    uint32
	length int32
}

// checkNoDuplicates is the idempotence invariant (Jepsen's duplicate = 0,
// KIP-98): no acknowledged batch appears in any replica's committed log more
// often than the producers built it. A producer that retried a request whose
// answer was lost would otherwise have its records written twice. Content
// alone does not tell two batches apart: plain producers (no producer id or
// sequence in the CRC) that build the same records in the same tick build
// the same bytes, so the log may hold a content as often as it was built
// (checker.built; a batch the checker did not see built counts as built once).
func (c *checker) checkNoDuplicates(tp metadata.TopicPartition, logs []liveLog) {
	acked := map[content]bool{}
	for _, batch := range c.acked[tp] {
		acked[content{batch.crc, batch.length}] = true
	}
	for _, log := range logs {
		seen := map[content][]record.Offset{}
		for _, offset := range log.offsets {
			batch := log.batches[offset]
			if batch.next > log.highWatermark {
				break
			}
			key := content{batch.crc, batch.length}
			seen[key] = append(seen[key], offset)
			if copies := seen[key]; acked[key] && len(copies) > max(1, c.built[tp][key]) {
				c.fail(InvariantAckedDuplicated, "%s: b%d holds the acknowledged batch at offset %d again at offset %d, below its high watermark %d (built %d times, held %d times)",
					tp, log.broker, copies[0], offset, log.highWatermark, max(1, c.built[tp][key]), len(copies))
				return
			}
		}
	}
}

// checkAgreement is invariant 3: two replicas hold the same batches below
// the smaller of their high watermarks.
func (c *checker) checkAgreement(tp metadata.TopicPartition, logs []liveLog) {
	for i := range logs {
		for j := i + 1; j < len(logs); j++ {
			a, b := logs[i], logs[j]
			below := min(a.highWatermark, b.highWatermark)
			from := record.Offset(0)
			if len(a.offsets) > 0 && len(b.offsets) > 0 {
				from = max(a.offsets[0], b.offsets[0])
			}
			left, right := committedPrefix(a, from, below), committedPrefix(b, from, below)
			for k := 0; k < min(len(left), len(right)); k++ {
				if left[k] != right[k] {
					at := min(left[k].base, right[k].base)
					c.failAt(InvariantPrefixesDisagree, at, at, "%s: b%d and b%d hold different batches at offset %d, below both high watermarks (%d, %d); epochs %s and %s",
						tp, a.broker, b.broker, min(left[k].base, right[k].base), a.highWatermark, b.highWatermark, a.epochs, b.epochs)
					return
				}
			}
		}
	}
}

// committedPrefix lists a log's batches in [from, below).
func committedPrefix(log liveLog, from, below record.Offset) []batchID {
	var prefix []batchID
	for _, offset := range log.offsets {
		batch := log.batches[offset]
		if batch.base < from {
			continue
		}
		if batch.next > below {
			break
		}
		prefix = append(prefix, batch)
	}
	return prefix
}
