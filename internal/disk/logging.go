package disk

import (
	"fmt"
	"path"
	"sync"
)

// LoggingFS records the durability-relevant operations on an FS (file
// creations, removals, renames, directory syncs, file syncs and
// truncations, and with LogWrites every write) as one line each, so that
// datadriven tests can show them in their expected output, as pebble's WAL
// tests do. It is for tests; it changes nothing it passes on.
type LoggingFS struct {
	FS
	// LogWrites records writes too, with their sizes.
	LogWrites bool
	mu        sync.Mutex
	ops       []string
}

func (f *LoggingFS) log(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, fmt.Sprintf(format, args...))
}

// Take returns and clears the recorded operations.
func (f *LoggingFS) Take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ops := f.ops
	f.ops = nil
	return ops
}

// Create creates a file and records it.
func (f *LoggingFS) Create(name string) (File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	f.log("create %s", path.Base(name))
	return &loggingFile{File: file, fs: f}, nil
}

// Open opens a file whose later changes are recorded.
func (f *LoggingFS) Open(name string) (File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &loggingFile{File: file, fs: f}, nil
}

// Remove records and removes a file.
func (f *LoggingFS) Remove(name string) error {
	f.log("remove %s", path.Base(name))
	return f.FS.Remove(name)
}

// Rename records and renames a file.
func (f *LoggingFS) Rename(oldname, newname string) error {
	f.log("rename %s -> %s", path.Base(oldname), path.Base(newname))
	return f.FS.Rename(oldname, newname)
}

// SyncDir records and syncs a directory.
func (f *LoggingFS) SyncDir(dir string) error {
	f.log("sync-dir")
	return f.FS.SyncDir(dir)
}

type loggingFile struct {
	File
	fs *LoggingFS
}

func (f *loggingFile) Write(p []byte) (int, error) {
	if f.fs.LogWrites {
		f.fs.log("write %s %d bytes", path.Base(f.Name()), len(p))
	}
	return f.File.Write(p)
}

func (f *loggingFile) Sync() error {
	f.fs.log("sync %s", path.Base(f.Name()))
	return f.File.Sync()
}

func (f *loggingFile) Truncate(size int64) error {
	f.fs.log("truncate %s to %d", path.Base(f.Name()), size)
	return f.File.Truncate(size)
}
