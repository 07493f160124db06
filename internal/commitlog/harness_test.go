package commitlog

import (
	"fmt"
	"strings"

	"github.com/tidelog/tide/internal/record"
)

// testBatches builds count batches of recordsPerBatch records each, with
// valueBytes-byte values, as a producer would send them (offsets and epoch
// unset), all timestamped timestampMs.
func testBatches(count, recordsPerBatch, valueBytes int, timestampMs int64) []byte {
	var buf []byte
	for i := 0; i < count; i++ {
		records := make([]record.Record, recordsPerBatch)
		for j := range records {
			records[j] = record.Record{Value: []byte(strings.Repeat("v", valueBytes))}
		}
		buf = record.AppendBatch(buf, record.BuildOptions{BaseTimestampMs: timestampMs, Records: records, LeaderEpoch: record.NoLeaderEpoch})
	}
	return buf
}

// appendAsLeader stamps batches (from testBatches, as a producer sends
// them) with offsets from the log end offset and epoch, as the replication
// core does as leader (replica.HandleProduce), and appends them. It refuses
// a negative epoch or one below the log's latest, as the log would.
func appendAsLeader(l *Log, batches []byte, epoch record.LeaderEpoch) (AppendResult, error) {
	if epoch < 0 || epoch < l.LatestEpoch() {
		return AppendResult{}, fmt.Errorf("%w: leader append in epoch %d, log has %d", ErrEpochRegression, epoch, l.LatestEpoch())
	}
	next := l.LogEndOffset()
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		record.SetBaseOffset(it.Batch(), next)
		record.SetPartitionLeaderEpoch(it.Batch(), epoch)
		next += record.Offset(it.Header().LastOffsetDelta) + 1
	}
	return l.Append(batches)
}

// appendValidatedAsLeader is appendAsLeader through AppendValidated: the
// headers are read back after stamping, as the replica updates its own.
func appendValidatedAsLeader(l *Log, batches []byte, epoch record.LeaderEpoch) (AppendResult, error) {
	headers, err := stampAsLeader(l, batches, epoch)
	if err != nil {
		return AppendResult{}, err
	}
	return l.AppendValidated(batches, headers)
}

// appendStampedAsLeader stamps as appendValidatedAsLeader does and appends
// through Append: the two differ in the log's check alone.
func appendStampedAsLeader(l *Log, batches []byte, epoch record.LeaderEpoch) (AppendResult, error) {
	if _, err := stampAsLeader(l, batches, epoch); err != nil {
		return AppendResult{}, err
	}
	return l.Append(batches)
}

// stampAsLeader writes offsets from the log end and epoch into batches'
// headers, reading only the headers, and returns them.
func stampAsLeader(l *Log, batches []byte, epoch record.LeaderEpoch) ([]record.Header, error) {
	next := l.LogEndOffset()
	var headers []record.Header
	for position := 0; position < len(batches); {
		batch := batches[position:]
		record.SetBaseOffset(batch, next)
		record.SetPartitionLeaderEpoch(batch, epoch)
		header, err := record.ParseHeader(batch)
		if err != nil {
			return nil, err
		}
		headers = append(headers, header)
		next, position = header.NextOffset(), position+header.Size()
	}
	return headers, nil
}

// followerBatches builds batches as a leader would have stamped them: dense
// offsets from base, in epoch.
func followerBatches(base record.Offset, epoch record.LeaderEpoch, count, recordsPerBatch, valueBytes int, timestampMs int64) []byte {
	var buf []byte
	for i := 0; i < count; i++ {
		records := make([]record.Record, recordsPerBatch)
		for j := range records {
			records[j] = record.Record{Value: []byte(strings.Repeat("v", valueBytes))}
		}
		buf = record.AppendBatch(buf, record.BuildOptions{BaseOffset: base, LeaderEpoch: epoch, BaseTimestampMs: timestampMs, Records: records})
		base += record.Offset(recordsPerBatch)
	}
	return buf
}

// describeBatches lists the batches in buf as "[base, next) epoch=E".
func describeBatches(buf []byte) string {
	var b strings.Builder
	it := record.NewIterator(buf, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		h := it.Header()
		fmt.Fprintf(&b, "  [%d, %d) epoch=%d bytes=%d\n", h.BaseOffset, h.NextOffset(), h.PartitionLeaderEpoch, h.Size())
	}
	if err := it.Err(); err != nil {
		fmt.Fprintf(&b, "  error: %v\n", err)
	}
	return b.String()
}

// describeLog is the state table the datadriven tests print.
func describeLog(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var b strings.Builder
	fmt.Fprintf(&b, "log-start=%d hw=%d durable-end=%d log-end=%d recovery-point=%d\n",
		l.logStartOffset, l.highWatermark, l.durableEndOffset, l.logEndOffsetLocked(), l.recoveryPoint)
	fmt.Fprintf(&b, "epochs:")
	if l.epochs.Len() == 0 {
		fmt.Fprintf(&b, " none")
	}
	for _, e := range l.epochs.Entries() {
		fmt.Fprintf(&b, " %d@%d", e.Epoch, e.StartOffset)
	}
	fmt.Fprintln(&b)
	for _, s := range l.segments {
		fmt.Fprintf(&b, "segment %s [%d, %d) bytes=%d index-entries=%d\n",
			segmentFileName(s.baseOffset), s.baseOffset, s.nextOffset, s.size, s.index.length())
	}
	return b.String()
}
