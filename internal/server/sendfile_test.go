package server

import (
	"bytes"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/wire"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	client, err = net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = listener.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// A response with record sets in memory and in file ranges (several MiB,
// more than a socket buffer takes at once) arrives as one size-prefixed
// response, byte for byte the flattened one; a range past the file's end
// fails the write.
func TestWriteSplicedResponse(t *testing.T) {
	// A file of the OS filesystem, as the logs hold them: sendfile's path.
	file, err := disk.OS().Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	content := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	file.Write(content)
	response := wire.Response{Bytes: []byte("header|middle|end"), Splices: []wire.Splice{
		{At: 7, Bytes: []byte("<in memory>")},
		{At: 14, Ranges: []wire.FileRange{{File: file, Position: 3, Size: 1 << 20}, {File: file, Position: 2 << 20, Size: 2 << 20}}},
	}}
	want, err := response.Flatten()
	if err != nil {
		t.Fatal(err)
	}
	client, server := tcpPair(t)
	k := &kafkaConn{c: server}
	written := make(chan error, 1)
	go func() { written <- k.writeResponse(response) }()
	got := make([]byte, 4+len(want))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if size := int(got[0])<<24 | int(got[1])<<16 | int(got[2])<<8 | int(got[3]); size != len(want) || !bytes.Equal(got[4:], want) {
		t.Fatalf("received %d bytes (size prefix %d), want the %d flattened", len(got)-4, size, len(want))
	}

	short := wire.Response{Bytes: []byte("x"), Splices: []wire.Splice{{At: 1, Ranges: []wire.FileRange{{File: file, Position: int64(len(content)) - 10, Size: 100}}}}}
	go io.Copy(io.Discard, client)
	if err := k.writeResponse(short); err == nil {
		t.Fatal("a range past the end of its file was written")
	}
}
