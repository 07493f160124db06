package quorum

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/metadata"
)

// Ready is the work a node hands its driver, to be carried out in this
// order before Advance:
//
//  1. Snapshot, HardState and Entries must be durable in the storage
//     (a snapshot installed, the entries appended, replacing any
//     conflicting suffix) BEFORE any of Messages is sent: raft's votes and
//     acknowledgements promise what the node has persisted (Raft thesis
//     3.8; etcd/raft's Ready contract). MustSync says whether an fsync is
//     needed for that.
//  2. Messages go to the other controllers, in order per destination.
//  3. Answers go to brokers, at any time: they report only committed
//     metadata, which a majority holds already.
//  4. TakeSnapshot, when set, is stored and the log compacted below it;
//     it may be done at any time before the next Ready.
type Ready struct {
	HardState *raftpb.HardState
	Entries   []*raftpb.Entry
	Snapshot  *raftpb.Snapshot
	MustSync  bool
	Messages  []*raftpb.Message

	Answers      []Answer
	TakeSnapshot *SnapshotRequest

	raft *raft.Ready
}

// SnapshotRequest asks the driver to store a snapshot of the image as of
// raft index Index, then compact the log up to it.
type SnapshotRequest struct {
	Index     uint64
	ConfState *raftpb.ConfState
	// Data is the encoded metadata.Image.
	Data []byte
}

// HasReady reports whether Ready has work.
func (q *Quorum) HasReady() bool {
	return len(q.out) > 0 || q.snapshot != nil || q.raw.HasReady()
}

// Ready returns the work to carry out. Call Advance after it, before the
// next Ready.
func (q *Quorum) Ready() Ready {
	if q.ready != nil {
		panic("quorum: Ready called twice without Advance")
	}
	var ready Ready
	if q.raw.HasReady() {
		rd := q.raw.Ready()
		q.ready = &rd
		ready = Ready{HardState: rd.HardState, Entries: rd.Entries, Snapshot: rd.Snapshot, MustSync: rd.MustSync,
			Messages: rd.Messages, raft: &rd}
		if raft.IsEmptySnap(ready.Snapshot) {
			ready.Snapshot = nil
		}
		if raft.IsEmptyHardState(ready.HardState) {
			ready.HardState = nil
		}
	}
	ready.Answers, q.out = q.out, nil
	ready.TakeSnapshot, q.snapshot = q.snapshot, nil
	return ready
}

