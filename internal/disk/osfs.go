// OSFS: the FS of real files, used in production.
//
// Fault model: whatever the operating system and device do. This file adds
// no faults and hides none: errors come back as the os package returns them
// (so errors.Is(err, syscall.EIO) and fs.ErrNotExist work), except that an
// operation on a closed File also wraps ErrClosed. The durability rules of
// disk.go hold only as far as the device honours fsync; a device that lies
// about flushing is outside the model.

package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// OSFS is the FS of real files. Names are passed to the os package as they
// are (slash-separated, which is native on the platforms tide runs on).
type OSFS struct{}

// OS returns the FS of real files.
func OS() FS { return OSFS{} }

const (
	filePermissions      = 0o644
	directoryPermissions = 0o755
)

// Create implements FS.
func (OSFS) Create(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_TRUNC)
}

// Open implements FS.
func (OSFS) Open(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_APPEND)
}

func openOS(name string, flags int) (File, error) {
	file, err := os.OpenFile(name, flags, filePermissions)
	if err != nil {
		return nil, err
	}
	return &osFile{file: file, name: name}, nil
}

// Remove implements FS. Removing a directory syncs its parent before
// returning, because MemFS treats directory removal as durable at once and
// the two must agree.
func (OSFS) Remove(name string) error {
	info, err := os.Lstat(name)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	if info.IsDir() {
		return syncDirectory(path.Dir(name))
	}
	return nil
}

// Rename implements FS. Renaming a directory syncs both parents before
// returning, for the same reason as Remove.
func (OSFS) Rename(oldname, newname string) error {
	info, err := os.Lstat(oldname)
	if err != nil {
		return err
	}
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	if !info.IsDir() {
		return nil
	}
	if err := syncDirectory(path.Dir(newname)); err != nil {
		return err
	}
	if path.Dir(oldname) == path.Dir(newname) {
		return nil
	}
	return syncDirectory(path.Dir(oldname))
}

// MkdirAll implements FS. It syncs the parent of every directory it creates,
// so that new directories are durable when it returns, as in MemFS.
func (OSFS) MkdirAll(dir string) error {
	var missing []string
	for name := path.Clean(dir); ; name = path.Dir(name) {
		_, err := os.Lstat(name)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || name == path.Dir(name) {
			break
		}
		missing = append(missing, name)
	}
	if err := os.MkdirAll(dir, directoryPermissions); err != nil {
		return err
	}
	for _, name := range missing {
		if err := syncDirectory(path.Dir(name)); err != nil {
			return err
		}
	}
	return nil
}

// List implements FS.
func (OSFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// os.ReadDir sorts by file name.
	names := make([]string, len(entries))
	for i, entry := range entries {
		names[i] = entry.Name()
	}
	return names, nil
}

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	return syncDirectory(dir)
}

func syncDirectory(dir string) error {
	directory, err := os.Open(dir)
	if err != nil {
		return err
	}
	syncErr := directory.Sync()
	closeErr := directory.Close()
	if syncErr != nil {
		return syncErr
	}
	return closeErr
}

// Stat implements FS. A directory is an error (EISDIR), as in MemFS.
func (OSFS) Stat(name string) (int64, error) {
	info, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	if info.IsDir() {
		return 0, &fs.PathError{Op: "stat", Path: name, Err: syscall.EISDIR}
	}
	return info.Size(), nil
}

// osFile is an open OS file. It implements OSFile.
type osFile struct {
	file *os.File
	name string
}

// withClosed makes an os "file already closed" error also wrap ErrClosed,
// so callers test for one error on every FS. Other errors, io.EOF included,
// pass through unchanged.
func withClosed(err error) error {
	if err != nil && errors.Is(err, fs.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// ReadAt implements io.ReaderAt.
func (f *osFile) ReadAt(p []byte, offset int64) (int, error) {
	n, err := f.file.ReadAt(p, offset)
	return n, withClosed(err)
}

// Write implements File. O_APPEND makes every write land at the end.
func (f *osFile) Write(p []byte) (int, error) {
	n, err := f.file.Write(p)
	return n, withClosed(err)
}

// Truncate implements File. Growing the file is an error (EINVAL), as in
// MemFS: the operating system would fill the hole with zeros that no caller
// wrote.
func (f *osFile) Truncate(size int64) error {
	current, err := f.Size()
	if err != nil {
		return err
	}
	if size < 0 || size > current {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	return withClosed(f.file.Truncate(size))
}

// Sync implements File.
func (f *osFile) Sync() error {
	return withClosed(f.file.Sync())
}

// Size implements File.
func (f *osFile) Size() (int64, error) {
	info, err := f.file.Stat()
	if err != nil {
		return 0, withClosed(err)
	}
	return info.Size(), nil
}

// Close implements File.
func (f *osFile) Close() error {
	return withClosed(f.file.Close())
}

// Name implements File.
func (f *osFile) Name() string { return f.name }

// OSFile implements OSFile.
func (f *osFile) OSFile() *os.File { return f.file }
