package commitlog

import (
	"fmt"
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

// BenchmarkAppend appends and syncs every syncEvery appends (0: never):
// one appender syncing each append, and one sync for 16 appends, which is
// what the broker's group commit gives concurrent producers.
func BenchmarkAppend(b *testing.B) {
	for _, syncEvery := range []int{0, 1, 16} {
		for _, size := range []int{1 << 10, 16 << 10} {
			name := fmt.Sprintf("sync-every=%d/batch=%dKiB", syncEvery, size>>10)
			b.Run(name, func(b *testing.B) { benchmarkAppend(b, syncEvery, size) })
		}
	}
}

func benchmarkAppend(b *testing.B, syncEvery, size int) {
	l := benchmarkLog(b)
	template := producerBatch(size)
	b.SetBytes(int64(len(template)))
	b.ResetTimer()
	batch := make([]byte, len(template))
	for i := range b.N {
		copy(batch, template)
		if _, err := appendAsLeader(l, batch, 0); err != nil {
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
				if _, err := appendAsLeader(l, append([]byte(nil), template...), 0); err != nil {
					b.Fatal(err)
				}
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
