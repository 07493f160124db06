package commitlog

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Benchmarks run on real files (t.TempDir) so that the sync cost is the
// machine's; each reports bytes per second of batches appended or read.
// Figures from one machine are in docs/storage.md.

func benchmarkLog(b *testing.B) *Log {
	l, err := Open(Config{FS: disk.OS(), Dir: b.TempDir(), SegmentBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// producerBatch builds one batch of about size bytes, as a producer would.
func producerBatch(size int) []byte {
	const recordBytes = 100
	records := make([]record.Record, max(1, size/(recordBytes+10)))
	for i := range records {
		records[i] = record.Record{Value: make([]byte, recordBytes)}
	}
	return record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch})
}

// BenchmarkAppend appends and syncs every syncEvery appends: one appender
// syncing each append, and one sync for 16 appends, which is what the
// broker's group commit gives concurrent producers. 0 syncs only when the
// write backlog is full (Config.PendingBytesMax, 32 MiB): a sync job
// writes the appended bytes, so a log never synced would refuse appends.
func BenchmarkAppend(b *testing.B) {
	for _, syncEvery := range []int{0, 1, 16} {
		for _, size := range []int{1 << 10, 16 << 10} {
			name := fmt.Sprintf("sync-every=%d/batch=%dKiB", syncEvery, size>>10)
			b.Run(name, func(b *testing.B) { benchmarkAppend(b, benchmarkLog(b), syncEvery, size, appendAsLeader) })
		}
	}
}

// BenchmarkAppendValidated appends without syncs through Append (a second
// full validation, as the broker's appends had) and through
// AppendValidated (the headers checked against the bytes), on batches of
// 1 KiB and of 64 KiB (kgo's batches of 1 KiB records under load are tens
// of KiB). The log is on the in-memory file system, so that the figures
// are the log's CPU and not the page cache's write(2), which varies more
// than the difference on a shared machine.
func BenchmarkAppendValidated(b *testing.B) {
	memoryLog := func(b *testing.B) *Log {
		l, err := Open(Config{FS: disk.NewMem(), Dir: "p", SegmentBytes: 256 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("append/batch=%dKiB", size>>10), func(b *testing.B) { benchmarkAppend(b, memoryLog(b), 0, size, appendStampedAsLeader) })
		b.Run(fmt.Sprintf("validated/batch=%dKiB", size>>10), func(b *testing.B) {
			benchmarkAppend(b, memoryLog(b), 0, size, appendValidatedAsLeader)
		})
	}
}

func benchmarkAppend(b *testing.B, l *Log, syncEvery, size int, appendBatch func(*Log, []byte, record.LeaderEpoch) (AppendResult, error)) {
	template := producerBatch(size)
	b.SetBytes(int64(len(template)))
	b.ResetTimer()
	batch := make([]byte, len(template))
	for i := range b.N {
		copy(batch, template)
		if _, err := appendOrSync(l, batch, appendBatch); err != nil {
			b.Fatal(err)
		}
		if syncEvery > 0 && i%syncEvery == syncEvery-1 {
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkRead(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB/fetch=1MiB", size>>10), func(b *testing.B) {
			l := benchmarkLog(b)
			template := producerBatch(size)
			for l.SizeBytes() < 64<<20 {
				if _, err := appendOrSync(l, append([]byte(nil), template...), appendAsLeader); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Sync(); err != nil { // read from the files, as before write-behind
				b.Fatal(err)
			}
			end := l.LogEndOffset()
			buf := make([]byte, 0, 2<<20)
			b.ResetTimer()
			var read int64
			offset := record.Offset(0)
			for range b.N {
				result, err := l.Read(offset, 1<<20, end)
				if err != nil {
					b.Fatal(err)
				}
				if buf, err = result.AppendTo(buf[:0]); err != nil {
					b.Fatal(err)
				}
				read += result.SizeBytes
				offset = result.NextOffset
				if offset >= end {
					offset = 0
				}
			}
			b.SetBytes(read / int64(b.N))
		})
	}
}

// BenchmarkIndexMemory appends 256 MiB in 1 KiB batches with rising
// timestamps, in segments of 16 MiB, and reports the heap the log holds
// per GiB appended (heap-KiB/GiB): the index entries kept in memory, one
// offset and one time entry per IndexIntervalBytes (4 KiB) of batches
// smaller than that. Kept for every segment they grew with the backlog,
// 6.8 MiB per GiB; kept for the active segment alone (entryFile), they
// stop at one segment's worth (docs/benchmarks.md, Memory with a
// backlog). ns/op is of the whole 256 MiB.
func BenchmarkIndexMemory(b *testing.B) {
	records := make([]record.Record, 9)
	for i := range records {
		records[i] = record.Record{Value: make([]byte, 100)}
	}
	for range b.N {
		l, err := Open(Config{FS: disk.OS(), Dir: b.TempDir(), SegmentBytes: 16 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		appended := 0
		for appended < 256<<20 {
			batch := record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: int64(appended)})
			if _, err := appendOrSync(l, batch, appendValidatedAsLeader); err != nil {
				b.Fatal(err)
			}
			appended += len(batch)
		}
		if err := l.Sync(); err != nil { // the pending bytes are no index
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grown := float64(after.HeapInuse) - float64(before.HeapInuse)
		b.ReportMetric(grown/1024/(float64(appended)/(1<<30)), "heap-KiB/GiB")
	}
}

// BenchmarkReadFromStart is a consumer reading a log from its start, one
// fetch of 1 MiB (max.partition.fetch.bytes) after another, across
// segments of 16 MiB whose indexes are spilled (only the active segment's
// are in memory): the chunks' lookup alone, since the server sends their
// bytes with sendfile. Each read goes on where the last ended, so the
// start is found at a read cursor rather than by a binary search of reads
// of the segment's index file (readcursor.go).
func BenchmarkReadFromStart(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 512 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			l, err := Open(Config{FS: disk.OS(), Dir: b.TempDir(), SegmentBytes: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			template := producerBatch(size)
			for l.SizeBytes() < 96<<20 {
				if _, err := appendOrSync(l, append([]byte(nil), template...), appendValidatedAsLeader); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Sync(); err != nil { // chunks of files, as sendfile gets them
				b.Fatal(err)
			}
			end := l.LogEndOffset()
			b.ResetTimer()
			var read int64
			offset := record.Offset(0)
			for range b.N {
				result, err := l.Read(offset, 1<<20, end)
				if err != nil {
					b.Fatal(err)
				}
				read += result.SizeBytes
				offset = result.NextOffset
				if offset >= end {
					offset = 0
				}
			}
			b.SetBytes(read / int64(b.N))
		})
	}
}

// appendOrSync appends batch as leader in epoch 0, syncing first when the
// write backlog is full: for benchmarks that fill a log without syncs.
func appendOrSync(l *Log, batch []byte, appendBatch func(*Log, []byte, record.LeaderEpoch) (AppendResult, error)) (AppendResult, error) {
	if err := l.CheckWriteBacklog(int64(len(batch))); err != nil {
		if err := l.Sync(); err != nil {
			return AppendResult{}, err
		}
	}
	return appendBatch(l, batch, 0)
}
