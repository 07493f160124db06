package main

import (
	"io"
	"net"
	"testing"
)

// BenchmarkLoopbackTCP is one TCP connection on 127.0.0.1 carrying 1 MiB
// writes to a reader that drains it 1 MiB at a time, with no work on
// either side: the most one client connection can move on this machine,
// the kernel's two copies (into the socket, out of it) and nothing else.
// tide bench's produce and consume figures on loopback are bounded by it
// (docs/benchmarks.md, Issue 15's targets).
//
//	go test ./cmd/tide/ -run XXX -bench LoopbackTCP -benchtime 4000x
func BenchmarkLoopbackTCP(b *testing.B) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close()
	const chunkBytes = 1 << 20
	drained := make(chan error, 1)
	go func() {
		connection, err := listener.Accept()
		if err != nil {
			drained <- err
			return
		}
		defer connection.Close()
		buffer := make([]byte, chunkBytes)
		for {
			if _, err := connection.Read(buffer); err != nil {
				if err == io.EOF {
					err = nil
				}
				drained <- err
				return
			}
		}
	}()
	connection, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, chunkBytes)
	b.SetBytes(chunkBytes)
	for b.Loop() {
		if _, err := connection.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	connection.Close()
	if err := <-drained; err != nil {
		b.Fatal(err)
	}
}
