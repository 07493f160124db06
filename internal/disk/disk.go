// Package disk is the only file API in tide. Everything that persists state
// (partition logs, indexes, checkpoints, the metadata log) goes through an FS,
// so that the same code runs on real files (OS), on a crashable in-memory
// filesystem (Mem) in the simulator and crash tests, and under injected faults
// (Faulty).
//
// The model every implementation follows, and every caller must assume:
//
//   - Files are append-only: Write always appends at the current end of the
//     file; Truncate is the only way to make a file shorter. Reads are
//     positional (ReadAt) and never move the append position.
//   - Nothing written is durable until File.Sync returns nil. A crash may keep
//     any prefix of the unsynced writes of a file, and the last kept write may
//     be torn: only a prefix of its bytes survives, possibly followed by
//     garbage up to its full length (the size reached the disk, the data did
//     not).
//   - Creating, renaming and removing a file changes its directory, and that
//     change is durable only once SyncDir on the directory returns nil. A
//     rename between two directories needs SyncDir on both.
//   - Directories themselves are durable when MkdirAll, or Remove or Rename
//     of a directory, returns (OS syncs the parents before returning).
//   - Truncate only shrinks: growing a file is an error.
//   - A failed Sync leaves the file in an unknown state. Callers must treat it
//     as fatal for whatever the file holds and never retry and carry on
//     (the "fsyncgate" lesson: after a failed fsync the kernel may already have
//     dropped the dirty pages).
//
// Names are slash-separated paths, joined with path.Join by callers.
//
// A File returned by the OS implementation also implements OSFile, so the
// server can hand its bytes to the socket without copying (sendfile).
package disk

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// FS is a filesystem. All methods are safe for concurrent use.
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens
	// it for reading and appending.
	Create(name string) (File, error)
	// Open opens an existing file for reading and appending.
	Open(name string) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	// Stat returns the size in bytes of the named file.
	Stat(name string) (int64, error)
}

// File is an open file. ReadAt may be called concurrently with other ReadAt
// calls and with Write; Sync may be called concurrently with Write (a
// partition log syncs on an I/O worker while its owner appends) and then
// makes durable at least every Write that completed before it was called;
// Write and Truncate, and Truncate and Sync, must not race with each other
// (the owner serialises them).
type File interface {
	io.ReaderAt
	// Write appends p at the end of the file.
	Write(p []byte) (int, error)
	// Truncate changes the size of the file; it never grows the append
	// position beyond what was written.
	Truncate(size int64) error
	// Sync makes every completed Write and Truncate durable.
	Sync() error
	// Size returns the current size of the file, durable or not.
	Size() (int64, error)
	// Close releases the file. It does not sync.
	Close() error
	// Name returns the path the file was opened with.
	Name() string
}

// ErrNotExist is returned (wrapped) when a named file or directory is
// missing. It is fs.ErrNotExist, so errors.Is works the same on every FS.
var ErrNotExist = fs.ErrNotExist

// ErrClosed is returned by operations on a closed File.
var ErrClosed = errors.New("disk: file already closed")

// OSFile is implemented by files backed by a real operating-system file.
type OSFile interface {
	OSFile() *os.File
}
