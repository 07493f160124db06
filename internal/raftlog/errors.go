package raftlog

import (
	"errors"
	"fmt"
)

// Operating errors: the call cannot be served, the storage is fine. The
// raft.Storage read methods return raft's own sentinels (raft.ErrCompacted,
// raft.ErrUnavailable, raft.ErrSnapOutOfDate) unwrapped, because raft
// compares them with ==.
var (
	// ErrClosed is returned by every call on a closed Storage.
	ErrClosed = errors.New("raftlog: storage closed")
	// ErrCompactBeyondSnapshot is returned by Compact for an index above
	// the snapshot: the entries would then exist nowhere on this node.
	ErrCompactBeyondSnapshot = errors.New("raftlog: compaction beyond the snapshot index")
	// ErrInvalidWrite is wrapped by errors for writes that raft never
	// makes: a gap in the log, terms going backwards, a truncation of
	// committed entries, a hard state whose term or commit goes backwards
	// or whose vote changes within a term, an entry above MaxEntryBytes.
	// Nothing is written; the storage stays usable.
	ErrInvalidWrite = errors.New("raftlog: invalid write")
)

// ErrFailed is wrapped by every error a Storage returns after a write or
// sync failed. A failed fsync leaves the file in an unknown state (the
// kernel may already have dropped the dirty pages, the "fsyncgate" lesson),
// so the storage stops instead of retrying: the node must reopen it, which
// recovers from what is on disk.
var ErrFailed = errors.New("raftlog: storage failed")

type failedError struct{ cause error }

func (e *failedError) Error() string   { return fmt.Sprintf("raftlog: storage failed: %v", e.cause) }
func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.cause} }

// ErrDamaged is the cause (wrapped) of every damaged record: a bad
// checksum, a length past the end of the file or above its limit, bytes
// that do not decode, an entry out of sequence.
var ErrDamaged = errors.New("damaged record")

// CorruptionError reports damage that recovery refuses to repair by cutting,
// because the damaged bytes were durable: a segment other than the last
// (it was synced before the next one was created), an entry at or below
// the durable commit index (entries are synced before the hard state that
// commits them), a damaged record followed by a valid one (a crash tears
// only the end of the last write), a damaged hard-state or snapshot file
// (they are replaced atomically, so a crash never leaves them half
// written), or files that contradict each other.
type CorruptionError struct {
	// File is the damaged file's path.
	File string
	// Position is the byte offset of the damaged record in File.
	Position int64
	// Index is the raft index the damaged record was expected to hold,
	// or zero when the damage is not in an entry.
	Index uint64
	Cause error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("raftlog: corrupt durable data in %s at byte %d (index %d): %v", e.File, e.Position, e.Index, e.Cause)
}

func (e *CorruptionError) Unwrap() error { return e.Cause }
