package commitlog

import (
	"math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// referenceBatch is one appended batch, as the naive reference reads.
type referenceBatch struct {
	base, next record.Offset
	bytes      int64
}

// referenceRead is Read done the simplest way, over the list of batches
// appended: from the batch holding from, whole batches ending at or below
// upTo, within maxBytes but the first.
func referenceRead(batches []referenceBatch, from record.Offset, maxBytes int64, upTo record.Offset) (first, next record.Offset, size int64) {
	first, next = from, from
	for _, batch := range batches {
		if batch.next <= from {
			continue
		}
		if batch.next > upTo || (size > 0 && size+batch.bytes > maxBytes) {
			break
		}
		if size == 0 {
			first = batch.base
		}
		next, size = batch.next, size+batch.bytes
	}
	return first, next, size
}

// Read walks batch headers through a window after small batches and one
// header at a time after large ones (headerReader); either way it returns
// what the naive reference does, over batches of mixed sizes that cross
// the window's and the segments' ends.
func TestReadAnswersAsReference(t *testing.T) {
	random := rand.New(rand.NewPCG(3, 4))
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 1024})
	var batches []referenceBatch
	for range 800 {
		records, valueBytes := 1+random.IntN(4), 10+random.IntN(300)
		if random.IntN(10) == 0 {
			records, valueBytes = 1, 4<<10+random.IntN(12<<10)
		}
		batch := testBatches(1, records, valueBytes, 1000)
		appended, err := appendValidatedAsLeader(l, batch, 0)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, referenceBatch{base: appended.BaseOffset, next: appended.NextOffset, bytes: int64(len(batch))})
	}
	end := l.LogEndOffset()
	for step := range 3000 {
		from := record.Offset(random.Int64N(int64(end)))
		maxBytes, upTo := int64(1+random.IntN(64<<10)), from+record.Offset(1+random.IntN(500))
		got, err := l.Read(from, maxBytes, upTo)
		if err != nil {
			t.Fatalf("read at %d: %v", from, err)
		}
		first, next, size := referenceRead(batches, from, maxBytes, min(upTo, end))
		if got.FirstOffset != first || got.NextOffset != next || got.SizeBytes != size {
			t.Fatalf("step %d, read at %d (max %d bytes, up to %d): [%d, %d) %d bytes, the reference [%d, %d) %d bytes",
				step, from, maxBytes, upTo, got.FirstOffset, got.NextOffset, got.SizeBytes, first, next, size)
		}
	}
}
