package server

import (
	"sync"

	"github.com/tidelog/tide/internal/broker"
)

// The node loop never waits for a disk write or sync (docs/storage.md,
// "The sync pipeline"): at the end of each pass it takes the broker's sync
// jobs (broker.Node.TakeSyncs), hands them to a small pool of I/O workers,
// and goes on; each worker runs a job's write(2)s of the appended bytes
// and its fsync, and posts its outcome back to
// the loop as an event (eventSynced), which hands it to the node
// (broker.Node.Synced) like any other input. The node keeps at most one job
// per log out and coalesces later requests into the next, so a worker pool
// of a few goroutines syncs several logs at once and never one log twice
// at the same time.
const (
	// syncWorkers is how many fsyncs run at once: enough for the logs of a
	// busy broker to sync side by side on one disk (fsyncs of different
	// files overlap in the kernel and the device's queue), few enough to
	// stay out of the CPU's way.
	syncWorkers = 4
	// maxSyncsInFlight bounds the jobs handed to the workers and not yet
	// completed; the loop takes more from the node only as they complete.
	maxSyncsInFlight = 1024
)

// syncer is the server's side of the sync pipeline. Only the node loop
// calls start and completed; the workers only read jobs.
type syncer struct {
	jobs chan syncJob
	// out counts the jobs sent to the workers and not yet back, on the
	// node loop.
	out     int
	workers sync.WaitGroup
}

// syncJob is a job and the node it came from: the node of another
// incarnation must not get its outcome.
type syncJob struct {
	node *broker.Node
	job  broker.SyncJob
}

// startSyncWorkers starts the pool; stopSyncWorkers ends it.
func (s *Server) startSyncWorkers() {
	s.syncs.jobs = make(chan syncJob, maxSyncsInFlight)
	for range syncWorkers {
		s.syncs.workers.Add(1)
		go s.syncWorker()
	}
}

// syncWorker runs jobs until the channel closes. An outcome for a loop
// that has stopped is dropped: the node closes its logs on the way out,
// which waits for a running sync and makes the queued ones no-ops.
func (s *Server) syncWorker() {
	defer s.syncs.workers.Done()
	for job := range s.syncs.jobs {
		err := job.job.Run()
		traceAck(s.config.ID, ackSyncRun)
		s.post(event{kind: eventSynced, sync: job, syncErr: err})
	}
}

// stopSyncWorkers closes the job channel and waits for the workers, after
// the node loop has stopped (no more jobs are sent).
func (s *Server) stopSyncWorkers() {
	if s.syncs.jobs == nil {
		return
	}
	close(s.syncs.jobs)
	s.syncs.workers.Wait()
}

// startSyncs hands the node's sync jobs to the workers, as many as the
// bound leaves room for; the rest stay with the node until jobs complete.
// The channel holds maxSyncsInFlight, so sending never blocks the loop.
func (s *Server) startSyncs(node *broker.Node) {
	room := maxSyncsInFlight - s.syncs.out
	if room <= 0 || !node.Dirty() {
		return
	}
	for _, job := range node.TakeSyncs(room) {
		s.syncs.out++
		s.syncs.jobs <- syncJob{node: node, job: job}
		traceAck(s.config.ID, ackSyncBegin)
	}
}

// handleSynced hands a job's outcome to the node it came from.
func (s *Server) handleSynced(e event) {
	s.syncs.out--
	if node := s.lifecycle.Node(); node == e.sync.node {
		node.Synced(e.sync.job, e.syncErr)
	}
	traceAck(s.config.ID, ackSyncHandled)
}