// Advance says the last Ready was carried out. The node installs a
// received snapshot, applies the newly committed entries to its image,
// releases the answers that waited for them, and may ask for a snapshot.
// An error means the metadata log holds something the image refuses: the
// node must stop (it is a bug or corruption, never an operating error).
func (q *Quorum) Advance() error {
	rd := q.ready
	q.ready = nil
	if rd == nil {
		return nil
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := q.loadSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	for _, entry := range rd.CommittedEntries {
		if err := q.applyEntry(entry); err != nil {
			return err
		}
	}
	q.raw.Advance(*rd)
	q.observeRole()
	q.releaseWaiting()
	q.releasePolls()
	q.maybeSnapshot()
	return nil
}

// applyEntry applies one committed raft entry.
func (q *Quorum) applyEntry(entry *raftpb.Entry) error {
	index := entry.GetIndex()
	if index <= q.applied {
		return nil // below a snapshot just installed
	}
	if index != q.applied+1 {
		return fmt.Errorf("quorum: applying index %d after %d", index, q.applied)
	}
	q.applied = index
	switch entry.GetType() {
	case raftpb.EntryConfChange:
		var change raftpb.ConfChange
		if err := proto.Unmarshal(entry.GetData(), &change); err != nil {
			return fmt.Errorf("quorum: index %d: %w", index, err)
		}
		q.confState = q.raw.ApplyConfChange(&change)
		return nil
	case raftpb.EntryNormal:
	default:
		return fmt.Errorf("quorum: index %d: unexpected entry type %v", index, entry.GetType())
	}
	if len(entry.GetData()) == 0 {
		// A leader's first entry of its term: once applied, every entry of
		// earlier terms is, and the leader may decide.
		if q.leader == q.config.ID && entry.GetTerm() == q.term && !q.active {
			q.activate()
		}
		return nil
	}
	proposal, err := decodeProposal(entry.GetData())
	if err != nil {
		return fmt.Errorf("quorum: index %d: %w", index, err)
	}
	for _, record := range proposal.records {
		if err := q.applyRecord(record); err != nil {
			return fmt.Errorf("quorum: index %d: %w", index, err)
		}
	}
	if q.active && proposal.term == q.activeTerm && proposal.controller == q.config.ID {
		q.appliedProposal = proposal.sequence
	}
	return nil
}

// applyRecord applies one record at the next metadata offset. Offsets are
// counted over records, so every node gives each the same one.
func (q *Quorum) applyRecord(record metadata.Record) error {
	entry := metadata.Entry{Offset: q.image.Offset() + 1, Record: record}
	if _, err := q.image.Apply(entry); err != nil {
		return err
	}
	q.history = append(q.history, entry)
	if len(q.history) > q.config.MaxHistoryEntries {
		// Keep the newer half: trimming one at a time would copy on
		// every record.
		keep := max(1, q.config.MaxHistoryEntries/2)
		q.history = append([]metadata.Entry(nil), q.history[len(q.history)-keep:]...)
	}
	return nil
}

// loadSnapshot replaces the image with a snapshot's.
func (q *Quorum) loadSnapshot(snapshot *raftpb.Snapshot) error {
	img, err := metadata.DecodeImage(snapshot.GetData())
	if err != nil {
		return fmt.Errorf("quorum: snapshot at index %d: %w", snapshot.GetMetadata().GetIndex(), err)
	}
	if q.active {
		// raft sends snapshots only to followers.
		panic("quorum: the active controller was sent a snapshot")
	}
	q.image, q.history = img, nil
	q.applied = snapshot.GetMetadata().GetIndex()
	q.snapshotIndex = q.applied
	q.confState = snapshot.GetMetadata().GetConfState()
	return nil
}

// maybeSnapshot asks for a snapshot once enough entries were applied since
// the last.
func (q *Quorum) maybeSnapshot() {
	if q.applied-q.snapshotIndex < q.config.SnapshotEntries || q.confState == nil {
		return
	}
	q.snapshot = &SnapshotRequest{Index: q.applied, ConfState: q.confState, Data: metadata.EncodeImage(nil, q.image)}
	q.snapshotIndex = q.applied
}

// Storage is what a driver persists a Ready into: raft.Storage to read,
// and the writes. raft's MemoryStorage and internal/raftlog's Storage are
// both one.
type Storage interface {
	raft.Storage
	ApplySnapshot(snapshot *raftpb.Snapshot) error
	Append(entries []*raftpb.Entry) error
	SetHardState(hardState *raftpb.HardState) error
	CreateSnapshot(index uint64, confState *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error)
	Compact(index uint64) error
}

// Persist carries out step 1 of the Ready: the snapshot, the entries, then
// the hard state (whose commit index may name the entries). It is durable
// when it returns if the storage's writes are.
func (rd Ready) Persist(storage Storage) error {
	if rd.Snapshot != nil {
		if err := storage.ApplySnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("quorum: installing a snapshot: %w", err)
		}
	}
	if len(rd.Entries) > 0 {
		if err := storage.Append(rd.Entries); err != nil {
			return fmt.Errorf("quorum: appending entries: %w", err)
		}
	}
	if rd.HardState != nil {
		if err := storage.SetHardState(rd.HardState); err != nil {
			return fmt.Errorf("quorum: saving the hard state: %w", err)
		}
	}
	return nil
}

// StoreSnapshot carries out step 4: it stores the snapshot asked for and
// compacts the log up to it.
func (rd Ready) StoreSnapshot(storage Storage) error {
	if rd.TakeSnapshot == nil {
		return nil
	}
	s := rd.TakeSnapshot
	if _, err := storage.CreateSnapshot(s.Index, s.ConfState, s.Data); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return fmt.Errorf("quorum: storing a snapshot: %w", err)
	}
	if err := storage.Compact(s.Index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return fmt.Errorf("quorum: compacting: %w", err)
	}
	return nil
}
