package sim

import (
	"bytes"
	"fmt"
	"github.com/tidelog/tide/internal/wire"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// Compaction in the simulator: a third of the seeds make the workload topic
// compacted (cleanup.policy=compact). Its producers write keyed records
// from a few keys, some of them tombstones, into small segments, and every
// broker runs its log cleaner (from broker.Node.Tick, as tide serve does) on
// the virtual clock; a topic compacted through its cleanup.policy config
// is cleaned, and checked, the same way.
// The checker then holds those partitions to invariant 8 of DESIGN.md
// section 3 record by record instead of batch by batch (the cleaner
// rewrites batches, and each replica cleans on its own):
// InvariantCompactionLostValue.

// InvariantCompactionLostValue: a committed record of a compacted
// partition is gone from a replica (or holds other bytes there) though no
// later committed record of its key supersedes it, and it is not a
// tombstone past delete.retention.ms.
const InvariantCompactionLostValue = "compaction-lost-a-value"

// compactionStream seeds the draw of compactionShape (with the seed).
const compactionStream = 0x636f6d70616374

// compactionShape is the cleaner side of a seed's shape.
type compactionShape struct {
	on           bool
	keys         int
	segmentBytes int64
	cleaner      commitlog.CleanerConfig
	// intervalTicks is how often a broker runs a pass.
	intervalTicks int64
}

// drawCompaction draws whether the seed's topic is compacted, and how.
func (s *shape) drawCompaction(random *rand.Rand) {
	if random.IntN(3) != 0 {
		return
	}
	c := &s.compaction
	c.on = true
	c.keys = 2 + random.IntN(7)
	c.segmentBytes = int64(commitlog.SegmentBytesMin + random.IntN(3*commitlog.SegmentBytesMin))
	c.cleaner = commitlog.DefaultCleanerConfig()
	c.cleaner.MinCleanableDirtyRatio = float64(random.IntN(6)) / 10
	// Tombstones stay 3 to 10 virtual seconds: longer than the checker's
	// period, so that it sees every committed one before it goes.
	c.cleaner.DeleteRetentionMs = int64(3000 + random.IntN(7000))
	if random.IntN(3) == 0 {
		c.cleaner.MinCompactionLagMs = int64(random.IntN(2000))
	}
	c.intervalTicks = int64(5 + random.IntN(40))
	s.maxBatchBytes = min(s.maxBatchBytes, int(c.segmentBytes))
}

// segmentBytes is the partition logs' segment size: small, so that
// segments roll, retention has whole segments to delete and the cleaner
// segments to clean.
func (w *world) segmentBytes() int64 {
	switch {
	case w.shape.compaction.on:
		return w.shape.compaction.segmentBytes
	case w.shape.segmentBytes > 0:
		return w.shape.segmentBytes
	}
	return 64 << 10
}

// cleanerConfigs are the topics the brokers compact.
func (w *world) cleanerConfigs() map[string]commitlog.CleanerConfig {
	if !w.shape.compaction.on {
		return nil
	}
	return map[string]commitlog.CleanerConfig{workloadTopic: w.shape.compaction.cleaner}
}

// observeCleaner returns what a broker's node calls with every cleaning
// pass that cleaned a log (its Tick runs the cleaner on the virtual clock).
func (w *world) observeCleaner(b *brokerProcess) func(broker.CleanReport) {
	return func(report broker.CleanReport) {
		result := report.Result
		w.stats.cleanerPasses++
		w.trace("b%d %s: cleaned [%d, %d): %d segments, %d records and %d tombstones removed",
			b.id, report.Partition, result.FirstDirty, result.End, result.SegmentsRewritten, result.RecordsRemoved, result.TombstonesRemoved)
	}
}

// compactedRecords are the records of a produced batch for a compacted
// topic: keyed, from a few keys, one in eight a tombstone.
func (load *workload) compactedRecords(count int) []record.Record {
	w := load.w
	records := make([]record.Record, count)
	for i := range records {
		load.nextValue++
		records[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", load.keys.IntN(w.shape.compaction.keys))), Value: []byte(fmt.Sprintf("v%d", load.nextValue))}
		if load.keys.IntN(8) == 0 {
			records[i].Value = nil
		}
	}
	return records
}

// knownRecord is a record of a compacted partition the checker knows to be
// committed: acknowledged with acks=all, read by a consumer, or seen on the
// leader below its high watermark.
type knownRecord struct {
	key, value  []byte
	timestampMs int64
	// epoch is the leader epoch of its batch, or record.NoLeaderEpoch while
	// the checker knows it only from the producer's acknowledgement.
	epoch record.LeaderEpoch
}

func (r knownRecord) tombstone() bool { return r.value == nil }

func (r knownRecord) same(other record.StoredRecord) bool {
	return bytes.Equal(r.key, other.Key) && bytes.Equal(r.value, other.Value) && (r.value == nil) == (other.Value == nil)
}

// compactionChecker is the checker's part for compacted partitions.
type compactionChecker struct {
	known map[metadata.TopicPartition]map[record.Offset]knownRecord
	// latest is the offset of the latest known committed record of each
	// key.
	latest map[metadata.TopicPartition]map[string]record.Offset
}

func (c *checker) compacted(tp metadata.TopicPartition) bool {
	if c.w.shape.compaction.on && (tp.Topic == workloadTopic || tp.Topic == wire.OffsetsTopic) {
		return true
	}
	img := c.w.metadataImage()
	policy, ok := img.TopicConfigValue(tp.Topic, "cleanup.policy")
	if !ok {
		policy, ok = img.BrokerDefault("log.cleanup.policy")
	}
	return ok && slices.Contains(logconfig.ListItems(policy), "compact")
}

// learn records committed records (batches at their offsets).
func (c *checker) learn(tp metadata.TopicPartition, batches []byte) {
	k := &c.compaction
	if k.known == nil {
		k.known, k.latest = map[metadata.TopicPartition]map[record.Offset]knownRecord{}, map[metadata.TopicPartition]map[string]record.Offset{}
	}
	if k.known[tp] == nil {
		k.known[tp], k.latest[tp] = map[record.Offset]knownRecord{}, map[string]record.Offset{}
	}
	forEachRecord(batches, func(offset record.Offset, epoch record.LeaderEpoch, r record.StoredRecord) {
		known, ok := k.known[tp][offset]
		if !ok {
			known = knownRecord{key: bytes.Clone(r.Key), value: bytes.Clone(r.Value), timestampMs: r.TimestampMs, epoch: epoch}
		}
		if known.epoch < 0 {
			known.epoch = epoch
		}
		k.known[tp][offset] = known
		if latest, ok := k.latest[tp][string(r.Key)]; !ok || offset > latest {
			k.latest[tp][string(r.Key)] = offset
		}
	})
}

// forEachRecord calls f with every record of batches, its offset and its
// batch's leader epoch.
func forEachRecord(batches []byte, f func(record.Offset, record.LeaderEpoch, record.StoredRecord)) {
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		header, records, err := record.DecodeRecords(it.Batch(), 1<<30, 1<<30)
		if err != nil {
			panic(fmt.Sprintf("sim: a stored batch does not decode: %v", err))
		}
		for _, r := range records {
			f(header.BaseOffset+record.Offset(r.OffsetDelta), header.PartitionLeaderEpoch, r)
		}
	}
}

// checkCompacted checks a compacted partition's replicas (the leader's
// during the run, every one's at the end): every known committed record is
// where it was, or superseded by a later known committed record of its key,
// or a tombstone past delete.retention.ms; and two replicas hold the same
// record wherever both hold one below both high watermarks.
func (c *checker) checkCompacted(tp metadata.TopicPartition, logs []liveLog, final bool) {
	// Every replica's log below its own high watermark is committed (a
	// follower's high watermark is never above its leader's), not only the
	// leader's: a follower may clean with a later record of a key that it
	// knows committed before the checker ever saw that record on a leader
	// (seed 41482: b3 cleaned at its high watermark 86, then restarted
	// with a checkpointed high watermark of 75 and led).
	for _, log := range logs {
		c.learn(tp, log.committed)
	}
	nowMs, retentionMs := c.w.now*10, c.w.shape.compaction.cleaner.DeleteRetentionMs
	for _, log := range logs {
		if !log.leader && !final {
			continue
		}
		held := map[record.Offset]record.StoredRecord{}
		forEachRecord(log.data, func(offset record.Offset, _ record.LeaderEpoch, r record.StoredRecord) { held[offset] = r })
		epochs := batchEpochs(log.data)
		for _, offset := range sortedOffsets(c.compaction.known[tp]) {
			known := c.compaction.known[tp][offset]
			if offset < log.start {
				continue
			}
			// The batch over a committed offset keeps its leader epoch
			// whatever the cleaner removed from it: another epoch there,
			// or no batch, is another history, not compaction.
			if epoch, covered := epochs[offset]; !covered || (known.epoch >= 0 && epoch != known.epoch) {
				c.failAt(InvariantCompactionLostValue, offset, offset, "%s: the committed record %s=%q at offset %d (epoch %d) is gone: b%d (%s) holds %s there",
					tp, known.key, known.value, offset, known.epoch, log.broker, roleName(log.leader), describeEpoch(epoch, covered))
				return
			}
			r, ok := held[offset]
			superseded := c.compaction.latest[tp][string(known.key)] > offset
			expired := known.tombstone() && nowMs >= known.timestampMs+retentionMs
			if (ok && !known.same(r)) || (!ok && !superseded && !expired) {
				c.failAt(InvariantCompactionLostValue, offset, offset, "%s: the committed record %s=%q at offset %d is not superseded, but b%d (%s) %s",
					tp, known.key, known.value, offset, log.broker, roleName(log.leader), describeMissing(ok))
				return
			}
		}
	}
	c.checkCompactedAgreement(tp, logs)
}

// checkCompactedAgreement: below both high watermarks, two replicas hold
// the same record wherever both hold one.
func (c *checker) checkCompactedAgreement(tp metadata.TopicPartition, logs []liveLog) {
	for i := range logs {
		for j := i + 1; j < len(logs); j++ {
			a, b := logs[i], logs[j]
			below := min(a.highWatermark, b.highWatermark)
			held := map[record.Offset]record.StoredRecord{}
			forEachRecord(a.data, func(offset record.Offset, _ record.LeaderEpoch, r record.StoredRecord) { held[offset] = r })
			forEachRecord(b.data, func(offset record.Offset, _ record.LeaderEpoch, r record.StoredRecord) {
				other, ok := held[offset]
				if ok && offset < below && !(knownRecord{key: other.Key, value: other.Value}).same(r) {
					c.failAt(InvariantPrefixesDisagree, offset, offset, "%s: b%d and b%d hold different records at offset %d, below both high watermarks (%d, %d)",
						tp, a.broker, b.broker, offset, a.highWatermark, b.highWatermark)
				}
			})
		}
	}
}

func sortedOffsets(records map[record.Offset]knownRecord) []record.Offset {
	list := make([]record.Offset, 0, len(records))
	for offset := range records {
		list = append(list, offset)
	}
	sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
	return list
}

// batchEpochs maps every offset the batches cover to its batch's epoch.
func batchEpochs(batches []byte) map[record.Offset]record.LeaderEpoch {
	epochs := map[record.Offset]record.LeaderEpoch{}
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		header := it.Header()
		for offset := header.BaseOffset; offset < header.NextOffset(); offset++ {
			epochs[offset] = header.PartitionLeaderEpoch
		}
	}
	return epochs
}

