package server

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/wire"
)

// Answers faster than the client reads: the answering goroutine writes
// each as far as the socket takes it (writeNow), the writer goroutine the
// rest once the client reads, and the answers behind a half-written one
// wait their turn, whole and in order.
func TestKafkaConnAnswersFasterThanTheClientReads(t *testing.T) {
	const count = 100 // 100 answers of 60 KiB: more than the socket buffers hold
	limits := testLimits
	limits.MaxInFlight = count
	answered := make(chan struct{}, count)
	c := testConn(t, limits, func(request []byte, answer func([]byte, error)) {
		answer(bytes.Repeat(request[:1], 60<<10), nil)
		answered <- struct{}{}
	})
	for i := range count {
		sendRequest(t, c, []byte{byte(i)})
	}
	for range count {
		select {
		case <-answered: // answering never waits for the client to read
		case <-time.After(5 * time.Second):
			t.Fatal("an answer waited for the client to read")
		}
	}
	time.Sleep(50 * time.Millisecond) // the socket's buffers fill
	for i := range count {
		response, err := readResponse(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(response, bytes.Repeat([]byte{byte(i)}, 60<<10)) {
			t.Fatalf("response %d: %d bytes starting %d, want 60 KiB of %d", i, len(response), response[0], i)
		}
	}
}

// The same on a replica fetcher's connection: a request the socket does
// not take whole is finished by the writer goroutine, and those behind it
// wait their turn.
func TestClientConnRequestLargerThanTheSocketTakes(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	dialed, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := listener.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cn := newClientConn(dialed, 1)
	defer cn.close()
	var sent []byte
	for i := range clientQueueLength {
		request := bytes.Repeat([]byte{byte(i)}, 100<<10) // 6.4 MiB in all
		if !cn.send(request) {
			t.Fatalf("send %d refused", i)
		}
		sent = append(sent, request...)
	}
	time.Sleep(50 * time.Millisecond)
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("the requests came through out of order or changed")
	}
}

func TestSkipBytes(t *testing.T) {
	buffers := [][]byte{[]byte("ab"), []byte("cde"), nil, []byte("f")}
	for n, want := range []string{"abcdef", "bcdef", "cdef", "def", "ef", "f", ""} {
		var got []byte
		for _, b := range skipBytes(buffers, n) {
			got = append(got, b...)
		}
		if string(got) != want {
			t.Errorf("skipBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if string(buffers[0]) != "ab" {
		t.Error("skipBytes changed its input")
	}
}

// responseBuffers leaves a response with file ranges to the writer.
func TestResponseBuffersLeavesFileRanges(t *testing.T) {
	withFile := wire.Response{Bytes: []byte("head"), Splices: []wire.Splice{{At: 2, Ranges: []wire.FileRange{{}}}}}
	if _, ok := responseBuffers(withFile); ok {
		t.Error("a response with file ranges was taken for writeNow")
	}
	inMemory := wire.Response{Bytes: []byte("head"), Splices: []wire.Splice{{At: 2, Bytes: []byte("xy")}}}
	buffers, ok := responseBuffers(inMemory)
	if !ok {
		t.Fatal("an in-memory response was refused")
	}
	var got []byte
	for _, b := range buffers {
		got = append(got, b...)
	}
	if want := "\x00\x00\x00\x06hexyad"; string(got) != want {
		t.Errorf("buffers %q, want %q", got, want)
	}
}
