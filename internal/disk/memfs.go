// Fault model of MemFS, the in-memory filesystem used by crash tests and the
// simulator. It is the model of disk.go made exact, so that CrashClone can
// produce every state a real disk could be left in, and nothing else:
//
//   - Each file has durable content (as of its last successful Sync), current
//     content (what ReadAt sees), and the list of operations (appends and
//     truncates) made since that Sync, oldest first. Replaying the list on the
//     durable content gives the current content.
//   - Each directory has a durable entry set (as of its last SyncDir), a
//     current entry set, and the list of entry operations (create, rename,
//     remove) made since that SyncDir. A rename within one directory is a single
//     operation, so a crash keeps it whole or not at all. A rename between two
//     directories is an unlink in one list and a link in the other, so unless
//     both directories are synced a crash can leave the file in both places or
//     in neither: callers must SyncDir both.
//   - Directories themselves are durable as soon as MkdirAll, Remove or Rename
//     of a directory returns (the OS implementation syncs the parents to match).
//     Directory operations are rare and callers would sync them immediately
//     anyway; modelling them lazily would only add states no caller handles
//     differently.
//   - A crash (CrashClone) keeps, for each file and each directory, the durable
//     state plus a seeded-random prefix of its unsynced operations; the last
//     kept append may be torn or end in garbage. See memfs_crash.go.
//   - Nothing else fails: MemFS never returns EIO or ENOSPC. Wrap it in
//     FaultyFS for that.
//
// Sharing of bytes: a node's current content, its durable content and the data
// of its unsynced appends share one backing array. That is safe because of one
// invariant, kept by Write, Truncate and CorruptAt: a byte of a backing array,
// once below the length of the current content, is never written again.
// Appends write past the length, Truncate caps the capacity so that the next
// append reallocates, and CorruptAt copies before writing.

package disk

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// MemFS is an in-memory FS whose unsynced state can be crashed reproducibly
// with CrashClone. The zero value is not usable; call NewMem. All methods are
// safe for concurrent use: one mutex guards the whole filesystem and its files.
type MemFS struct {
	mu sync.Mutex
	// directories maps a cleaned directory path to its state. The roots "."
	// and "/" always exist.
	directories map[string]*memDirectory
}

// memDirectory is one directory. Subdirectories are not entries: they are
// the paths in MemFS.directories whose parent is this directory.
type memDirectory struct {
	// current maps a file name to its node, as List and Open see it.
	current map[string]*memNode
	// durable is the entry set as of the last SyncDir.
	durable map[string]*memNode
	// pending holds the entry operations since the last SyncDir, oldest
	// first. Replaying them on durable gives current.
	pending []entryOperation
}

// entryOperation changes one directory's entries: it unlinks unlinkName (if
// not empty) and then links node under linkName (if node is not nil). A
// rename within a directory does both in one operation, which is what makes
// it atomic across a crash.
type entryOperation struct {
	unlinkName string
	linkName   string
	node       *memNode
}

func (op entryOperation) apply(entries map[string]*memNode) {
	if op.unlinkName != "" {
		delete(entries, op.unlinkName)
	}
	if op.node != nil {
		entries[op.linkName] = op.node
	}
}

// memNode is the content of one file (an inode: it outlives its directory
// entries while a handle is open).
type memNode struct {
	durable []byte
	current []byte
	// pending holds the appends and truncates since the last Sync, oldest
	// first.
	pending []fileOperation
}

// fileOperation is an append of data or, if truncate is set, a truncate to
// size.
type fileOperation struct {
	data     []byte
	truncate bool
	size     int64
}

// NewMem returns an empty in-memory filesystem holding only the roots "." and
// "/".
func NewMem() *MemFS {
	m := &MemFS{directories: make(map[string]*memDirectory)}
	m.directories["."] = newMemDirectory()
	m.directories["/"] = newMemDirectory()
	return m
}

func newMemDirectory() *memDirectory {
	return &memDirectory{
		current: make(map[string]*memNode),
		durable: make(map[string]*memNode),
	}
}

func pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// lookupFile returns the directory holding the file name and the file's
// node, or an error wrapping ErrNotExist. The caller holds m.mu.
func (m *MemFS) lookupFile(op, name string) (*memDirectory, *memNode, error) {
	name = path.Clean(name)
	if _, ok := m.directories[name]; ok {
		return nil, nil, pathError(op, name, syscall.EISDIR)
	}
	directory, ok := m.directories[path.Dir(name)]
	if !ok {
		return nil, nil, pathError(op, name, ErrNotExist)
	}
	node, ok := directory.current[path.Base(name)]
	if !ok {
		return nil, nil, pathError(op, name, ErrNotExist)
	}
	return directory, node, nil
}

