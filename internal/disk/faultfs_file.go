// The FS methods and the File of FaultyFS. The fault model is in faultfs.go.

package disk

import (
	"path"
	"syscall"
	"time"
)

// Create implements FS. Truncating an existing file frees its space.
func (f *FaultyFS) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	freedBytes := f.sizeOrZero(name)
	inner, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	f.release(freedBytes)
	return &faultyFile{fs: f, inner: inner}, nil
}

// Open implements FS.
func (f *FaultyFS) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, inner: inner}, nil
}

// Remove implements FS.
func (f *FaultyFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	freedBytes := f.sizeOrZero(name)
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	f.release(freedBytes)
	return nil
}

// Rename implements FS. Replacing a file frees its space.
func (f *FaultyFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	var freedBytes int64
	if path.Clean(oldname) != path.Clean(newname) {
		freedBytes = f.sizeOrZero(newname)
	}
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	f.release(freedBytes)
	return nil
}

// MkdirAll implements FS.
func (f *FaultyFS) MkdirAll(dir string) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

// List implements FS.
func (f *FaultyFS) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

// SyncDir implements FS, with SyncLatency and SyncDirErrorProbability.
func (f *FaultyFS) SyncDir(dir string) error {
	f.mu.Lock()
	latency := f.delay(f.config.SyncLatency)
	err := f.fault(OpSyncDir, dir, f.config.SyncDirErrorProbability)
	f.mu.Unlock()
	f.wait(latency)
	if err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// Stat implements FS.
func (f *FaultyFS) Stat(name string) (int64, error) {
	if err := f.check(OpStat, name); err != nil {
		return 0, err
	}
	return f.inner.Stat(name)
}

// reserve takes up to n bytes of space and returns how many it got. The
// caller holds f.mu.
func (f *FaultyFS) reserve(n int) int {
	limit := f.config.SpaceLimitBytes
	if f.enabled && limit > 0 {
		n = int(min(int64(n), max(0, limit-f.usedBytes)))
	}
	f.usedBytes += int64(n)
	return n
}

// planWrite decides the fate of a Write of size bytes: how many bytes to
// pass to the inner file, the error to return after them, and the latency.
func (f *FaultyFS) planWrite(file *faultyFile, size int) (allowed int, latency time.Duration, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if file.poison != nil {
		return 0, 0, file.poison
	}
	latency = f.delay(f.config.WriteLatency)
	if err := f.fault(OpWrite, file.Name(), f.config.WriteErrorProbability); err != nil {
		if size > 0 && f.chance(f.config.PartialWriteProbability) {
			allowed = f.random.IntN(size)
		}
		return f.reserve(allowed), latency, err
	}
	allowed = f.reserve(size)
	if allowed < size {
		f.injected++
		return allowed, latency, &injectedError{op: OpWrite, name: file.Name(), err: syscall.ENOSPC}
	}
	return allowed, latency, nil
}

// planSync decides whether a Sync fails, and its latency. A failure
// poisons the file.
func (f *FaultyFS) planSync(file *faultyFile) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if file.poison != nil {
		return 0, file.poison
	}
	latency := f.delay(f.config.SyncLatency)
	err := f.fault(OpSync, file.Name(), f.config.SyncErrorProbability)
	if err != nil {
		file.poison = err
	}
	return latency, err
}

// faultyFile is a File of FaultyFS. It does not implement OSFile even when
// the inner file does: handing out the *os.File would bypass injection.
type faultyFile struct {
	fs    *FaultyFS
	inner File
	// poison is the error of the Sync that failed on this handle, returned
	// by every later Write, Truncate and Sync. Guarded by fs.mu.
	poison error
}

// ReadAt implements io.ReaderAt. Only triggers inject read faults.
func (f *faultyFile) ReadAt(p []byte, offset int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, offset)
}

// Write implements File.
func (f *faultyFile) Write(p []byte) (int, error) {
	allowed, latency, injected := f.fs.planWrite(f, len(p))
	f.fs.wait(latency)
	n := 0
	if allowed > 0 {
		var err error
		n, err = f.inner.Write(p[:allowed])
		f.fs.release(int64(allowed - n))
		if err != nil {
			return n, err
		}
	}
	return n, injected
}

// Truncate implements File.
func (f *faultyFile) Truncate(size int64) error {
	if err := f.poisonOrTrigger(OpTruncate); err != nil {
		return err
	}
	before, err := f.inner.Size()
	if err != nil {
		return err
	}
	if err := f.inner.Truncate(size); err != nil {
		return err
	}
	f.fs.release(before - size)
	return nil
}

func (f *faultyFile) poisonOrTrigger(op Op) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.poison != nil {
		return f.poison
	}
	return f.fs.fault(op, f.Name(), 0)
}

// Sync implements File. A failure, injected or real, poisons the handle.
func (f *faultyFile) Sync() error {
	latency, err := f.fs.planSync(f)
	f.fs.wait(latency)
	if err != nil {
		return err
	}
	if err := f.inner.Sync(); err != nil {
		f.fs.mu.Lock()
		f.poison = err
		f.fs.mu.Unlock()
		return err
	}
	return nil
}

// Size implements File.
func (f *faultyFile) Size() (int64, error) { return f.inner.Size() }

// Close implements File.
func (f *faultyFile) Close() error { return f.inner.Close() }

// Name implements File.
func (f *faultyFile) Name() string { return f.inner.Name() }
