package commitlog

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// The cleaner's part of TestCrashRecovery. Half the runs append keyed
// records (a few keys, some tombstones and keyless records, any codec) and
// clean now and then, some passes with a fault injected into one of the
// pass's file operations (a create, write, sync, rename or directory sync),
// after which the disk crashes at once. After every pass, and after every
// crash in one, the log must be a compaction of what it held before:
//
//   - its batches cover the same offsets, batch for batch (an emptied
//     batch keeps its offsets), in the same leader epochs, and only
//     batches below the pass's bound changed;
//   - every record in it is the record the old log had at that offset;
//   - every record it lost lies below the bound and is keyless, superseded
//     by a later record of its key below the bound, or a tombstone whose
//     batch's delete horizon has passed.
//
// The model then becomes what the log holds, so that later crashes check
// the cleaned segments' durability like any other data.

// cleanerKeys is the key space of a keyed run: small, so records supersede.
const cleanerKeys = 6

// keyedBatches builds count batches of keyed records at offsets from base
// in epoch (base 0 and no epoch for a leader to stamp).
func (r *crashRun) keyedBatches(base record.Offset, epoch record.LeaderEpoch, count int) []byte {
	codecs := []record.Compression{record.CompressionNone, record.CompressionNone, record.CompressionZstd,
		record.CompressionGzip, record.CompressionLZ4, record.CompressionSnappy}
	var buf []byte
	for range count {
		records := make([]record.StoredRecord, 1+r.random.IntN(4))
		for i := range records {
			key := []byte(fmt.Sprintf("k%d", r.random.IntN(cleanerKeys)))
			value := []byte(strings.Repeat("v", r.random.IntN(120)))
			switch r.random.IntN(20) {
			case 0:
				key = nil
			case 1, 2:
				value = nil
			}
			records[i] = record.StoredRecord{OffsetDelta: int32(i), TimestampMs: r.now.UnixMilli(), Key: key, Value: value}
		}
		header := record.Header{BaseOffset: base, PartitionLeaderEpoch: epoch, LastOffsetDelta: int32(len(records) - 1),
			Attributes: int16(codecs[r.random.IntN(len(codecs))]), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		batch, err := record.RewriteBatch(header, records, -1)
		r.must(err, "build keyed batch")
		buf = append(buf, batch...)
		base += record.Offset(len(records))
	}
	return buf
}

// leaderBatches and followerBatches are the batches a run appends.
func (r *crashRun) leaderBatches() []byte {
	if r.keyed {
		return r.keyedBatches(0, record.NoLeaderEpoch, 1+r.random.IntN(3))
	}
	return testBatches(1+r.random.IntN(3), 1+r.random.IntN(4), r.random.IntN(120), r.now.UnixMilli())
}

func (r *crashRun) followerBatches(base record.Offset, epoch record.LeaderEpoch) []byte {
	if r.keyed {
		return r.keyedBatches(base, epoch, 1+r.random.IntN(3))
	}
	return followerBatches(base, epoch, 1+r.random.IntN(3), 1+r.random.IntN(4), r.random.IntN(120), r.now.UnixMilli())
}

// clean runs a pass, and in half of them injects a fault and crashes.
func (r *crashRun) clean() {
	if !r.keyed {
		return
	}
	config := DefaultCleanerConfig()
	config.DeleteRetentionMs = int64(r.random.IntN(3000))
	config.MinCompactionLagMs = int64(r.random.IntN(2)) * int64(r.random.IntN(3000))
	config.MinCleanableDirtyRatio = float64(r.random.IntN(7)) / 10
	config.OffsetMapBytes = int64(CleanerOffsetMapBytesMin + r.random.IntN(2)*CleanerOffsetMapBytesDefault)
	if r.random.IntN(2) == 0 {
		// As a leader's would: the high watermark follows the durable end.
		hw := max(r.log.HighWatermark(), r.log.DurableEndOffset()-record.Offset(r.random.IntN(10)))
		r.must(r.log.SetHighWatermark(min(hw, r.log.LogEndOffset())), "set high watermark")
	}
	opts := CleanOptions{Config: config, UpTo: r.log.HighWatermark(), NowMs: r.now.UnixMilli()}
	before, durable := r.logBytes("before clean"), r.log.DurableEndOffset()
	if r.random.IntN(2) == 0 {
		r.cleanWithFault(opts, before, durable)
		return
	}
	result, err := r.log.Clean(opts)
	r.must(err, "clean")
	r.note("clean up to %d: %+v", opts.UpTo, result)
	if result.Cleaned && (result.End > opts.UpTo || result.End < result.FirstDirty) {
		r.fatalf("clean: cleaned [%d, %d) with the bound at %d", result.FirstDirty, result.End, opts.UpTo)
	}
	r.checkCompaction(before, r.logBytes("after clean"), min(result.End, opts.UpTo), opts.NowMs, "after clean")
}

// cleanWithFault fails one file operation of the pass, crashes the disk and
// reopens.
func (r *crashRun) cleanWithFault(opts CleanOptions, before []byte, durable record.Offset) {
	ops := []disk.Op{disk.OpCreate, disk.OpWrite, disk.OpSync, disk.OpRename, disk.OpSyncDir}
	op, n := ops[r.random.IntN(len(ops))], r.random.IntN(8)
	injected := r.faulty.Injected()
	r.faulty.FailAfter(op, n, nil)
	r.faulty.SetEnabled(true)
	result, err := r.log.Clean(opts)
	r.faulty.SetEnabled(false)
	r.faulty.FailAfter(op, 1<<30, nil)
	if r.faulty.Injected() == injected {
		r.must(err, "clean without the fault firing")
	}
	r.note("clean up to %d with %s failing after %d: %+v, %v", opts.UpTo, op, n, result, err)
	r.crashes++
	options := disk.DefaultCrashOptions(int64(r.random.Uint64() >> 1))
	options.Survival = disk.Survival(r.random.IntN(3))
	r.reopen(r.mem.CrashCloneWith(options))
	r.note("crash in clean %+v, durable end was %d; recovery %+v", options, durable, r.log.Recovery())
	end := r.log.LogEndOffset()
	if end < durable {
		r.fatalf("crash in clean: log ends at %d, but %d was synced", end, durable)
	}
	r.checkCompaction(cutBatches(before, end), r.logBytes("after crash in clean"), min(opts.UpTo, end), opts.NowMs, "after crash in clean")
}

// logBytes reads the whole log.
func (r *crashRun) logBytes(when string) []byte {
	l := r.log
	result, err := l.Read(l.LogStartOffset(), 1<<40, l.LogEndOffset())
	r.must(err, when+": read")
	data, err := result.AppendTo(nil)
	r.must(err, when+": read bytes")
	return data
}

// cutBatches keeps the batches of data that end at or below end.
func cutBatches(data []byte, end record.Offset) []byte {
	it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 30})
	kept := 0
	for it.Next() && it.Header().NextOffset() <= end {
		kept = it.Position() + it.Header().Size()
	}
	return data[:kept]
}

