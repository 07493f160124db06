package server

import (
	"bytes"
	"io"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/wire"
)

// BenchmarkWriteFetchResponse writes a consumer's fetch answer as the
// server does, to a loopback TCP connection a reader drains as a client
// would (reads of up to 64 KiB): an encoded head, one partition's 1 MiB of
// records from a file (sendfile) and the encoded tail after it. ns/op is
// the writer's and the reader's time together, cpu-us/op the process's
// CPU time (both, and the kernel's work for them); client-reads/op is how
// many reads the client made per response, each a wake-up of the client.
func BenchmarkWriteFetchResponse(b *testing.B) {
	file, err := disk.OS().Create(filepath.Join(b.TempDir(), "segment"))
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	file.Write(bytes.Repeat([]byte("0123456789abcdef"), 1<<16)) // 1 MiB, in the page cache
	head, tail := make([]byte, 120), make([]byte, 12)
	response := wire.Response{Bytes: append(head, tail...), Splices: []wire.Splice{
		{At: len(head), Ranges: []wire.FileRange{{File: file, Position: 0, Size: 1 << 20}}},
	}}
	client, server := tcpPair(b)
	var reads atomic.Int64
	drained := make(chan error, 1)
	go func() {
		buffer := make([]byte, 64<<10)
		for {
			_, err := client.Read(buffer)
			reads.Add(1)
			if err != nil {
				drained <- err
				return
			}
		}
	}()
	k := &kafkaConn{c: server}
	b.SetBytes(response.Size())
	cpuBefore := processCPUSeconds(b)
	b.ResetTimer()
	for range b.N {
		if err := k.writeResponse(response); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := processCPUSeconds(b) - cpuBefore
	server.Close()
	if err := <-drained; err != io.EOF {
		b.Fatal(err)
	}
	b.ReportMetric(float64(reads.Load())/float64(b.N), "client-reads/op")
	b.ReportMetric(cpu*1e6/float64(b.N), "cpu-us/op")
}

// processCPUSeconds is the CPU time (user and system) of the process so
// far: the writer's and the reader's, and the kernel's work for both.
func processCPUSeconds(b *testing.B) float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}