// Create implements FS. Truncating an existing file is a file operation (it
// becomes durable with Sync); creating a new one is an entry operation (it
// becomes durable with SyncDir on the parent).
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cleaned := path.Clean(name)
	if _, ok := m.directories[cleaned]; ok {
		return nil, pathError("create", name, syscall.EISDIR)
	}
	directory, ok := m.directories[path.Dir(cleaned)]
	if !ok {
		return nil, pathError("create", name, ErrNotExist)
	}
	base := path.Base(cleaned)
	node, ok := directory.current[base]
	if ok {
		node.truncate(0)
	} else {
		node = &memNode{}
		directory.current[base] = node
		directory.pending = append(directory.pending, entryOperation{linkName: base, node: node})
	}
	return &memFile{fs: m, node: node, name: name}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, node, err := m.lookupFile("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, node: node, name: name}, nil
}

// Remove implements FS. Removing a file is an entry operation; removing an
// (empty) directory is durable at once.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cleaned := path.Clean(name)
	if _, ok := m.directories[cleaned]; ok {
		return m.removeDirectory(cleaned)
	}
	directory, _, err := m.lookupFile("remove", name)
	if err != nil {
		return err
	}
	base := path.Base(cleaned)
	delete(directory.current, base)
	directory.pending = append(directory.pending, entryOperation{unlinkName: base})
	return nil
}

func (m *MemFS) removeDirectory(name string) error {
	if name == "." || name == "/" {
		return pathError("remove", name, syscall.EBUSY)
	}
	if len(m.directories[name].current) > 0 || m.hasSubdirectory(name) {
		return pathError("remove", name, syscall.ENOTEMPTY)
	}
	delete(m.directories, name)
	return nil
}

func (m *MemFS) hasSubdirectory(name string) bool {
	for other := range m.directories {
		if other != name && path.Dir(other) == name {
			return true
		}
	}
	return false
}

// Rename implements FS. See the file comment for what a crash does to a
// rename between directories.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = path.Clean(oldname), path.Clean(newname)
	if _, ok := m.directories[oldname]; ok {
		return m.renameDirectory(oldname, newname)
	}
	source, node, err := m.lookupFile("rename", oldname)
	if err != nil {
		return err
	}
	if _, ok := m.directories[newname]; ok {
		return pathError("rename", newname, syscall.EISDIR)
	}
	target, ok := m.directories[path.Dir(newname)]
	if !ok {
		return pathError("rename", newname, ErrNotExist)
	}
	if oldname == newname {
		return nil
	}
	oldBase, newBase := path.Base(oldname), path.Base(newname)
	if source == target {
		op := entryOperation{unlinkName: oldBase, linkName: newBase, node: node}
		op.apply(source.current)
		source.pending = append(source.pending, op)
		return nil
	}
	unlink := entryOperation{unlinkName: oldBase}
	link := entryOperation{linkName: newBase, node: node}
	unlink.apply(source.current)
	link.apply(target.current)
	source.pending = append(source.pending, unlink)
	target.pending = append(target.pending, link)
	return nil
}

// renameDirectory moves a directory and everything under it. It is durable
// at once; the target must not exist.
func (m *MemFS) renameDirectory(oldname, newname string) error {
	if oldname == "." || oldname == "/" || strings.HasPrefix(newname, oldname+"/") {
		return pathError("rename", oldname, syscall.EINVAL)
	}
	if _, ok := m.directories[path.Dir(newname)]; !ok {
		return pathError("rename", newname, ErrNotExist)
	}
	if m.exists(newname) {
		return pathError("rename", newname, syscall.EEXIST)
	}
	for _, name := range slices.Sorted(maps.Keys(m.directories)) {
		if name == oldname || strings.HasPrefix(name, oldname+"/") {
			m.directories[newname+name[len(oldname):]] = m.directories[name]
			delete(m.directories, name)
		}
	}
	return nil
}

// exists reports whether a cleaned path names a file or directory.
func (m *MemFS) exists(name string) bool {
	if _, ok := m.directories[name]; ok {
		return true
	}
	directory, ok := m.directories[path.Dir(name)]
	if !ok {
		return false
	}
	_, ok = directory.current[path.Base(name)]
	return ok
}

