package commitlog

import (
	"encoding/binary"
	"errors"

	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// headerChunkBytes is how many fuzz bytes describe one batch header in
// FuzzRecoveryHeaders: a mode byte, a base offset, lastOffsetDelta,
// recordCount and attributes.
const headerChunkBytes = 1 + 8 + 4 + 4 + 2

// fuzzedSegmentBatches turns data into CRC-valid batches with the header
// fields it says: each batch starts where the previous one ended when its
// mode byte is even (what a log holds), anywhere when odd; its epoch is its
// index over four, so epochs rise. Only the CRC is right: any field may be
// what no producer or leader writes.
func fuzzedSegmentBatches(data []byte) ([]byte, []record.Offset) {
	var batches []byte
	var bases []record.Offset
	next := record.Offset(0)
	for index := 0; len(data) >= headerChunkBytes && index < 64; index++ {
		chunk := data[:headerChunkBytes]
		data = data[headerChunkBytes:]
		header := record.Header{
			BaseOffset:      next,
			LastOffsetDelta: int32(binary.BigEndian.Uint32(chunk[9:])),
			RecordCount:     int32(binary.BigEndian.Uint32(chunk[13:])),
			Attributes:      int16(binary.BigEndian.Uint16(chunk[17:])),
			ProducerID:      -1, ProducerEpoch: -1, BaseSequence: -1,
			PartitionLeaderEpoch: record.LeaderEpoch(index / 4),
		}
		if chunk[0]%2 == 1 {
			header.BaseOffset = record.Offset(binary.BigEndian.Uint64(chunk[1:]))
		}
		batches = append(batches, record.EncodeBatch(header, chunk[:1+int(chunk[0]%16)])...)
		bases = append(bases, header.BaseOffset)
		next = header.NextOffset()
	}
	return batches, bases
}

// FuzzRecoveryHeaders writes segments of CRC-valid batches whose headers
// the fuzzer chooses (offset spans up to 2^31 per batch, gaps, offsets near
// the int64 limit, any codec and attribute bits) and opens the log, with or
// without a checkpoint vouching for them. The issue 11 crash came from such
// a segment: recovery indexed batches past its segment's reach and
// panicked. Recovery must never panic: it opens (and the log it opens reads
// back, takes an append and reopens) or refuses with a CorruptionError.
func FuzzRecoveryHeaders(f *testing.F) {
	chunk := func(mode byte, base uint64, lastOffsetDelta, recordCount uint32, attributes uint16) []byte {
		b := []byte{mode}
		b = binary.BigEndian.AppendUint64(b, base)
		b = binary.BigEndian.AppendUint32(b, lastOffsetDelta)
		b = binary.BigEndian.AppendUint32(b, recordCount)
		return binary.BigEndian.AppendUint16(b, attributes)
	}
	var issue11 []byte
	for range 3 {
		issue11 = append(issue11, chunk(0, 0, 1<<31-2, 1<<31-1, 4)...)
	}
	f.Add(issue11, int64(0), uint8(0))
	f.Add(issue11, int64(3<<31), uint8(1))
	f.Add(append(chunk(0, 0, 0, 1, 0), chunk(2, 0, 4, 5, 1)...), int64(1), uint8(1))
	f.Add(append(chunk(0, 0, 9, 10, 0), chunk(1, 1<<62, 0, 1, 0)...), int64(5), uint8(1))
	f.Add(chunk(1, 1<<63-2, 5, 6, 0), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, recoveryPoint int64, split uint8) {
		batches, bases := fuzzedSegmentBatches(data)
		if len(bases) == 0 {
			return
		}
		mem := disk.NewMem()
		writeFuzzedSegments(t, mem, batches, bases, int(split)%len(bases))
		if recoveryPoint > 0 {
			checkpoint := offsetsCheckpoint{HighWatermark: record.Offset(recoveryPoint), RecoveryPoint: record.Offset(recoveryPoint)}
			if err := disk.WriteFileAtomically(mem, "p", offsetsCheckpointName, checkpoint.marshal()); err != nil {
				t.Fatal(err)
			}
		}
		cfg := Config{FS: mem, Dir: "p", IndexIntervalBytes: IndexIntervalBytesMin}
		l, err := Open(cfg)
		if err != nil {
			var corruption *CorruptionError
			if !errors.As(err, &corruption) {
				t.Fatalf("open failed with %v, want a CorruptionError", err)
			}
			return
		}
		checkRecoveredLog(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reopened, err := Open(cfg)
		if err != nil {
			t.Fatalf("reopening a recovered log: %v", err)
		}
		reopened.Close()
	})
}

// writeFuzzedSegments writes batches as one segment, or two when split
// names a batch after the first, the second named by that batch's base
// offset (when it can name a file).
func writeFuzzedSegments(t *testing.T, mem *disk.MemFS, batches []byte, bases []record.Offset, split int) {
	t.Helper()
	position := 0
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for index := 0; it.Next(); index++ {
		if index == split && split > 0 && bases[index] > bases[0] {
			position = it.Position()
		}
	}
	if position == 0 {
		writeRawSegment(t, mem, bases[0], batches)
		return
	}
	writeRawSegment(t, mem, bases[0], batches[:position])
	writeRawSegment(t, mem, bases[split], batches[position:])
}

// checkRecoveredLog checks what recovery left: every segment within its
// index's reach, the whole log readable as valid batches, and an append at
// its end accepted.
func checkRecoveredLog(t *testing.T, l *Log) {
	t.Helper()
	l.mu.RLock()
	for _, s := range l.segments {
		if !s.canIndex(s.nextOffset) {
			l.mu.RUnlock()
			t.Fatalf("recovered segment %d holds [%d, %d), past what it can index", s.baseOffset, s.baseOffset, s.nextOffset)
		}
	}
	l.mu.RUnlock()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	result, err := l.Read(start, 1<<30, end)
	if err != nil {
		t.Fatalf("read [%d, %d) of the recovered log: %v", start, end, err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.ValidateAll(data, record.Limits{MaxBatchBytes: 1 << 30}); err != nil {
		t.Fatalf("the recovered log reads back damaged: %v", err)
	}
	if end > 1<<62 {
		return // no room left for an append's offsets
	}
	epoch := max(l.LatestEpoch(), 0)
	if _, err := l.Append(followerBatches(end, epoch, 1, 1, 5, 0)); err != nil {
		t.Fatalf("append at the recovered log end %d in epoch %d: %v", end, epoch, err)
	}
}