// storedBatch is a batch and its records, for checkCompaction.
type storedBatch struct {
	header  record.Header
	bytes   []byte
	records []record.StoredRecord
}

func (r *crashRun) decodeBatches(data []byte, when string) []storedBatch {
	var batches []storedBatch
	it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		header, records, err := record.DecodeRecords(it.Batch(), 1<<30, 1<<30)
		r.must(err, when+": decode")
		batches = append(batches, storedBatch{header: header, bytes: it.Batch(), records: records})
	}
	r.must(it.Err(), when+": batches")
	return batches
}

// checkCompaction checks that after is a compaction of before below bound
// (see the file comment), then makes after the model.
func (r *crashRun) checkCompaction(before, after []byte, bound record.Offset, nowMs int64, when string) {
	old, cleaned := r.decodeBatches(before, when+": before"), r.decodeBatches(after, when+": after")
	r.checkBatchRuns(old, cleaned, bound, when)
	type located struct {
		record record.StoredRecord
		batch  record.Header
	}
	oldRecords := map[record.Offset]located{}
	latest := map[string]record.Offset{}
	for _, batch := range old {
		for _, rec := range batch.records {
			offset := batch.header.BaseOffset + record.Offset(rec.OffsetDelta)
			oldRecords[offset] = located{rec, batch.header}
			if rec.Key != nil && offset < bound {
				latest[string(rec.Key)] = offset
			}
		}
	}
	for _, batch := range cleaned {
		for _, rec := range batch.records {
			offset := batch.header.BaseOffset + record.Offset(rec.OffsetDelta)
			was, ok := oldRecords[offset]
			if !ok || !sameRecord(was.record, rec) {
				r.fatalf("%s: record at %d is %+v, the log had %+v (%v)", when, offset, rec, was.record, ok)
			}
			delete(oldRecords, offset)
		}
	}
	for offset, gone := range oldRecords {
		rec := gone.record
		superseded := rec.Key == nil || latest[string(rec.Key)] > offset
		expired := rec.IsTombstone() && gone.batch.HasDeleteHorizon() && nowMs >= gone.batch.DeleteHorizonMs()
		if offset >= bound || !(superseded || expired) {
			r.fatalf("%s: record at %d (key %q) is gone; bound %d, latest of its key %d, tombstone %v", when, offset, rec.Key, bound, latest[string(rec.Key)], rec.IsTombstone())
		}
	}
	r.model = r.model[:0]
	for _, batch := range cleaned {
		r.model = append(r.model, modelBatch{base: batch.header.BaseOffset, next: batch.header.NextOffset(), epoch: batch.header.PartitionLeaderEpoch, bytes: bytes.Clone(batch.bytes)})
	}
}

