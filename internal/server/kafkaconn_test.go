package server

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/wire"
)

// testConn serves one kafkaConn over a loopback pair with handle, and
// returns the client's end. Each request's room in the request queue (as
// large as MaxInFlight maximal requests) is released once handle has it.
func testConn(t *testing.T, limits kafkaLimits, handleBytes func(request []byte, answer func([]byte, error))) net.Conn {
	t.Helper()
	queue := newRequestQueue(int64(limits.MaxInFlight)*int64(limits.MaxRequestBytes), limits.MaxInFlight)
	return testConnQueue(t, limits, queue, handleBytes)
}

// testConnQueue is testConn with the request queue given; handle then
// releases the request's room when it is called.
func testConnQueue(t *testing.T, limits kafkaLimits, queue *requestQueue, handleBytes func(request []byte, answer func([]byte, error))) net.Conn {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	client, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := listener.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	handle := func(_ string, request []byte, answer func(wire.Response, error)) {
		queue.release(int64(len(request)))
		handleBytes(request, func(response []byte, err error) { answer(wire.Response{Bytes: response}, err) })
	}
	log := slog.New(slog.DiscardHandler)
	shared := &kafkaShared{limits: limits, queue: queue, handle: handle, log: log,
		refused: newSampledLog(log, slog.LevelWarn, "refused")}
	go newKafkaConn(server, shared).serve()
	return client
}

var testLimits = kafkaLimits{MaxRequestBytes: 1 << 10, MaxInFlight: 8, IdleTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second}

func sendRequest(t *testing.T, c net.Conn, body []byte) {
	t.Helper()
	framed := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.Write(append(framed, body...)); err != nil {
		t.Fatal(err)
	}
}

func readResponse(t *testing.T, c net.Conn) ([]byte, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var prefix [4]byte
	if _, err := io.ReadFull(c, prefix[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(prefix[:]))
	_, err := io.ReadFull(c, body)
	return body, err
}

// expectClosed reads until the server closes the connection.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("want the connection closed, got %v", err)
	}
}

// Pipelined requests answered in reverse order still get their responses
// in request order; an acks=0-style nil answer writes nothing.
func TestKafkaConnAnswersInRequestOrder(t *testing.T) {
	const count = 8
	type held struct {
		request []byte
		answer  func([]byte, error)
	}
	arrived := make(chan held, count)
	c := testConn(t, testLimits, func(request []byte, answer func([]byte, error)) { arrived <- held{request, answer} })
	for i := range count {
		sendRequest(t, c, []byte{byte(i)})
	}
	var all []held
	for range count {
		all = append(all, <-arrived)
	}
	for i := count - 1; i >= 0; i-- {
		if i == 3 {
			all[i].answer(nil, nil) // no response, as for acks=0
			continue
		}
		all[i].answer(append([]byte("answer-"), all[i].request...), nil)
	}
	for i := range count {
		if i == 3 {
			continue
		}
		response, err := readResponse(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if want := append([]byte("answer-"), byte(i)); string(response) != string(want) {
			t.Fatalf("response %d is %q, want %q", i, response, want)
		}
	}
}

// A full pipeline stops the reader: no request past MaxInFlight reaches the
// handler until one is answered.
func TestKafkaConnBoundsInFlight(t *testing.T) {
	limits := testLimits
	limits.MaxInFlight = 2
	arrived := make(chan func([]byte, error), 8)
	c := testConn(t, limits, func(_ []byte, answer func([]byte, error)) { arrived <- answer })
	for range 4 {
		sendRequest(t, c, []byte{1})
	}
	first, second := <-arrived, <-arrived
	select {
	case <-arrived:
		t.Fatal("a third request reached the handler with two in flight")
	case <-time.After(100 * time.Millisecond):
	}
	first([]byte("a"), nil)
	if _, err := readResponse(t, c); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("an answered request did not free a place")
	}
	second([]byte("b"), nil)
}

func TestKafkaConnClosesOnOversizedRequest(t *testing.T) {
	c := testConn(t, testLimits, func(_ []byte, answer func([]byte, error)) {
		t.Error("an oversized request reached the handler")
		answer(nil, nil)
	})
	// Only the size: the server must refuse it before any body arrives.
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(testLimits.MaxRequestBytes+1))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
}

func TestKafkaConnClosesOnNegativeSize(t *testing.T) {
	c := testConn(t, testLimits, func(_ []byte, answer func([]byte, error)) { answer(nil, nil) })
	if _, err := c.Write([]byte{0xff, 0xff, 0xff, 0xfe}); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
}

// A request that does not decode is answered with an error (wire's
// RequestError): the earlier responses are written, then the connection
// closes.
func TestKafkaConnClosesOnRequestError(t *testing.T) {
	c := testConn(t, testLimits, func(request []byte, answer func([]byte, error)) {
		if request[0] == 0xff {
			answer(nil, errors.New("malformed"))
			return
		}
		answer([]byte("ok"), nil)
	})
	sendRequest(t, c, []byte{1})
	sendRequest(t, c, []byte{0xff})
	sendRequest(t, c, []byte{2})
	if response, err := readResponse(t, c); err != nil || string(response) != "ok" {
		t.Fatalf("first response %q, %v", response, err)
	}
	expectClosed(t, c)
}

func TestKafkaConnIdleTimeout(t *testing.T) {
	limits := testLimits
	limits.IdleTimeout = 100 * time.Millisecond
	c := testConn(t, limits, func(_ []byte, answer func([]byte, error)) { answer([]byte("ok"), nil) })
	sendRequest(t, c, []byte{1})
	if _, err := readResponse(t, c); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expectClosed(t, c)
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("closed after %s, idle timeout %s", waited, limits.IdleTimeout)
	}
}

// Requests of every size, around the read-ahead and past it, arrive whole.
func TestKafkaConnReadsRequestsOfAnySize(t *testing.T) {
	arrived := make(chan []byte, 1)
	c := testConn(t, kafkaLimits{MaxRequestBytes: 8 << 20, MaxInFlight: 4, IdleTimeout: 10 * time.Second, BodyTimeout: 10 * time.Second}, func(request []byte, answer func([]byte, error)) {
		arrived <- request
		answer([]byte("ok"), nil)
	})
	for _, size := range []int{0, 1, requestReadAheadBytes - 1, requestReadAheadBytes, requestReadAheadBytes + 1, 3*requestReadAheadBytes + 7} {
		request := make([]byte, 4+size)
		binary.BigEndian.PutUint32(request, uint32(size))
		for i := range size {
			request[4+i] = byte(i * 7)
		}
		go c.Write(request)
		got := <-arrived
		if len(got) != size || string(got) != string(request[4:]) {
			t.Fatalf("a request of %d bytes arrived as %d bytes", size, len(got))
		}
		if response, err := readResponse(t, c); err != nil || string(response) != "ok" {
			t.Fatalf("response %q, %v", response, err)
		}
	}
}