// MkdirAll implements FS. New directories are durable at once.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for name := path.Clean(dir); ; name = path.Dir(name) {
		if _, ok := m.directories[name]; ok {
			break
		}
		if m.exists(name) {
			return pathError("mkdir", name, syscall.ENOTDIR)
		}
		missing = append(missing, name)
	}
	for _, name := range missing {
		m.directories[name] = newMemDirectory()
	}
	return nil
}

// List implements FS: the files and subdirectories of dir, sorted.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := path.Clean(dir)
	directory, ok := m.directories[name]
	if !ok {
		if m.exists(name) {
			return nil, pathError("list", dir, syscall.ENOTDIR)
		}
		return nil, pathError("list", dir, ErrNotExist)
	}
	names := slices.Collect(maps.Keys(directory.current))
	for other := range m.directories {
		if other != name && path.Dir(other) == name {
			names = append(names, path.Base(other))
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir implements FS: the current entries of dir become its durable ones.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	directory, ok := m.directories[path.Clean(dir)]
	if !ok {
		if m.exists(path.Clean(dir)) {
			return pathError("syncdir", dir, syscall.ENOTDIR)
		}
		return pathError("syncdir", dir, ErrNotExist)
	}
	directory.durable = maps.Clone(directory.current)
	directory.pending = nil
	return nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, node, err := m.lookupFile("stat", name)
	if err != nil {
		return 0, err
	}
	return int64(len(node.current)), nil
}

// append adds p at the end of the current content and records it.
func (n *memNode) append(p []byte) {
	if len(p) == 0 {
		return
	}
	start := len(n.current)
	if start+len(p) > cap(n.current) {
		// Doubling, rather than append's gentler growth for large slices,
		// keeps the copying of a growing log linear in its size.
		grown := make([]byte, start, max(2*cap(n.current), start+len(p), 4096))
		copy(grown, n.current)
		n.current = grown
	}
	n.current = append(n.current, p...)
	end := len(n.current)
	// The slice shares the backing array; see the file comment for why no
	// later write can change these bytes.
	n.pending = append(n.pending, fileOperation{data: n.current[start:end:end]})
}

// truncate cuts the current content to size, which the caller has checked is
// at most its length.
func (n *memNode) truncate(size int64) {
	if size == int64(len(n.current)) {
		return
	}
	// Capping the capacity makes the next append reallocate instead of
	// overwriting bytes that durable content or pending appends still hold.
	n.current = n.current[:size:size]
	n.pending = append(n.pending, fileOperation{truncate: true, size: size})
}

// sync makes the current content durable.
func (n *memNode) sync() {
	end := len(n.current)
	n.durable = n.current[:end:end]
	n.pending = nil
}

// memFile is an open MemFS file. It refers to the node, not the name, so it
// keeps working after the file is removed or renamed, as on POSIX.
type memFile struct {
	fs   *MemFS
	node *memNode
	name string
	// closed is guarded by fs.mu.
	closed bool
}

// check returns an error if the file is closed. The caller holds f.fs.mu.
func (f *memFile) check(op string) error {
	if f.closed {
		return pathError(op, f.name, ErrClosed)
	}
	return nil
}

// ReadAt implements io.ReaderAt: fewer than len(p) bytes come with io.EOF.
func (f *memFile) ReadAt(p []byte, offset int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if offset < 0 {
		return 0, pathError("read", f.name, syscall.EINVAL)
	}
	if offset >= int64(len(f.node.current)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.current[offset:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write implements File.
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	f.node.append(p)
	return len(p), nil
}

// Truncate implements File. Growing the file is an error (EINVAL): the
// model has no holes.
func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 || size > int64(len(f.node.current)) {
		return pathError("truncate", f.name, syscall.EINVAL)
	}
	f.node.truncate(size)
	return nil
}

// Sync implements File.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	f.node.sync()
	return nil
}

// Size implements File.
func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("size"); err != nil {
		return 0, err
	}
	return int64(len(f.node.current)), nil
}

// Close implements File. Closing twice returns ErrClosed.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Name implements File.
func (f *memFile) Name() string { return f.name }

// String implements fmt.Stringer for test failure messages.
func (f *memFile) String() string { return fmt.Sprintf("memFile(%s)", f.name) }
