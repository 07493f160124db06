// Crashing a MemFS, and the helpers tests use to look inside one.
//
// Fault model of a crash (CrashClone), following the model in disk.go:
//
//   - Synced file content and synced directory entries always survive, byte
//     for byte.
//   - For each file, a seeded-random prefix of its unsynced appends and
//     truncates survives, applied in order. When the last surviving operation
//     is an append it may be torn: only a prefix of its bytes survives. A torn
//     append may also leave garbage (zeros or random bytes) after that prefix,
//     up to the append's length: a file whose size reached the disk before its
//     data did, or a half-written sector.
//   - For each directory, a seeded-random prefix of its unsynced entry
//     operations survives. A file whose entry did not survive is gone, whatever
//     its content; a file removed without SyncDir may come back.
//   - Directories themselves always survive (MkdirAll is durable at once).
//
// The random choices come from one PCG source seeded from CrashOptions.Seed
// and consumed in sorted path order, so the same seed and the same history
// give a byte-identical clone.

package disk

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Survival says how many unsynced operations of each file and directory
// survive a crash.
type Survival int

const (
	// SurviveRandomPrefix keeps a uniformly random prefix (possibly empty,
	// possibly all) of each file's and directory's unsynced operations.
	SurviveRandomPrefix Survival = iota
	// SurviveNothing keeps no unsynced operation: the clone holds exactly the
	// durable state. Tearing never happens.
	SurviveNothing
	// SurviveEverything keeps every unsynced operation, as if the page cache
	// had been flushed; the last append can still be torn.
	SurviveEverything
)

// CrashOptions configure CrashCloneWith.
type CrashOptions struct {
	// Seed seeds every random choice of the crash.
	Seed int64
	// Survival chooses how many unsynced operations survive.
	Survival Survival
	// TornProbability is the chance, per file, that the last surviving
	// operation, if it is an append, is torn.
	TornProbability float64
	// GarbageProbability is the chance that a torn append also leaves garbage
	// after its surviving prefix.
	GarbageProbability float64
}

// DefaultCrashOptions returns the options CrashClone uses: a random prefix of
// unsynced operations, a quarter of final appends torn, and a quarter of the
// torn ones ending in garbage.
func DefaultCrashOptions(seed int64) CrashOptions {
	return CrashOptions{
		Seed:               seed,
		Survival:           SurviveRandomPrefix,
		TornProbability:    0.25,
		GarbageProbability: 0.25,
	}
}

// pcgStream is the second PCG word: fixed, so that the seed alone decides
// the stream.
const pcgStream = 0x7469646563726173 // "tidecras"

// CrashClone returns the filesystem as a machine would find it after losing
// power now, with DefaultCrashOptions(seed). The receiver is left untouched;
// files open on it are not valid on the clone, whose state is all durable.
func (m *MemFS) CrashClone(seed int64) *MemFS {
	return m.CrashCloneWith(DefaultCrashOptions(seed))
}

// CrashCloneWith is CrashClone with explicit options.
func (m *MemFS) CrashCloneWith(options CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := crasher{
		options: options,
		random:  rand.New(rand.NewPCG(uint64(options.Seed), pcgStream)),
		nodes:   make(map[*memNode]*memNode),
	}
	clone := &MemFS{directories: make(map[string]*memDirectory)}
	for _, name := range slices.Sorted(maps.Keys(m.directories)) {
		entries := c.survivingEntries(m.directories[name])
		directory := newMemDirectory()
		for _, base := range slices.Sorted(maps.Keys(entries)) {
			node := c.survivingNode(entries[base])
			directory.current[base] = node
			directory.durable[base] = node
		}
		clone.directories[name] = directory
	}
	return clone
}

// crasher holds the state of one CrashCloneWith.
type crasher struct {
	options CrashOptions
	random  *rand.Rand
	// nodes maps an original node to its clone, so a file linked under two
	// names (a half-kept rename between directories) stays one file.
	nodes map[*memNode]*memNode
}

// kept returns how many of pending unsynced operations survive.
func (c *crasher) kept(pending int) int {
	switch {
	case pending == 0 || c.options.Survival == SurviveNothing:
		return 0
	case c.options.Survival == SurviveEverything:
		return pending
	default:
		return c.random.IntN(pending + 1)
	}
}

