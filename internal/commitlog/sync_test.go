package commitlog

import (
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/tidelog/tide/internal/disk"
)

// mustAppend appends count one-record batches as leader in epoch 0.
func mustAppend(t *testing.T, l *Log, count int) {
	t.Helper()
	if _, err := appendAsLeader(l, testBatches(count, 1, 100, 0), 0); err != nil {
		t.Fatal(err)
	}
}

func mustBegin(t *testing.T, l *Log) SyncJob {
	t.Helper()
	job, ok := l.BeginSync()
	if !ok {
		t.Fatalf("BeginSync found nothing to sync: %s", l)
	}
	return job
}

// reopenAfterPowerLoss opens the log a power loss leaves on fs, keeping
// exactly what was synced.
func reopenAfterPowerLoss(t *testing.T, fs *disk.MemFS) *Log {
	t.Helper()
	options := disk.DefaultCrashOptions(1)
	options.Survival, options.TornProbability = disk.SurviveNothing, 0
	return openTestLog(t, fs.CrashCloneWith(options), Config{})
}

// A job makes data durable when it runs, not when it begins: a power loss
// between the two keeps nothing of it, and the durable end offset moves
// only at completion, to the end the job began at, never to appends made
// while it ran.
func TestSyncJobIsDurableOnlyOnceRun(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{})
	mustAppend(t, l, 3)
	job := mustBegin(t, l)
	if job.EndOffset() != 3 {
		t.Fatalf("job ends at %d, want 3", job.EndOffset())
	}
	mustAppend(t, l, 2)
	if crashed := reopenAfterPowerLoss(t, fs); crashed.LogEndOffset() != 0 {
		t.Fatalf("a power loss before the job ran kept the log to %d, want 0", crashed.LogEndOffset())
	}
	if l.DurableEndOffset() != 0 {
		t.Fatalf("durable end %d before the job ran", l.DurableEndOffset())
	}
	runErr := job.Run()
	if l.DurableEndOffset() != 0 {
		t.Fatalf("durable end %d before the job completed", l.DurableEndOffset())
	}
	if crashed := reopenAfterPowerLoss(t, fs); crashed.LogEndOffset() < 3 {
		t.Fatalf("a power loss after the job ran kept the log to %d, want at least 3", crashed.LogEndOffset())
	}
	durable, err := l.CompleteSync(job, runErr)
	if err != nil || durable != 3 {
		t.Fatalf("CompleteSync = %d, %v; want 3 (the end the job began at), nil", durable, err)
	}
	if _, ok := l.BeginSync(); !ok {
		t.Fatal("the appends made while the job ran need a sync of their own")
	}
}

// A truncation between a job's begin and its completion makes the job a
// no-op whether it ran before or after the truncation: the offsets it
// names now hold other records, which it did not sync.
func TestSyncJobAfterTruncationChangesNothing(t *testing.T) {
	for _, ranFirst := range []bool{true, false} {
		fs := disk.NewMem()
		l := openTestLog(t, fs, Config{})
		mustAppend(t, l, 5)
		job := mustBegin(t, l)
		var runErr error
		if ranFirst {
			runErr = job.Run()
		}
		if _, err := l.TruncateTo(2); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, 3) // offsets 2..4 again, other records, unsynced
		if !ranFirst {
			if runErr = job.Run(); !errors.Is(runErr, errSyncStale) {
				t.Fatalf("a job run after a truncation returned %v, want errSyncStale", runErr)
			}
		}
		durable, err := l.CompleteSync(job, runErr)
		if err != nil || durable != 2 {
			t.Fatalf("ran first %v: CompleteSync = %d, %v; want 2 (what the truncation synced), nil", ranFirst, durable, err)
		}
		if crashed := reopenAfterPowerLoss(t, fs); crashed.LogEndOffset() < 2 {
			t.Fatalf("ran first %v: a power loss kept the log to %d, want at least 2", ranFirst, crashed.LogEndOffset())
		}
	}
}

// A full truncation (a follower restarting at its leader's log start)
// between begin and completion makes the job a no-op, and the job never
// syncs the removed segment's closed file.
func TestSyncJobAfterTruncateFullyChangesNothing(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	mustAppend(t, l, 5)
	job := mustBegin(t, l)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	runErr := job.Run()
	if !errors.Is(runErr, errSyncStale) {
		t.Fatalf("Run after a full truncation returned %v, want errSyncStale", runErr)
	}
	durable, err := l.CompleteSync(job, runErr)
	if err != nil || durable != 100 {
		t.Fatalf("CompleteSync = %d, %v; want 100, nil", durable, err)
	}
}

