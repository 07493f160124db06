package disk

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkAppendSync measures the common log path: append a batch, sync.
func BenchmarkAppendSync(b *testing.B) {
	batch := make([]byte, 4096)
	for _, implementation := range []struct {
		name string
		fsys FS
		root string
	}{
		{"mem", NewMem(), "/"},
		{"os", OS(), b.TempDir()},
	} {
		b.Run(implementation.name, func(b *testing.B) {
			file, err := implementation.fsys.Create(implementation.root + "/log")
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if _, err := file.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := file.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCrashClone measures crashing 100 files with unsynced tails.
func BenchmarkCrashClone(b *testing.B) {
	m := NewMem()
	batch := make([]byte, 1024)
	for i := range 100 {
		file, err := m.Create(fmt.Sprintf("/f%03d", i))
		if err != nil {
			b.Fatal(err)
		}
		for j := range 64 {
			if _, err := file.Write(batch); err != nil {
				b.Fatal(err)
			}
			if j == 32 {
				if err := file.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	var seed int64
	for b.Loop() {
		seed++
		m.CrashClone(seed)
	}
}

// BenchmarkAppendSyncLatency is one append and its fsync, timed one by
// one, on the directory TMPDIR names (b.TempDir), and reports the
// percentiles of the pairs as well as the mean. With 4 KiB appends it is
// the disk's floor under one acks=all write, whose answer waits for a
// follower's fsync; with 1 MiB appends (the batches a busy producer
// sends) its MB/s is about the most the disk takes durably, which every
// replica of a partition on this one disk shares.
//
//	go test ./internal/disk/ -run XXX -bench AppendSyncLatency -benchtime 2000x
//	TMPDIR=/dev/shm go test ./internal/disk/ -run XXX -bench AppendSyncLatency -benchtime 2000x
func BenchmarkAppendSyncLatency(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			file, err := OS().Create(b.TempDir() + "/log")
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			batch := make([]byte, size.bytes)
			var latencies []time.Duration
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				began := time.Now()
				if _, err := file.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := file.Sync(); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(began))
			}
			reportPercentiles(b, latencies)
		})
	}
}

// reportPercentiles adds p50, p90, p99 and the maximum, in µs, to the
// benchmark's line.
func reportPercentiles(b *testing.B, latencies []time.Duration) {
	slices.Sort(latencies)
	for _, percentile := range []int{50, 90, 99} {
		index := min(len(latencies)-1, len(latencies)*percentile/100)
		b.ReportMetric(float64(latencies[index].Microseconds()), fmt.Sprintf("p%d-µs", percentile))
	}
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds()), "max-µs")
}
