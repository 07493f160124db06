package commitlog

import (
	"fmt"
	"testing"
)

// BenchmarkAppendPipeline is the node loop's share of an append under the
// sync pipeline (docs/storage.md): one goroutine appends, as the loop does,
// and begins a sync job whenever none is out; another runs the jobs, as an
// I/O worker does, and hands each back to the appender, which completes it
// at its next append. ns/op is the appender's time per append, what a
// write(2) on the loop used to cost it and a copy into memory costs it now.
func BenchmarkAppendPipeline(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			l := benchmarkLog(b)
			template := producerBatch(size)
			b.SetBytes(int64(len(template)))
			type outcome struct {
				job SyncJob
				err error
			}
			jobs, done := make(chan SyncJob, 1), make(chan outcome, 1)
			go func() {
				for job := range jobs {
					done <- outcome{job, job.Run()}
				}
			}()
			defer close(jobs)
			out := false
			complete := func(o outcome) {
				if _, err := l.CompleteSync(o.job, o.err); err != nil {
					b.Fatal(err)
				}
				out = false
			}
			b.ResetTimer()
			for range b.N {
				batch := append([]byte(nil), template...)
				if _, err := appendValidatedAsLeader(l, batch, 0); err != nil {
					b.Fatal(err)
				}
				select {
				case o := <-done:
					complete(o)
				default:
				}
				if !out {
					if job, ok := l.BeginSync(); ok {
						jobs <- job
						out = true
					}
				}
			}
			if out {
				complete(<-done)
			}
			b.StopTimer()
		})
	}
}
