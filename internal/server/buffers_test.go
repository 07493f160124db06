package server

import "testing"

// A buffer from the pool has the length asked and at most twice its
// capacity; one given back is handed out again for a size of its class,
// and sizes outside the classes, foreign buffers and a nil pool allocate.
func TestBufferPool(t *testing.T) {
	var pool bufferPool
	for _, size := range []int{0, 1, 32 << 10, 32<<10 + 1, 64 << 10, 64<<10 + 1, 700 << 10, 1 << 20, 1<<20 + 1} {
		buffer := pool.get(size)
		if len(buffer) != size || (bufferClass(size) >= 0 && cap(buffer) > 2*size) || (bufferClass(size) < 0 && cap(buffer) != size) {
			t.Errorf("get(%d): length %d, capacity %d", size, len(buffer), cap(buffer))
		}
	}
	first := pool.get(100 << 10)
	first[0] = 7
	pool.put(first)
	// sync.Pool may drop what it holds at any time (a collection), so
	// try a few times: a recycled buffer keeps the byte written into it.
	recycled := false
	for range 10 {
		again := pool.get(90 << 10)
		if cap(again) != 128<<10 {
			t.Fatalf("get(90 KiB) has capacity %d, want the 128 KiB class", cap(again))
		}
		if again[0] == 7 {
			recycled = true
			break
		}
		pool.put(first)
	}
	if !recycled {
		t.Error("a buffer given back was never handed out again")
	}
	pool.put(make([]byte, 100<<10)) // not a class capacity: dropped
	var none *bufferPool
	if buffer := none.get(100 << 10); len(buffer) != 100<<10 {
		t.Errorf("a nil pool's get: length %d", len(buffer))
	}
	none.put(first)
	if !isProduce([]byte{0, 0, 0, 9}) || isProduce([]byte{0, 1, 0, 9}) || isProduce([]byte{0}) {
		t.Error("isProduce reads the API key wrong")
	}
}

// BenchmarkRequestBuffers is the buffer a produce request body is read
// into, a 900 KiB one (kgo's batches of 1 KiB records are up to 1 MB),
// filled as the read fills it and then dropped: a fresh allocation each
// time (zeroed, then collected), as before the pool, against the pool.
func BenchmarkRequestBuffers(b *testing.B) {
	const size = 900 << 10
	source := make([]byte, size)
	b.Run("make", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			buffer := make([]byte, size)
			copy(buffer, source)
			sink = buffer
		}
	})
	b.Run("pool", func(b *testing.B) {
		var pool bufferPool
		b.SetBytes(size)
		for range b.N {
			buffer := pool.get(size)
			copy(buffer, source)
			sink = buffer
			pool.put(buffer)
		}
	})
}

// sink keeps the benchmark's buffers from being optimized away.
var sink []byte
