package commitlog

import (
	"bytes"
	"testing"

	"github.com/tidelog/tide/internal/disk"
)

// Every test of this package runs with recycled buffers overwritten, so
// that a read served from a buffer after it went back to the pool shows
// as wrong bytes (FuzzWriteBehind, the read tests) rather than passing
// because the buffer was not reused yet.
func init() { poisonRecycledBuffers = true }

func TestPendingClass(t *testing.T) {
	for _, c := range []struct {
		size  int64
		class int
	}{{0, 0}, {1, 0}, {4 << 10, 0}, {4<<10 + 1, 1}, {8 << 10, 1}, {512<<10 + 1, 8}, {1 << 20, 8}, {1<<20 + 1, -1}} {
		if got := pendingClass(c.size); got != c.class {
			t.Errorf("class of %d bytes: %d, want %d", c.size, got, c.class)
		}
		if c.class >= 0 && (pendingClassMinBytes<<c.class < c.size || (c.class > 0 && pendingClassMinBytes<<(c.class-1) >= c.size)) {
			t.Errorf("class %d does not fit %d bytes tightly", c.class, c.size)
		}
	}
	if buffer := getPendingBuffer(5000); len(buffer) != 0 || cap(buffer) != 8<<10 {
		t.Fatalf("a buffer for 5000 bytes: len %d cap %d", len(buffer), cap(buffer))
	}
	if buffer := getPendingBuffer(3 << 20); cap(buffer) != 3<<20 {
		t.Fatalf("a buffer past the classes: cap %d", cap(buffer))
	}
}

// A completed sync gives its buffers back to the pool, overwritten here:
// a memory chunk kept past CompleteSync (against the Chunk contract) sees
// other bytes, and reads that copy at once, as every caller does, see the
// records appended whatever buffer they went into.
func TestCompletedSyncRecyclesPendingBuffers(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	want := appendKept(t, l, 3, 1000)
	result, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil || result.InFiles() {
		t.Fatalf("a read of pending bytes: %+v, %v", result, err)
	}
	held := result.Chunks[0].Bytes
	if !bytes.Equal(held, want) {
		t.Fatal("the memory chunk does not hold the appended bytes")
	}
	job := mustBegin(t, l)
	if _, err := l.CompleteSync(job, job.Run()); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(held, want) || held[0] != 0xdb {
		t.Fatal("a completed sync kept its pending buffer: it went neither to the pool nor through the poison")
	}
	for round := range 20 {
		want = append(want, appendKept(t, l, 1+round%3, 2000+int64(round))...)
		if round%4 == 3 {
			job := mustBegin(t, l)
			if _, err := l.CompleteSync(job, job.Run()); err != nil {
				t.Fatal(err)
			}
		}
		if data, _ := readAll(t, l, 0); !bytes.Equal(data, want) {
			t.Fatalf("round %d: a read after recycling differs from the records appended", round)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
