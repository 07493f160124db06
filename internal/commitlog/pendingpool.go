package commitlog

import (
	"math/bits"
	"sync"

	"github.com/tidelog/tide/internal/invariants"
)

// pendingPool recycles the pending buffers of every log (pending.go), so
// that an append copies into a buffer that was written and dropped before
// instead of a fresh one the runtime zeroes and the collector frees: at
// 1 KiB records, allocating each anew cost the produce path about a sixth
// more CPU per GiB than writing on the loop did (docs/benchmarks.md,
// "Write-behind").
//
// A buffer goes back when its bytes are in the file and the segment drops
// it (markFlushed, at CompleteSync or a drain), with the log's mu held for
// writing. That is safe only because nothing else refers to it by then:
// a sync job touches no buffer below the file's written length
// (writeBuffers), and a reader that got a memory Chunk copies it before
// the owner next completes a sync or drains (the Chunk contract, read.go).
//
// Buffers come in power-of-two classes from pendingClassMinBytes to
// pendingBufferBytesMax; what the pool holds idle is sync.Pool's, dropped
// by the collector within two cycles, never a cache that grows. Which
// recycled buffer an append gets never changes what the log does: only
// its capacity counts, and that is its class's.
var pendingPool [pendingClasses]sync.Pool

const (
	pendingClassMinBytes = 4 << 10
	pendingClasses       = 9 // 4 KiB .. 1 MiB (pendingBufferBytesMax)
)

// poisonRecycledBuffers makes every buffer given back to the pool be
// overwritten first, so that a reader that kept a memory Chunk past the
// contract serves garbage a CRC check catches instead of passing by luck.
// It is on with the invariants build tag and in this package's tests.
var poisonRecycledBuffers = invariants.Enabled

// pendingClass is the class of the smallest buffers that hold size bytes,
// or -1 when size is past the largest class.
func pendingClass(size int64) int {
	if size > pendingBufferBytesMax {
		return -1
	}
	if size <= pendingClassMinBytes {
		return 0
	}
	return bits.Len64(uint64(size-1)) - bits.Len64(pendingClassMinBytes-1)
}

// getPendingBuffer returns an empty buffer with room for at least size
// bytes: a recycled one of its class when the pool has one. Its bytes
// past its length are whatever the last user left: appendPending copies
// over them before anything reads them.
func getPendingBuffer(size int64) []byte {
	class := pendingClass(size)
	if class < 0 {
		return make([]byte, 0, size)
	}
	if recycled, ok := pendingPool[class].Get().(*[]byte); ok {
		return (*recycled)[:0]
	}
	return make([]byte, 0, pendingClassMinBytes<<class)
}

// putPendingBuffer gives back a buffer nothing refers to any more. One
// whose capacity is not a class's (larger than the classes) is left to
// the collector.
func putPendingBuffer(buffer []byte) {
	class := pendingClass(int64(cap(buffer)))
	if class < 0 || cap(buffer) != pendingClassMinBytes<<class {
		return
	}
	buffer = buffer[:cap(buffer)]
	if poisonRecycledBuffers {
		for i := range buffer {
			buffer[i] = 0xdb
		}
	}
	pendingPool[class].Put(&buffer)
}