// checkBatchRuns checks that each batch of cleaned covers the offsets of
// one batch of old, in its epoch, and is that batch byte for byte unless it
// lies below bound.
func (r *crashRun) checkBatchRuns(old, cleaned []storedBatch, bound record.Offset, when string) {
	if len(old) == 0 || len(cleaned) == 0 {
		if len(old) != len(cleaned) {
			r.fatalf("%s: %d batches before, %d after", when, len(old), len(cleaned))
		}
		return
	}
	j := 0
	for _, batch := range cleaned {
		h := batch.header
		if j >= len(old) || old[j].header.BaseOffset != h.BaseOffset {
			r.fatalf("%s: batch [%d, %d) does not start where an old batch did", when, h.BaseOffset, h.NextOffset())
		}
		first := j
		for j < len(old) && old[j].header.NextOffset() <= h.NextOffset() {
			if old[j].header.PartitionLeaderEpoch != h.PartitionLeaderEpoch {
				r.fatalf("%s: batch [%d, %d) in epoch %d covers a batch of epoch %d", when, h.BaseOffset, h.NextOffset(), h.PartitionLeaderEpoch, old[j].header.PartitionLeaderEpoch)
			}
			j++
		}
		if j != first+1 || old[first].header.NextOffset() != h.NextOffset() {
			r.fatalf("%s: batch [%d, %d) does not cover exactly one old batch", when, h.BaseOffset, h.NextOffset())
		}
		changed := !bytes.Equal(old[first].bytes, batch.bytes)
		if changed && h.NextOffset() > bound {
			r.fatalf("%s: batch [%d, %d) changed, above the bound %d", when, h.BaseOffset, h.NextOffset(), bound)
		}
	}
	if j != len(old) {
		r.fatalf("%s: the cleaned log ends at %d, the old one at %d", when, cleaned[len(cleaned)-1].header.NextOffset(), old[len(old)-1].header.NextOffset())
	}
}

func sameRecord(a, b record.StoredRecord) bool {
	return bytes.Equal(a.Key, b.Key) && (a.Key == nil) == (b.Key == nil) && bytes.Equal(a.Value, b.Value) &&
		(a.Value == nil) == (b.Value == nil) && a.TimestampMs == b.TimestampMs && a.OffsetDelta == b.OffsetDelta
}
