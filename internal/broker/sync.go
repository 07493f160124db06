package broker

import (
	"errors"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
)

// SyncJob is one partition log's sync, which the node hands out
// (TakeSyncs) for its runtime to run off the node loop (Run) and to hand
// back with the outcome (Synced). Run is the only part that touches the
// disk, and may run on any goroutine; the node decides what it syncs and
// what its completion lets out. docs/storage.md, "The sync pipeline".
type SyncJob struct {
	Partition metadata.TopicPartition
	job       commitlog.SyncJob
}

// Run syncs the job's files: a disk sync of its own, on whatever goroutine
// the runtime gives it. The error goes back to the node with Synced.
func (j SyncJob) Run() error { return j.job.Run() }

// Dirty says whether a replica asked for a sync that TakeSyncs would hand
// out now: its log has no job out already.
func (n *Node) Dirty() bool {
	for tp := range n.unsynced {
		if !n.syncBusy(tp) {
			return true
		}
	}
	return false
}

// SyncsInFlight is the number of jobs handed out and not yet completed.
func (n *Node) SyncsInFlight() int { return len(n.syncing) }

// syncBusy says whether a partition's current log has a job out. A job of
// a log the node closed since (a partition dropped, failed or re-created)
// does not count: its completion is a no-op.
func (n *Node) syncBusy(tp metadata.TopicPartition) bool {
	log, out := n.syncing[tp]
	if !out {
		return false
	}
	if p, ok := n.partitions[tp]; ok && p.log == log {
		return true
	}
	delete(n.syncing, tp)
	return false
}

// TakeSyncs is the first half of group commit's durability step: for each
// log a replica asked to sync since its last job began (however many
// appends asked), at most limit of them, in partition order, it begins one
// sync job and hands it out; a log with a job out gets its next one only
// after that job completes, so a later request is coalesced into one job.
// A log with nothing left to sync tells its replica at once. A runtime
// calls it at the end of each pass of its loop, after the pass has handed
// the node every input it had, runs the jobs off the loop, and hands each
// outcome back with Synced: tide serve on I/O workers, the simulator as
// events of its slow disk. Nothing a sync lets out (acks=all answers, a
// follower's next fetch offset: rule unsynced-ack) leaves before Synced,
// since the replica holds it back until told what is durable.
func (n *Node) TakeSyncs(limit int) []SyncJob {
	list := make([]metadata.TopicPartition, 0, len(n.unsynced))
	for tp := range n.unsynced {
		if !n.syncBusy(tp) {
			list = append(list, tp)
		}
	}
	sortPartitions(list)
	var jobs []SyncJob
	for _, tp := range list {
		if len(jobs) >= limit {
			break
		}
		delete(n.unsynced, tp)
		p, ok := n.partitions[tp]
		if !ok {
			continue
		}
		job, ok := p.log.BeginSync()
		if !ok {
			n.reportDurable(tp, p)
			continue
		}
		n.syncing[tp] = p.log
		jobs = append(jobs, SyncJob{Partition: tp, job: job})
	}
	return jobs
}

// Synced is the second half: a job's outcome, handed back on the node
// loop. It records what the job made durable and tells the replica, which
// lets out what waited for it; a failed sync takes the partition offline
// (a failed fsync is never retried: docs/storage.md). The outcome of a job
// whose log the node closed since is dropped.
func (n *Node) Synced(job SyncJob, runErr error) {
	tp := job.Partition
	if n.syncing[tp] == job.job.Log() {
		delete(n.syncing, tp)
	}
	p, ok := n.partitions[tp]
	if !ok || p.log != job.job.Log() {
		return
	}
	durable, err := p.log.CompleteSync(job.job, runErr)
	if errors.Is(err, commitlog.ErrClosed) {
		return // the node closed its logs (Close): nothing waits any more
	}
	if err != nil {
		n.fail(tp, err)
		return
	}
	if durable < job.job.EndOffset() {
		// The job was outdated (a truncation, a deletion of segments, the
		// cleaner retiring one): what it was for is synced by the next,
		// which nothing else may ask for.
		n.unsynced[tp] = true
	}
	p.replica.Synced(durable)
	n.process(tp, p)
}

// SyncDirty syncs every log a replica asked to sync, on the calling
// goroutine: TakeSyncs, Run and Synced in a row. For tests and the
// simulator's scripted steps; a runtime's loop never waits for a sync.
func (n *Node) SyncDirty() {
	for _, job := range n.TakeSyncs(len(n.unsynced)) {
		n.Synced(job, job.Run())
	}
}

// reportDurable answers a sync request that needs no job: the log is
// durable to its end already (a truncation synced it, or a job covered
// the appends), and the replica is told so; or the log failed, and the
// partition goes offline. Log.Sync finds nothing to sync here, so no
// fsync runs on the loop.
func (n *Node) reportDurable(tp metadata.TopicPartition, p *partition) {
	if err := p.log.Sync(); err != nil {
		n.fail(tp, err)
		return
	}
	p.replica.Synced(p.log.DurableEndOffset())
	n.process(tp, p)
}
