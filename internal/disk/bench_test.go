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

// BenchmarkAppendSyncLatency is one append of 4 KiB and its fsync, timed
// one by one, on the directory TMPDIR names (b.TempDir): the disk's own
// floor under an acks=all write, whose answer waits for a follower's
// fsync. It reports the percentiles of the pairs as well as the mean.
//
//	go test ./internal/disk/ -run XXX -bench AppendSyncLatency -benchtime 2000x
//	TMPDIR=/dev/shm go test ./internal/disk/ -run XXX -bench AppendSyncLatency -benchtime 2000x
func BenchmarkAppendSyncLatency(b *testing.B) {
	file, err := OS().Create(b.TempDir() + "/log")
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	batch := make([]byte, 4096)
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
	slices.Sort(latencies)
	for _, percentile := range []int{50, 90, 99} {
		index := min(len(latencies)-1, len(latencies)*percentile/100)
		b.ReportMetric(float64(latencies[index].Microseconds()), fmt.Sprintf("p%d-µs", percentile))
	}
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds()), "max-µs")
}
