package server

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// A full request queue stops every connection reading bodies: a request
// that does not fit waits, holding nothing, until room is released, and
// one larger than the whole queue is refused at once rather than waited
// on forever.
func TestRequestQueueWaitsForRoom(t *testing.T) {
	queue := newRequestQueue(100, 3)
	never := make(chan struct{})
	for _, size := range []int64{60, 40} {
		if ok, err := queue.reserve(size, never); !ok || err != nil {
			t.Fatalf("reserve %d: %v, %v", size, ok, err)
		}
	}
	got := make(chan bool, 1)
	go func() {
		ok, _ := queue.reserve(30, never)
		got <- ok
	}()
	select {
	case <-got:
		t.Fatal("30 bytes reserved with 100 of 100 taken")
	case <-time.After(50 * time.Millisecond):
	}
	queue.release(40)
	if ok := <-got; !ok {
		t.Fatal("the reservation did not get the released room")
	}
	if requests, bytes := queue.queued(); requests != 2 || bytes != 90 {
		t.Fatalf("queue holds %d requests, %d bytes; want 2, 90", requests, bytes)
	}
	var tooLarge requestTooLargeError
	if _, err := queue.reserve(101, never); !errors.As(err, &tooLarge) {
		t.Fatalf("a request larger than the queue: %v, want requestTooLargeError", err)
	}
}

// The count is bounded too (queued.max.requests), and a wait ends when the
// connection closes.
func TestRequestQueueBoundsRequests(t *testing.T) {
	queue := newRequestQueue(1<<20, 2)
	never := make(chan struct{})
	queue.reserve(0, never)
	queue.reserve(0, never)
	done := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(done) })
	if ok, err := queue.reserve(1, done); ok || err != nil {
		t.Fatalf("a third request reserved with two of two queued: %v, %v", ok, err)
	}
}

// A connection holding requests the handler has not taken stops reading:
// with room for one request in the queue, a second waits, unread, until
// the first is taken.
func TestKafkaConnWaitsForQueueRoom(t *testing.T) {
	limits := testLimits
	queue := newRequestQueue(int64(limits.MaxRequestBytes), limits.MaxInFlight)
	arrived := make(chan []byte, 4)
	c := testConnQueue(t, limits, queue, func(request []byte, answer func([]byte, error)) {
		arrived <- request
		answer([]byte("ok"), nil)
	})
	// The room a request the node loop has not taken would hold.
	queue.reserve(int64(limits.MaxRequestBytes), make(chan struct{}))
	body := make([]byte, 10)
	sendRequest(t, c, body)
	select {
	case <-arrived:
		t.Fatal("a request was read with the queue full")
	case <-time.After(100 * time.Millisecond):
	}
	queue.release(int64(limits.MaxRequestBytes))
	select {
	case got := <-arrived:
		if len(got) != len(body) {
			t.Fatalf("request of %d bytes arrived as %d", len(body), len(got))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not read once the queue had room")
	}
}

// A size prefix larger than the queue, with socket.request.max.bytes
// above it, is refused: the connection closes instead of waiting forever.
func TestKafkaConnRefusesRequestLargerThanQueue(t *testing.T) {
	limits := testLimits
	queue := newRequestQueue(int64(limits.MaxRequestBytes)/2, limits.MaxInFlight)
	c := testConnQueue(t, limits, queue, func(_ []byte, answer func([]byte, error)) {
		t.Error("a request larger than the queue reached the handler")
		answer(nil, nil)
	})
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(limits.MaxRequestBytes))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
}

// Room goes to reservations in the order they asked: a large request at
// the head is not overtaken by a small one that would fit, and one that
// gives up (its connection closed) lets those behind it through.
func TestRequestQueueGrantsInOrder(t *testing.T) {
	queue := newRequestQueue(100, 10)
	never := make(chan struct{})
	queue.reserve(90, never)
	large, small := make(chan bool, 1), make(chan bool, 1)
	giveUp := make(chan struct{})
	go func() { ok, _ := queue.reserve(50, giveUp); large <- ok }()
	waitWaiting(t, queue, 1)
	go func() { ok, _ := queue.reserve(10, never); small <- ok }()
	waitWaiting(t, queue, 2)
	select {
	case <-small:
		t.Fatal("a small request overtook the large one waiting before it")
	case <-time.After(50 * time.Millisecond):
	}
	close(giveUp)
	if ok := <-large; ok {
		t.Fatal("a reservation whose connection closed was granted")
	}
	if ok := <-small; !ok {
		t.Fatal("the small request was not granted once the large one gave up")
	}
	if requests, bytes := queue.queued(); requests != 2 || bytes != 100 {
		t.Fatalf("queue holds %d requests, %d bytes; want 2, 100", requests, bytes)
	}
}

func waitWaiting(t *testing.T, queue *requestQueue, want int) {
	t.Helper()
	for began := time.Now(); time.Since(began) < 5*time.Second; time.Sleep(time.Millisecond) {
		queue.mu.Lock()
		waiting := len(queue.waiting)
		queue.mu.Unlock()
		if waiting == want {
			return
		}
	}
	t.Fatalf("%d reservations never waited", want)
}

// A size prefix with no body behind it holds its room in the queue only
// for BodyTimeout, not the idle timeout: then the connection is closed
// and the room is free for the others.
func TestStalledRequestBodyGivesItsRoomBack(t *testing.T) {
	limits := testLimits
	limits.IdleTimeout, limits.BodyTimeout = time.Minute, 200*time.Millisecond
	queue := newRequestQueue(int64(limits.MaxRequestBytes), limits.MaxInFlight)
	c := testConnQueue(t, limits, queue, func(_ []byte, answer func([]byte, error)) {
		t.Error("a request without its body reached the handler")
		answer(nil, nil)
	})
	// The size and 10 bytes of a body of MaxRequestBytes, then silence.
	prefix := binary.BigEndian.AppendUint32(nil, uint32(limits.MaxRequestBytes))
	if _, err := c.Write(append(prefix, make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	expectClosed(t, c)
	if waited := time.Since(began); waited > 3*time.Second {
		t.Fatalf("closed after %s; body timeout %s", waited, limits.BodyTimeout)
	}
	for began := time.Now(); ; time.Sleep(time.Millisecond) {
		if requests, bytes := queue.queued(); requests == 0 && bytes == 0 {
			break
		}
		if time.Since(began) > time.Second {
			t.Fatal("the stalled request's room was not given back")
		}
	}
}
