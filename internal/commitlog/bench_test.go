package commitlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Benchmarks run on real files (t.TempDir) so that the sync cost is the
// machine's; each reports bytes per second of batches appended or read.
// Figures from one machine are in docs/storage.md.

func benchmarkLog(b *testing.B, flush FlushMode) *Log {
	l, err := Open(Config{FS: disk.OS(), Dir: b.TempDir(), Flush: flush, SegmentBytes: 256 << 20})
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

func BenchmarkAppend(b *testing.B) {
	for _, flush := range []FlushMode{FlushNever, FlushAlways} {
		for _, size := range []int{1 << 10, 16 << 10} {
			for _, appenders := range []int{1, 16} {
				if flush == FlushNever && appenders > 1 {
					continue
				}
				name := fmt.Sprintf("flush=%s/batch=%dKiB/appenders=%d", flush, size>>10, appenders)
				b.Run(name, func(b *testing.B) { benchmarkAppend(b, flush, size, appenders) })
			}
		}
	}
}

func benchmarkAppend(b *testing.B, flush FlushMode, size, appenders int) {
	l := benchmarkLog(b, flush)
	template := producerBatch(size)
	b.SetBytes(int64(len(template)))
	b.ResetTimer()
	var wg sync.WaitGroup
	perAppender := (b.N + appenders - 1) / appenders
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]byte, len(template))
			for range perAppender {
				copy(batch, template)
				if _, err := l.AppendAsLeader(batch, 0); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkRead(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB/fetch=1MiB", size>>10), func(b *testing.B) {
			l := benchmarkLog(b, FlushNever)
			template := producerBatch(size)
			for l.SizeBytes() < 64<<20 {
				if _, err := l.AppendAsLeader(append([]byte(nil), template...), 0); err != nil {
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