func (c *crasher) survivingEntries(directory *memDirectory) map[string]*memNode {
	entries := maps.Clone(directory.durable)
	for _, op := range directory.pending[:c.kept(len(directory.pending))] {
		op.apply(entries)
	}
	return entries
}

func (c *crasher) survivingNode(node *memNode) *memNode {
	if clone, ok := c.nodes[node]; ok {
		return clone
	}
	content := c.survivingContent(node)
	end := len(content)
	clone := &memNode{durable: content[:end:end], current: content[:end:end]}
	c.nodes[node] = clone
	return clone
}

// survivingContent replays a prefix of the node's unsynced operations on a
// copy of its durable content.
func (c *crasher) survivingContent(node *memNode) []byte {
	content := slices.Clone(node.durable)
	kept := node.pending[:c.kept(len(node.pending))]
	for i, op := range kept {
		if op.truncate {
			if op.size > int64(len(content)) {
				panic(fmt.Sprintf("disk: replayed truncate to %d beyond %d bytes", op.size, len(content)))
			}
			content = content[:op.size]
			continue
		}
		data := op.data
		if i == len(kept)-1 {
			data = c.maybeTear(data)
		}
		content = append(content, data...)
	}
	return content
}

// maybeTear returns the bytes of a final append that reach the disk: all of
// them, or a strict prefix optionally followed by garbage.
func (c *crasher) maybeTear(data []byte) []byte {
	if c.random.Float64() >= c.options.TornProbability {
		return data
	}
	keep := c.random.IntN(len(data))
	if c.random.Float64() >= c.options.GarbageProbability {
		return data[:keep]
	}
	garbage := make([]byte, 1+c.random.IntN(len(data)-keep))
	if c.random.IntN(2) == 0 {
		for i := range garbage {
			garbage[i] = byte(c.random.Uint32())
		}
	}
	return append(slices.Clone(data[:keep]), garbage...)
}

// ReadFile returns a copy of the current content of the named file.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, node, err := m.lookupFile("readfile", name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(node.current), nil
}

// CorruptAt overwrites bytes of the named file from offset with data, in
// both its durable and its current content (bytes beyond either's end are
// not written), modelling bit rot on the medium. Unsynced appends keep
// their original bytes, so a later crash may or may not show the damage in
// their range. It fails with EINVAL if the range goes past the current end.
func (m *MemFS) CorruptAt(name string, offset int64, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, node, err := m.lookupFile("corrupt", name)
	if err != nil {
		return err
	}
	if offset < 0 || offset+int64(len(data)) > int64(len(node.current)) {
		return pathError("corrupt", name, syscall.EINVAL)
	}
	// Copy before writing: the backing arrays are shared and must not change
	// under pending appends (see memfs.go).
	node.current = overwritten(node.current, offset, data)
	node.durable = overwritten(node.durable, offset, data)
	return nil
}

// overwritten returns a copy of content with data written at offset, clipped
// to the length of content.
func overwritten(content []byte, offset int64, data []byte) []byte {
	result := slices.Clone(content)
	if offset < int64(len(result)) {
		copy(result[offset:], data)
	}
	end := len(result)
	return result[:end:end]
}

// Files returns the paths of all files, sorted.
func (m *MemFS) Files() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var files []string
	for name, directory := range m.directories {
		for base := range directory.current {
			files = append(files, path.Join(name, base))
		}
	}
	slices.Sort(files)
	return files
}

// String lists every directory (ending in "/") and file with its size and
// unsynced state, one per line in sorted order, for test failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lines []string
	for name, directory := range m.directories {
		line := name + "/"
		if name == "/" {
			line = name
		}
		if len(directory.pending) > 0 {
			line += fmt.Sprintf(" (%d unsynced entry operations)", len(directory.pending))
		}
		lines = append(lines, line)
		for base, node := range directory.current {
			lines = append(lines, describeNode(path.Join(name, base), node))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func describeNode(name string, node *memNode) string {
	line := fmt.Sprintf("%s %d bytes", name, len(node.current))
	if len(node.pending) > 0 {
		line += fmt.Sprintf(" (durable %d bytes, %d unsynced operations)", len(node.durable), len(node.pending))
	}
	return line
}
