package server

import (
	"fmt"
	"sync"
)

// requestQueue bounds, broker-wide, the Kafka requests that connections
// have read (or are reading) and the node loop has not yet taken: their
// count (Kafka's queued.max.requests) and their bytes (Kafka's
// queued.max.request.bytes, its MemoryPool). Without it each connection
// could hold MaxInFlight requests of MaxRequestBytes while the node loop
// is busy, and a few hostile connections took a broker from 48 MB to
// 3.5 GB during one stall of the loop.
//
// A connection reserves room for a request from its size prefix before it
// reads the body, and waits while there is none, so a full queue stops
// reading and TCP holds the clients back, as Kafka mutes its channels
// when its memory pool is exhausted. The node loop releases the room once
// it has handled the request (Kafka releases the pool's buffer once the
// request is handled): the response, and a produce's records on their
// way to the log, are bounded by the other limits, not by this one.
//
// Reservations are granted in the order they were asked for: a request
// waits behind those before it even when it would fit, so a large request
// is not starved by a stream of small ones, and a release wakes only the
// reservations it makes room for, not every connection waiting.
//
// Invariants: 0 <= bytes <= maxBytes and 0 <= requests <= maxRequests; a
// waiter is in waiting until it is granted or gives up, never both.
type requestQueue struct {
	maxBytes    int64
	maxRequests int

	mu       sync.Mutex
	bytes    int64
	requests int
	waiting  []*queueWaiter
}

// queueWaiter is one reservation waiting for room; granted closes once the
// room is its.
type queueWaiter struct {
	size    int64
	granted chan struct{}
}

func newRequestQueue(maxBytes int64, maxRequests int) *requestQueue {
	return &requestQueue{maxBytes: maxBytes, maxRequests: maxRequests}
}

// requestTooLargeError refuses a request whose size prefix exceeds a
// limit (or is negative): it can never be read, so the connection is closed before any of
// its body is (the bytes that follow cannot be framed without reading
// them).
type requestTooLargeError struct {
	size  int64
	limit int64
	// setting names the limit, as the operator configures it.
	setting string
}

func (e requestTooLargeError) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("request size %d is negative", e.size)
	}
	return fmt.Sprintf("request of %d bytes exceeds %s (%d)", e.size, e.setting, e.limit)
}

// reserve takes room for one request of size bytes, waiting until there
// is some or done closes (then it reports false, holding nothing). A
// request larger than the whole queue is refused at once: waiting would
// never end.
func (q *requestQueue) reserve(size int64, done <-chan struct{}) (bool, error) {
	if size > q.maxBytes {
		return false, requestTooLargeError{size: size, limit: q.maxBytes, setting: "queued.max.request.bytes"}
	}
	q.mu.Lock()
	if len(q.waiting) == 0 && q.fits(size) {
		q.take(size)
		q.mu.Unlock()
		return true, nil
	}
	waiter := &queueWaiter{size: size, granted: make(chan struct{})}
	q.waiting = append(q.waiting, waiter)
	q.mu.Unlock()
	select {
	case <-waiter.granted:
		return true, nil
	case <-done:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiting {
		if w == waiter {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			// Those behind it may fit now that it no longer goes first.
			q.grantLocked()
			return false, nil
		}
	}
	// Granted while the connection closed: the room is given back.
	q.releaseLocked(size)
	return false, nil
}

func (q *requestQueue) fits(size int64) bool {
	return q.requests < q.maxRequests && q.bytes+size <= q.maxBytes
}

func (q *requestQueue) take(size int64) {
	q.requests++
	q.bytes += size
}

// release gives back the room of one request of size bytes.
func (q *requestQueue) release(size int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked(size)
}

func (q *requestQueue) releaseLocked(size int64) {
	q.requests--
	q.bytes -= size
	if q.requests < 0 || q.bytes < 0 {
		panic(fmt.Sprintf("server: request queue released more than it held (%d requests, %d bytes)", q.requests, q.bytes))
	}
	q.grantLocked()
}

// grantLocked gives room to the waiters at the head that fit, in order.
func (q *requestQueue) grantLocked() {
	for len(q.waiting) > 0 && q.fits(q.waiting[0].size) {
		waiter := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.take(waiter.size)
		close(waiter.granted)
	}
}

// queued reports the requests and bytes held.
func (q *requestQueue) queued() (requests int, bytes int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.requests, q.bytes
}