func describeEpoch(epoch record.LeaderEpoch, covered bool) string {
	if !covered {
		return "no batch"
	}
	return fmt.Sprintf("a batch of epoch %d", epoch)
}

// learnAckedEpoch gives the records of an acknowledged batch of a compacted
// partition the leader epoch the acknowledging leader stored it with, if
// its log still holds the batch as produced (it would not once cleaned).
func (c *checker) learnAckedEpoch(tp metadata.TopicPartition, base record.Offset, batch []byte, by metadata.BrokerID) {
	if !c.compacted(tp) || by == metadata.NoBroker {
		return
	}
	b := c.w.broker(by)
	if !b.up || b.node == nil {
		return
	}
	_, log, ok := b.node.Replica(tp)
	if !ok || base < log.LogStartOffset() || base >= log.LogEndOffset() {
		return
	}
	result, err := log.Read(base, 1, log.LogEndOffset())
	if err != nil || result.Empty() {
		return
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		return
	}
	stored, err := record.ParseHeader(data)
	produced, _ := record.ParseHeader(batch)
	if err != nil || stored.BaseOffset != base || stored.CRC != produced.CRC {
		return
	}
	for offset := base; offset < stored.NextOffset(); offset++ {
		if known, ok := c.compaction.known[tp][offset]; ok && known.epoch < 0 {
			known.epoch = stored.PartitionLeaderEpoch
			c.compaction.known[tp][offset] = known
		}
	}
}
