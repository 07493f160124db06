package commitlog

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// A sync has three steps, so that the goroutine that appends never waits
// for the disk (docs/storage.md, "The sync pipeline"):
//
//  1. BeginSync, on the owner's goroutine (the node loop), decides what to
//     write and sync: the pending buffers of the segments holding data past
//     the durable end offset (pending.go), which it seals, their indexes'
//     pending entries, encoded (entryfile.go), the segments rolled since
//     the last job (rolled.go), the offsets checkpoint to write when one
//     waits, and the log end offset they will make durable.
//  2. SyncJob.Run, on any goroutine (an I/O worker in tide serve, a
//     completion event in the simulator), writes those buffers to their
//     files, then each segment's index entries, then syncs the files (a
//     rolled segment's index files too; the active one's are synced at
//     truncation and close), then the directory when it settles a roll,
//     and writes the checkpoint last. It touches no state of the log
//     beyond what syncMu guards, which the steps that close files share.
//  3. CompleteSync, on the owner's goroutine, records the written bytes
//     and entries as flushed and drops their buffers, takes the settled
//     segments off the rolled list, moves the durable end offset to what
//     the job made durable and the recovery point to the one it
//     checkpointed; or fails the log if a write or a sync failed.
//
// Between 1 and 3 the owner goes on appending, into fresh buffers: the
// job's end offset was taken at step 1, and its buffers hold every byte
// below it that is not in a file, so later appends never count as durable
// before a later job covers them.
// A truncation, a full truncation, a deletion of segments or Close between
// 1 and 3 bumps the log's sync generation: a job of an older generation
// writes and syncs nothing (its files may be closed) and completes as a
// no-op, since the offsets it names may now hold other records. Each of
// those steps first writes every pending byte itself (a drain, under
// syncMu) and syncs what it keeps (syncActiveLocked, which settles the
// rolled segments), so nothing that was appended is lost to the no-op. A
// segment roll syncs nothing (rolled.go): the next job writes and syncs
// the closed segment and its indexes, syncs the directory, and then
// writes the offsets checkpoint with the new recovery point, which
// CompleteSync then takes; a job begun before a roll settles only what
// was rolled before it.

// errSyncStale is what Run returns for a job whose log changed under it
// (its generation is gone): it synced nothing, and CompleteSync ignores it.
var errSyncStale = errors.New("commitlog: sync job outdated by a truncation, a deletion or close")

// SyncJob is one sync of a log's unsynced data, as BeginSync decided it.
// Invariant: endOffset <= the log end offset at BeginSync, and every byte
// below endOffset that is not durable lies in files or in writes.
type SyncJob struct {
	log        *Log
	writes     []segmentWrite
	files      []disk.File
	endOffset  record.Offset
	generation uint64
	// rolled are the rolled segments the job settles (rolled.go): their
	// files and index files are among files, and the directory is synced
	// after them.
	rolled []*segment
	// checkpoint, when not nil, is written last, once everything below
	// its recovery point is durable; only if no checkpoint was written on
	// the owner's goroutine since BeginSync (checkpointSequence).
	checkpoint         *offsetsCheckpoint
	checkpointSequence uint64
	// fs and dir are the log's, taken at BeginSync: Run reads nothing
	// the owner may change under mu alone (SetSegmentLimits replaces the
	// config).
	fs  disk.FS
	dir string
}

// segmentWrite is a job's write of one segment's pending buffers, which
// hold its bytes from start on; they are sealed (pending.go). index and
// timeIndex are its indexes' pending entries, encoded (entryFile), which
// Run writes after the bytes.
type segmentWrite struct {
	segment   *segment
	start     int64
	buffers   [][]byte
	index     entriesWrite
	timeIndex entriesWrite
}

// end is the segment position the write ends at.
func (w segmentWrite) end() int64 {
	end := w.start
	for _, buffer := range w.buffers {
		end += int64(len(buffer))
	}
	return end
}

// EndOffset is the offset below which the job makes the log durable.
func (j SyncJob) EndOffset() record.Offset { return j.endOffset }

// Log is the log the job syncs.
func (j SyncJob) Log() *Log { return j.log }

// BeginSync returns the sync that would make everything appended so far
// durable, and settle the segments rolled since the last (rolled.go), and
// false when there is nothing to do (the durable end offset is the log end
// offset, no roll waits and the checkpoint is current) or the log is
// closed or failed. It must be called on the goroutine that appends, after
// the appends the sync must cover. It seals the pending buffers and index
// entries it hands the job: later appends go to fresh ones.
func (l *Log) BeginSync() (SyncJob, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.usableLocked() != nil {
		return SyncJob{}, false
	}
	end := l.logEndOffsetLocked()
	active := l.segments[len(l.segments)-1]
	// Every segment below the active one is settled when no roll waits:
	// a checkpoint a job could not write (one came from the owner's
	// goroutine since it began) is written by the next.
	checkpointBehind := active.baseOffset > l.recoveryPoint
	if l.durableEndOffset >= end && len(l.rolled) == 0 && !checkpointBehind {
		return SyncJob{}, false
	}
	job := SyncJob{log: l, endOffset: end, generation: l.syncGeneration, rolled: slices.Clone(l.rolled), fs: l.cfg.FS, dir: l.cfg.Dir}
	// Only the rolled segments and the active one hold data that is not
	// settled (assertInvariantsLocked).
	for _, s := range l.rolled {
		job.files = append(job.files, s.file, s.index.file, s.timeIndex.file)
		if s.pendingBytes() > 0 || s.pendingIndexEntries() > 0 {
			job.writes = append(job.writes, s.sealWrite())
		}
	}
	if active.nextOffset > l.durableEndOffset && active.size > 0 {
		job.files = append(job.files, active.file)
	}
	if active.pendingBytes() > 0 || active.pendingIndexEntries() > 0 {
		job.writes = append(job.writes, active.sealWrite())
	}
	if len(job.rolled) > 0 || checkpointBehind {
		checkpoint := l.offsetsCheckpointLocked(active.baseOffset)
		job.checkpoint, job.checkpointSequence = &checkpoint, l.checkpointSequence
	}
	return job, true
}

