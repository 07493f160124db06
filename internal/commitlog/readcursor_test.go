package commitlog

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// readBytes is a read's batches as bytes, for comparing two reads.
func readBytes(t *testing.T, l *Log, from record.Offset, maxBytes int64, upTo record.Offset) (ReadResult, []byte) {
	t.Helper()
	result, err := l.Read(from, maxBytes, upTo)
	if err != nil {
		t.Fatalf("read at %d: %v", from, err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return result, data
}

// Readers going on from where their last read ended start at a cursor,
// and get exactly what a read that looks its start up in the index gets:
// several readers at once, across segments whose indexes are spilled,
// with random sizes and ends.
func TestReadCursorsAnswerAsLookup(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 512})
	for range 600 {
		batch := testBatches(1, 1+random.IntN(5), 10+random.IntN(200), 1000)
		if _, err := appendValidatedAsLeader(l, batch, 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.segments) < 4 {
		t.Fatalf("%d segments, want several", len(l.segments))
	}
	end := l.LogEndOffset()
	readers := []record.Offset{0, 0, 0, end / 2}
	for step := 0; step < 2000; step++ {
		i := random.IntN(len(readers))
		from := readers[i]
		maxBytes, upTo := int64(1+random.IntN(4096)), from+record.Offset(1+random.IntN(300))
		got, gotBytes := readBytes(t, l, from, maxBytes, upTo)
		saved, next, hits := l.cursors.cursors, l.cursors.next, l.cursors.hits
		l.cursors.reset()
		want, wantBytes := readBytes(t, l, from, maxBytes, upTo)
		l.cursors.cursors, l.cursors.next, l.cursors.hits = saved, next, hits
		if got.FirstOffset != want.FirstOffset || got.NextOffset != want.NextOffset || !bytes.Equal(gotBytes, wantBytes) {
			t.Fatalf("step %d, read at %d (max %d bytes, up to %d): [%d, %d) %d bytes from the cursor, [%d, %d) %d bytes looked up",
				step, from, maxBytes, upTo, got.FirstOffset, got.NextOffset, len(gotBytes), want.FirstOffset, want.NextOffset, len(wantBytes))
		}
		readers[i] = got.NextOffset
		if got.NextOffset >= end {
			readers[i] = 0
		}
	}
	t.Logf("hits %d", l.cursors.hits)
	if l.cursors.hits < 1000 {
		t.Fatalf("%d of 2000 reads began at a cursor", l.cursors.hits)
	}
}

// A truncation invalidates the cursors: the offset a cursor names may be
// written again at another position, in batches of other sizes.
func TestReadCursorAfterTruncation(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 1 << 20})
	for range 10 {
		if _, err := appendValidatedAsLeader(l, testBatches(1, 10, 100, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if first, _ := readBytes(t, l, 0, 4000, 100); first.NextOffset != 30 {
		t.Fatalf("first read ends at %d, want 30", first.NextOffset)
	}
	if _, err := l.TruncateTo(20); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if _, err := appendValidatedAsLeader(l, testBatches(1, 1, 37, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	hits := l.cursors.hits
	got, _ := readBytes(t, l, 30, 1<<20, 50)
	if got.FirstOffset != 30 || got.NextOffset != 50 || l.cursors.hits != hits {
		t.Fatalf("read at 30 after the truncation: [%d, %d), %d cursor hits, want [30, 50) looked up", got.FirstOffset, got.NextOffset, l.cursors.hits-hits)
	}
}
