package server

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// bufferPool recycles the large buffers the produce path reads into: the
// bodies of Produce requests and the replica fetchers' responses, which
// carry every byte a broker appends. Without it each is a fresh
// allocation, zeroed and then collected: at 60 MiB/s of 1 KiB records
// on three brokers in one process, the collector ran about ten times a
// second.
//
// Buffers come in power-of-two classes from bufferClassMinBytes to
// bufferClassMaxBytes; a buffer is at most twice the size asked, so what
// the pool hands out stays within twice the bytes the request queue
// reserves (queued.max.request.bytes) and the fetchers' one response in
// flight per source. Smaller and larger sizes are allocated as before.
// What the pool holds idle is sync.Pool's: dropped by the garbage
// collector within two cycles, never a cache that grows.
//
// A buffer goes back only once nothing refers to it: see handleKafka and
// handleFetcherEvent for who may give one back, and when.
type bufferPool struct {
	classes [bufferClasses]sync.Pool
}

const (
	bufferClassMinBytes = 64 << 10
	bufferClasses       = 5 // 64 KiB, 128 KiB, 256 KiB, 512 KiB, 1 MiB
	bufferClassMaxBytes = bufferClassMinBytes << (bufferClasses - 1)
)

// bufferClass is the class whose buffers hold size bytes, or -1 when
// size is outside the classes.
func bufferClass(size int) int {
	if size <= bufferClassMinBytes/2 || size > bufferClassMaxBytes {
		return -1
	}
	if size <= bufferClassMinBytes {
		return 0
	}
	return bits.Len(uint(size-1)) - bits.Len(uint(bufferClassMinBytes-1))
}

// get returns a buffer of length size, recycled when the pool has one of
// its class. A nil pool allocates.
func (p *bufferPool) get(size int) []byte {
	class := bufferClass(size)
	if p == nil || class < 0 {
		return make([]byte, size)
	}
	if recycled, ok := p.classes[class].Get().(*[]byte); ok {
		return (*recycled)[:size]
	}
	return make([]byte, size, bufferClassMinBytes<<class)
}

// put takes back a buffer that nothing refers to any more. A buffer whose
// capacity is not a class size (not the pool's) is left to the collector,
// and so is every buffer given to a nil pool.
func (p *bufferPool) put(buffer []byte) {
	class := bufferClass(cap(buffer))
	if p == nil || class < 0 || cap(buffer) != bufferClassMinBytes<<class {
		return
	}
	buffer = buffer[:cap(buffer)]
	p.classes[class].Put(&buffer)
}

// produceKey is the Kafka API key of Produce.
const produceKey = 0

// isProduce reports whether a request body (after its size prefix) is a
// Produce request: its first two bytes are the API key.
func isProduce(request []byte) bool {
	return len(request) >= 2 && binary.BigEndian.Uint16(request) == produceKey
}