// Run writes the job's pending buffers and index entries to their files,
// then syncs the files (each segment after its writes), then the
// directory when the job settles rolled segments, then writes the offsets
// checkpoint when it has one: the recovery point moves on disk only once
// everything below it is durable. It may run on any goroutine, alongside
// the log's appends and reads; a truncation, a deletion of segments or
// Close waits until it returns. A job whose log changed since BeginSync
// writes and syncs nothing and returns an error CompleteSync ignores.
func (j SyncJob) Run() error {
	l := j.log
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if j.generation != l.syncGeneration {
		return errSyncStale
	}
	if err := j.writeAndSyncHoldingSyncMu(); err != nil {
		return err
	}
	return j.writeCheckpointHoldingSyncMu()
}

// writeAndSyncHoldingSyncMu is Run's writes and syncs, without the
// checkpoint.
func (j SyncJob) writeAndSyncHoldingSyncMu() error {
	for _, write := range j.writes {
		if err := write.run(); err != nil {
			return err
		}
	}
	for _, file := range j.files {
		if err := file.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", file.Name(), err)
		}
	}
	if len(j.rolled) > 0 {
		// The rolled segments' successors' names: a segment whose name
		// a crash can lose must not lie below the recovery point.
		if err := j.fs.SyncDir(j.dir); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}
	return nil
}

// writeCheckpointHoldingSyncMu writes the job's offsets checkpoint, unless
// the owner wrote one since BeginSync: that one is newer (a log start
// moved), and the next job writes the recovery point again.
func (j SyncJob) writeCheckpointHoldingSyncMu() error {
	l := j.log
	if j.checkpoint == nil || j.checkpointSequence != l.checkpointSequence {
		return nil
	}
	if err := disk.WriteFileAtomically(j.fs, j.dir, offsetsCheckpointName, j.checkpoint.marshal()); err != nil {
		return fmt.Errorf("write offsets checkpoint: %w", err)
	}
	return nil
}

// CompleteSync takes a job's outcome (Run's error) on the goroutine that
// appends and returns the durable end offset. A failed write or sync fails
// the log (ErrLogFailed): a failed fsync leaves the file in an unknown
// state, a failed write a file of unknown length, and neither is retried. A job of an older generation changes nothing: the
// log was truncated, emptied or had segments deleted since, and each of
// those synced what it kept.
func (l *Log) CompleteSync(job SyncJob, runErr error) (record.Offset, error) {
	if job.log != l {
		panic("commitlog: a sync job completed on another log")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	if errors.Is(runErr, errSyncStale) || job.generation != l.syncGeneration {
		return l.durableEndOffset, nil
	}
	if runErr != nil {
		return 0, l.failLocked(runErr)
	}
	if job.endOffset > l.logEndOffsetLocked() {
		panic(fmt.Sprintf("commitlog: a sync job of generation %d ends at %d, past the log end %d", job.generation, job.endOffset, l.logEndOffsetLocked()))
	}
	for _, write := range job.writes {
		write.markFlushed()
	}
	l.durableEndOffset = max(l.durableEndOffset, job.endOffset)
	l.completeRolledLocked(job)
	if job.checkpoint != nil && job.checkpointSequence == l.checkpointSequence {
		// The job wrote its checkpoint, and no later one replaced it.
		l.recoveryPoint = max(l.recoveryPoint, job.checkpoint.RecoveryPoint)
	}
	l.assertInvariantsLocked("sync")
	return l.durableEndOffset, nil
}

// Sync makes everything appended so far durable, on the calling goroutine:
// BeginSync, Run and CompleteSync in a row. A failed sync fails the log
// (see ErrLogFailed). The broker syncs through the three steps, off its
// loop; Sync is for tools and tests.
func (l *Log) Sync() error {
	job, ok := l.BeginSync()
	if !ok {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.usableLocked()
	}
	_, err := l.CompleteSync(job, job.Run())
	return err
}

// invalidateSyncsLocked starts a new sync generation before the log
// truncates, deletes or closes files: it waits for a job that is running
// to finish, drains every pending byte into the files (a job it makes a
// no-op would have written them), and makes every job begun before it a
// no-op. A failed log drains nothing: its files' state is unknown. The
// caller holds l.mu for writing; the order is always l.mu, then l.syncMu.
func (l *Log) invalidateSyncsLocked() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.syncGeneration++
	if l.failure != nil {
		return l.failure
	}
	return l.drainHoldingSyncMuLocked()
}

// drainLocked writes every pending byte to the files, on the calling
// goroutine (the owner's): for the rare steps that need the files whole
// before they sync, truncate, roll or close them. A job begun before finds
// its bytes written and writes nothing twice. A failed write fails the log.
func (l *Log) drainLocked() error {
	if l.failure != nil {
		return l.failure
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.drainHoldingSyncMuLocked()
}

func (l *Log) drainHoldingSyncMuLocked() error {
	for _, s := range l.segments {
		if err := s.drain(); err != nil {
			return l.failLocked(err)
		}
	}
	return nil
}