// A segment roll between a job's begin and its completion moves nothing:
// the roll only creates the next segment, the job makes durable what it
// began with, and the next job settles the closed segment (its bytes,
// index entries, fsyncs of the segment and both indexes, the directory)
// before it moves the recovery point to the new segment's base.
func TestSyncJobAcrossASegmentRoll(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{SegmentBytes: 1024, MaxBatchBytes: 512})
	mustAppend(t, l, 2)
	job := mustBegin(t, l)
	for l.Segments() == 1 {
		mustAppend(t, l, 1)
	}
	rolledAt := l.segments[1].baseOffset
	if l.DurableEndOffset() != 0 || l.RecoveryPoint() != 0 {
		t.Fatalf("the roll moved the durable end to %d, the recovery point to %d", l.DurableEndOffset(), l.RecoveryPoint())
	}
	mustAppend(t, l, 1) // into the new active segment, unsynced
	durable, err := l.CompleteSync(job, job.Run())
	if err != nil || durable != job.EndOffset() || l.RecoveryPoint() != 0 {
		t.Fatalf("CompleteSync = %d, %v, recovery point %d; want %d, nil, 0", durable, err, l.RecoveryPoint(), job.EndOffset())
	}
	next := mustBegin(t, l)
	if len(next.files) != 4 || len(next.rolled) != 1 || next.checkpoint == nil || next.checkpoint.RecoveryPoint != rolledAt {
		t.Fatalf("the next job syncs %d files and %d rolled segments, checkpoint %+v; want the rolled segment, its indexes and the active one, recovery point %d",
			len(next.files), len(next.rolled), next.checkpoint, rolledAt)
	}
	runErr := next.Run()
	if l.RecoveryPoint() != 0 {
		t.Fatal("the recovery point moved before the job completed")
	}
	if durable, err := l.CompleteSync(next, runErr); err != nil || durable != l.LogEndOffset() || l.RecoveryPoint() != rolledAt {
		t.Fatalf("CompleteSync = %d, %v, recovery point %d; want the log end %d, recovery point %d", durable, err, l.RecoveryPoint(), l.LogEndOffset(), rolledAt)
	}
	if !l.segments[0].index.spilled || len(l.rolled) != 0 {
		t.Fatal("the settled segment's indexes are still in memory")
	}
	crashed := reopenAfterPowerLoss(t, fs)
	if crashed.LogEndOffset() != l.LogEndOffset() || crashed.Recovery().ScannedFrom != rolledAt || crashed.Recovery().IndexesRebuilt != 0 {
		t.Fatalf("a power loss kept the log to %d (want %d), scanned from %d (want %d), rebuilt %d indexes",
			crashed.LogEndOffset(), l.LogEndOffset(), crashed.Recovery().ScannedFrom, rolledAt, crashed.Recovery().IndexesRebuilt)
	}
}

// Close with a job begun: the job syncs no closed file, and its completion
// reports the closed log.
func TestSyncJobAfterClose(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	mustAppend(t, l, 2)
	job := mustBegin(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	runErr := job.Run()
	if !errors.Is(runErr, errSyncStale) {
		t.Fatalf("Run after Close returned %v, want errSyncStale", runErr)
	}
	if _, err := l.CompleteSync(job, runErr); !errors.Is(err, ErrClosed) {
		t.Fatalf("CompleteSync after Close returned %v, want ErrClosed", err)
	}
}

// A failed sync fails the log at completion, as an inline one did.
func TestSyncJobFailureFailsTheLog(t *testing.T) {
	faulty := disk.NewFaulty(disk.NewMem(), disk.FaultConfig{Seed: 1})
	l := openTestLog(t, faulty, Config{})
	mustAppend(t, l, 2)
	job := mustBegin(t, l)
	faulty.FailSyncAfter(0)
	_, err := l.CompleteSync(job, job.Run())
	if !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("CompleteSync of a failed sync returned %v, want ErrLogFailed wrapping EIO", err)
	}
	if l.DurableEndOffset() != 0 {
		t.Fatalf("durable end %d after a failed sync", l.DurableEndOffset())
	}
}

// Jobs run on another goroutine while the owner appends, truncates and
// finally closes the log (run with -race): no job syncs a closed file,
// and the durable end offset never passes what a completed job began at.
func TestSyncJobsOnAWorker(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 4096, MaxBatchBytes: 1024})
	jobs, done := make(chan SyncJob), make(chan error)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for job := range jobs {
			done <- job.Run()
		}
	}()
	var inFlight *SyncJob
	for i := range 400 {
		mustAppend(t, l, 1)
		if i%37 == 36 {
			if _, err := l.TruncateTo(l.LogEndOffset() - 2); err != nil {
				t.Fatal(err)
			}
		}
		if inFlight == nil {
			if job, ok := l.BeginSync(); ok {
				inFlight = &job
				jobs <- job
			}
			continue
		}
		select {
		case runErr := <-done:
			before := l.DurableEndOffset()
			durable, err := l.CompleteSync(*inFlight, runErr)
			if err != nil {
				t.Fatal(err)
			}
			if durable != before && durable != inFlight.EndOffset() {
				t.Fatalf("durable end %d after a job that began at %d", durable, inFlight.EndOffset())
			}
			inFlight = nil
		default:
		}
	}
	if err := l.Close(); err != nil { // waits for the running job, if any
		t.Fatal(err)
	}
	if inFlight != nil {
		<-done
	}
	close(jobs)
	wg.Wait()
	if _, ok := l.BeginSync(); ok {
		t.Fatal("a closed log began a sync")
	}
}
