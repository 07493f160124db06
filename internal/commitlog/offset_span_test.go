package commitlog

import (
	"bytes"
	"errors"
	"math"
	"path"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// hugeSpan is the offset span of the batches a hostile client sent in issue
// 11: lastOffsetDelta 2^31-2, so each batch covers 2^31-1 offsets, and three
// of them no longer fit one segment's 32-bit relative index.
const hugeSpan = math.MaxInt32

// spanBatches returns count contiguous, CRC-valid batches from base, each
// covering hugeSpan offsets, with the zstd attribute and a garbage payload,
// as a leader that failed to check them would have stamped them in epoch 0.
func spanBatches(base record.Offset, count int) []byte {
	var buf []byte
	for range count {
		header := record.Header{
			BaseOffset: base, Attributes: int16(record.CompressionZstd), LastOffsetDelta: hugeSpan - 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: hugeSpan,
		}
		buf = append(buf, record.EncodeBatch(header, bytes.Repeat([]byte{0xab}, 100))...)
		base += hugeSpan
	}
	return buf
}

// Before issue 11 the roll looked at the last batch only and an empty
// segment never rolled, so an append of batches with huge offset spans landed
// in one segment and indexing them panicked (the relative offset wrapped).
// Now every append's span is checked, and the log rolls before a batch its
// active segment cannot index.
func TestAppendRollsBeforeABatchTheSegmentCannotIndex(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{IndexIntervalBytes: IndexIntervalBytesMin})
	for i := range 3 {
		if _, err := l.Append(spanBatches(record.Offset(i)*hugeSpan, 1)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if got, want := l.LogEndOffset(), record.Offset(3*hugeSpan); got != want {
		t.Fatalf("log end offset %d, want %d", got, want)
	}
	if got := l.Segments(); got != 2 {
		t.Fatalf("%d segments, want 2: the third batch does not fit the first segment's index", got)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segments {
		if !s.canIndex(s.nextOffset) {
			t.Fatalf("segment %d holds [%d, %d), past what it can index", s.baseOffset, s.baseOffset, s.nextOffset)
		}
	}
}

// One append never spans two segments, so one that covers more offsets than
// a segment can index is refused whole, with a typed error, and the log is
// unchanged and usable.
func TestAppendSpanningMoreThanASegmentIsRefused(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	_, err := l.Append(spanBatches(0, 3))
	if !errors.Is(err, ErrOffsetSpanTooLarge) {
		t.Fatalf("append of 3 x %d offsets returned %v, want ErrOffsetSpanTooLarge", hugeSpan, err)
	}
	if errors.Is(err, ErrLogFailed) {
		t.Fatalf("a refused append failed the log: %v", err)
	}
	if got := l.LogEndOffset(); got != 0 || l.SizeBytes() != 0 {
		t.Fatalf("log end %d, %d bytes after a refused append", got, l.SizeBytes())
	}
	if _, err := l.Append(followerBatches(0, 0, 2, 3, 10, 0)); err != nil {
		t.Fatalf("append after the refusal: %v", err)
	}
}

// writeRawSegment writes batches as segment base of partition directory p,
// the way a node that crashed mid-append left them, without the log.
func writeRawSegment(t *testing.T, fs disk.FS, base record.Offset, batches []byte) {
	t.Helper()
	if err := fs.MkdirAll("p"); err != nil {
		t.Fatal(err)
	}
	file, err := fs.Create(path.Join("p", segmentFileName(base)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(batches); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
}

// The segment the issue 11 crash left behind (batches past its index's
// reach) made every restart panic in recovery. Above the recovery point it
// is an unsynced tail: cut at the first batch the segment cannot index.
func TestRecoveryCutsATailItCannotIndex(t *testing.T) {
	mem := disk.NewMem()
	writeRawSegment(t, mem, 0, spanBatches(0, 3))
	l := openTestLog(t, mem, Config{IndexIntervalBytes: IndexIntervalBytesMin})
	if got, want := l.LogEndOffset(), record.Offset(2*hugeSpan); got != want {
		t.Fatalf("log end offset %d after recovery, want %d (the two batches the segment can index)", got, want)
	}
	report := l.Recovery()
	if !errors.Is(report.TailError, record.ErrInvalid) || report.TruncatedBytes == 0 {
		t.Fatalf("recovery report %+v, want a cut tail with an invalid batch", report)
	}
	if _, err := l.Append(followerBatches(2*hugeSpan, 0, 1, 1, 10, 0)); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
}

// Below the recovery point the same bytes were synced and may be
// acknowledged records: Open refuses with a CorruptionError, never a panic.
func TestRecoveryRefusesSyncedBatchesItCannotIndex(t *testing.T) {
	mem := disk.NewMem()
	writeRawSegment(t, mem, 0, spanBatches(0, 3))
	checkpoint := offsetsCheckpoint{HighWatermark: 3 * hugeSpan, RecoveryPoint: 3 * hugeSpan}
	if err := disk.WriteFileAtomically(mem, "p", offsetsCheckpointName, checkpoint.marshal()); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Config{FS: mem, Dir: "p"})
	var corruption *CorruptionError
	if !errors.As(err, &corruption) || !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("open returned %v, want a CorruptionError for an invalid batch", err)
	}
	if corruption.Offset != 2*hugeSpan {
		t.Fatalf("corruption at offset %d, want %d", corruption.Offset, int64(2*hugeSpan))
	}
}

// A trusted segment (below the recovery point) is not re-read, but one whose
// successor's name says it spans more than an index can address is refused
// too.
func TestRecoveryRefusesATrustedSegmentItCannotIndex(t *testing.T) {
	mem := disk.NewMem()
	writeRawSegment(t, mem, 0, spanBatches(0, 3))
	writeRawSegment(t, mem, 3*hugeSpan, followerBatches(3*hugeSpan, 0, 1, 1, 10, 0))
	checkpoint := offsetsCheckpoint{HighWatermark: 3*hugeSpan + 1, RecoveryPoint: 3*hugeSpan + 1}
	if err := disk.WriteFileAtomically(mem, "p", offsetsCheckpointName, checkpoint.marshal()); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Config{FS: mem, Dir: "p"})
	var corruption *CorruptionError
	if !errors.As(err, &corruption) {
		t.Fatalf("open returned %v, want a CorruptionError", err)
	}
}
