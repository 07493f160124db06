package commitlog

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendPipeline is the node loop's share of an append under the
// sync pipeline (docs/storage.md): one goroutine appends, as the loop does,
// and begins a sync job whenever none is out; another runs the jobs, as an
// I/O worker does, and hands each back to the appender, which completes it
// at its next append. loop-ns/append is the appender's time inside the
// log's calls (Append, BeginSync, CompleteSync) per append: what a write(2)
// on the loop used to cost it, and a copy into memory costs it now. When
// the write backlog is full the appender waits for the job (a producer
// would get REQUEST_TIMED_OUT and retry), outside that time. ns/op is the
// wall time, which on a shared machine includes the appender waiting for a
// CPU the worker holds.
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
			var inLog time.Duration
			complete := func(o outcome) {
				began := time.Now()
				if _, err := l.CompleteSync(o.job, o.err); err != nil {
					b.Fatal(err)
				}
				inLog += time.Since(began)
				out = false
			}
			b.ResetTimer()
			for range b.N {
				batch := append([]byte(nil), template...)
				began := time.Now()
				_, err := appendValidatedAsLeader(l, batch, 0)
				inLog += time.Since(began)
				if errors.Is(err, ErrWriteBacklog) && out {
					complete(<-done)
					began = time.Now()
					_, err = appendValidatedAsLeader(l, batch, 0)
					inLog += time.Since(began)
				}
				if err != nil {
					b.Fatal(err)
				}
				select {
				case o := <-done:
					complete(o)
				default:
				}
				if !out {
					began := time.Now()
					job, ok := l.BeginSync()
					inLog += time.Since(began)
					if ok {
						jobs <- job
						out = true
					}
				}
			}
			if out {
				complete(<-done)
			}
			b.StopTimer()
			b.ReportMetric(float64(inLog.Nanoseconds())/float64(b.N), "loop-ns/append")
		})
	}
}
