package commitlog

import (
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
)

// BenchmarkRollLoopTime is the node loop's time in the appends that roll a
// segment, on a disk whose fsyncs take a millisecond (a memfs that sleeps
// in Sync): the loop appends 64 KiB batches to 1 MiB segments and keeps
// one sync job out at a time on a worker goroutine, as the broker does.
// loop-µs/roll is the time of an append that rolled, inside the log; a
// roll that drains and fsyncs the closed segment, the directory and the
// checkpoint inline spends the fsyncs there, one that leaves them to the
// job creates three files.
func BenchmarkRollLoopTime(b *testing.B) {
	fs := &countingFS{FS: disk.NewMem(), delay: time.Millisecond}
	l, err := Open(Config{FS: fs, Dir: "p", SegmentBytes: 1 << 20, PendingBytesMax: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	template := producerBatch(64 << 10)
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
	var inRolls time.Duration
	rolls := 0
	b.ResetTimer()
	for range b.N {
		if out {
			o := <-done // the disk keeps up: one job per append
			if _, err := l.CompleteSync(o.job, o.err); err != nil {
				b.Fatal(err)
			}
			out = false
		}
		segments := l.Segments()
		batch := append([]byte(nil), template...)
		began := time.Now()
		if _, err := appendValidatedAsLeader(l, batch, 0); err != nil {
			b.Fatal(err)
		}
		if l.Segments() != segments {
			inRolls += time.Since(began)
			rolls++
		}
		if job, ok := l.BeginSync(); ok {
			jobs <- job
			out = true
		}
	}
	if out {
		o := <-done
		if _, err := l.CompleteSync(o.job, o.err); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if rolls > 0 {
		b.ReportMetric(float64(inRolls.Microseconds())/float64(rolls), "loop-µs/roll")
	}
}
