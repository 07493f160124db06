package sim

import (
	"sort"

	"github.com/tidelog/tide/internal/broker"
)

// A simulated broker's disk syncs as tide serve's I/O workers do
// (internal/server/syncer.go, docs/storage.md "The sync pipeline"): at each
// step the broker hands out its sync jobs (broker.Node.TakeSyncs), each
// becomes an event of the machine's disk, and the job runs (memfs makes
// the data durable) only when the event completes, followed at once by its
// outcome to the node (broker.Node.Synced). A slow disk (syncRate below 1)
// completes nothing on most ticks, and gives each job a seeded extra
// latency, so jobs of different logs complete out of the order they
// began in. A crash or a power loss loses the events still pending: what
// they would have synced is lost with them, unless a later sync covered it.

// syncLatencyTicksMax bounds a slow disk's extra latency per job.
const syncLatencyTicksMax = 6

// maxSyncsPending bounds a machine's pending sync events, as
// maxSyncsInFlight bounds tide serve's.
const maxSyncsPending = 1024

// pendingSync is one sync job on its way through a machine's disk.
type pendingSync struct {
	job broker.SyncJob
	// readyAt is the tick from which it may complete; sequence orders jobs
	// that are ready at the same tick.
	readyAt  int64
	sequence uint64
}

// diskState is a machine's sync pipeline.
type diskState struct {
	pending  []pendingSync
	sequence uint64
}

// beginSyncs turns the node's sync jobs into pending events of its disk.
func (w *world) beginSyncs(b *brokerProcess) {
	room := maxSyncsPending - len(b.syncs.pending)
	if room <= 0 || !b.node.Dirty() {
		return
	}
	for _, job := range b.node.TakeSyncs(room) {
		readyAt := w.now
		if w.shape.syncRate < 1 {
			readyAt += w.diskRandom.Int64N(syncLatencyTicksMax + 1)
		}
		b.syncs.sequence++
		b.syncs.pending = append(b.syncs.pending, pendingSync{job: job, readyAt: readyAt, sequence: b.syncs.sequence})
	}
}

// completeSyncs completes the pending syncs that are ready, in the order
// they became ready: each job runs on the machine's memfs, then its outcome
// goes to the node. all completes every one, ready or not (a script's
// sync step).
func (w *world) completeSyncs(b *brokerProcess, all bool) {
	pending := b.syncs.pending
	sort.SliceStable(pending, func(i, j int) bool {
		if pending[i].readyAt != pending[j].readyAt {
			return pending[i].readyAt < pending[j].readyAt
		}
		return pending[i].sequence < pending[j].sequence
	})
	kept := pending[:0]
	var due []pendingSync
	for _, p := range pending {
		if all || p.readyAt <= w.now {
			due = append(due, p)
		} else {
			kept = append(kept, p)
		}
	}
	b.syncs.pending = kept
	for _, p := range due {
		b.node.Synced(p.job, p.job.Run())
	}
}

// loseSyncs drops the pending syncs of a machine that stops.
func (b *brokerProcess) loseSyncs() { b.syncs = diskState{} }
