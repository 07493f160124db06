// Package raftlog is the durable storage of tide's metadata quorum: the
// raft log, hard state and snapshot that go.etcd.io/raft/v3 runs on. A
// Storage implements raft.Storage for the RawNode to read, and gives the
// node's Ready loop the writes it needs (Save, or Append, SetHardState and
// ApplySnapshot), each durable when it returns, so that the loop can follow
// raft's contract: persist Ready's entries, hard state and snapshot BEFORE
// sending Ready's messages (a vote or an append acknowledgement sent before
// its state is on disk can be forgotten by a crash and given twice, Raft
// thesis section 3.8).
//
// The format, the durability contract and recovery are described in
// docs/raftlog.md. A Storage does no I/O except through disk.FS, starts no
// goroutine, and reads no clock or global randomness.
package raftlog

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Storage is one raft node's durable log, hard state and snapshot.
//
// Invariants, checked at open and kept by every write:
//   - entries[0] is a dummy holding the index and term of the entry before
//     the first available one (the compaction point), as in
//     raft.MemoryStorage; entries[1:] are contiguous with non-decreasing
//     terms.
//   - The segments hold, contiguously, at least the entries from
//     FirstIndex() to LastIndex() (the first may also hold compacted ones),
//     and the last segment ends at LastIndex().
//   - The snapshot's index lies in [FirstIndex()-1, LastIndex()], and the
//     hard state's commit is at most LastIndex().
//
// All methods are safe for concurrent use; the node's loop is expected to
// be the only writer.
type Storage struct {
	mu  sync.Mutex
	cfg Config
	// entries holds every live entry in memory: the metadata log is kept
	// short by snapshots, and raft reads its tail on every append.
	entries []*pb.Entry
	// segments are the entry log's files in index order; never empty.
	segments []*segment
	// hardState is the durable hard state; nil if none was ever saved.
	hardState *pb.HardState
	// snapshot is the durable snapshot, an empty one if none.
	snapshot *pb.Snapshot
	recovery RecoveryReport
	// failed is set by the first failed write: the files are then in an
	// unknown state and every later call returns it.
	failed error
	closed bool
}

// Open opens (creating if needed) the storage in cfg.Dir and recovers it:
// see recover.
func Open(cfg Config) (*Storage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	s := &Storage{cfg: cfg.withDefaults(), snapshot: pb.EnsureSnapshot(nil)}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// Recovery returns what Open found and repaired.
func (s *Storage) Recovery() RecoveryReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recovery
}

// Close closes the files. It does not sync: everything reported written
// already is.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return s.closeFiles()
}

func (s *Storage) closeFiles() error {
	var first error
	for _, segment := range s.segments {
		if err := segment.file.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// usable returns why the storage cannot serve a call, or nil.
func (s *Storage) usable() error {
	if s.closed {
		return ErrClosed
	}
	return s.failed
}

// fail records a write failure; see Storage.failed.
func (s *Storage) fail(err error) error {
	if s.failed == nil {
		s.failed = &failedError{cause: err}
	}
	return s.failed
}

func (s *Storage) offset() uint64    { return s.entries[0].GetIndex() }
func (s *Storage) lastIndex() uint64 { return s.offset() + uint64(len(s.entries)) - 1 }

// InitialState implements raft.Storage: the durable hard state (nil if none)
// and the configuration of the snapshot.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, nil, err
	}
	var hs *pb.HardState
	if s.hardState != nil {
		hs = proto.Clone(s.hardState).(*pb.HardState)
	}
	cs := proto.Clone(pb.EnsureConfState(s.snapshot.GetMetadata().GetConfState())).(*pb.ConfState)
	return hs, cs, nil
}

// Entries implements raft.Storage: the entries [lo, hi), at least one and
// then as many as fit maxSize bytes of protobuf encoding, as raft counts
// them. It returns raft.ErrCompacted if lo is compacted and
// raft.ErrUnavailable if [lo, hi) goes past the last index. The caller may
// append to the returned slice but must not modify its entries.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	offset := s.offset()
	if lo <= offset {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	if len(s.entries) == 1 {
		return nil, raft.ErrUnavailable
	}
	entries := limitSize(s.entries[lo-offset:hi-offset], maxSize)
	// The full slice expression makes an append by the caller copy
	// instead of overwriting s.entries.
	return entries[:len(entries):len(entries)], nil
}

// limitSize returns the longest prefix of entries whose encoded size is at
// most maxSize, but at least one entry: raft's own rule (util.go).
func limitSize(entries []*pb.Entry, maxSize uint64) []*pb.Entry {
	if len(entries) == 0 {
		return entries
	}
	size := uint64(proto.Size(entries[0]))
	for limit := 1; limit < len(entries); limit++ {
		size += uint64(proto.Size(entries[limit]))
		if size > maxSize {
			return entries[:limit]
		}
	}
	return entries
}

// Term implements raft.Storage: the term of entry i, for i in
// [FirstIndex()-1, LastIndex()].
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	offset := s.offset()
	if i < offset {
		return 0, raft.ErrCompacted
	}
	if i > s.lastIndex() {
		return 0, raft.ErrUnavailable
	}
	return s.entries[i-offset].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	return s.lastIndex(), nil
}

// FirstIndex implements raft.Storage. After a reopen it may be lower than
// before: compaction removes whole segment files, and the entries left in
// the first remaining one are available again.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	return s.offset() + 1, nil
}

// Snapshot implements raft.Storage: a copy of the latest durable snapshot.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	return proto.Clone(s.snapshot).(*pb.Snapshot), nil
}

var _ raft.Storage = (*Storage)(nil)
