package disk

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"testing"
)

// This test checks CrashClone against something simpler: a model that keeps,
// for every file and directory, the list of states it passed through since
// its last sync. Any crashed file must equal one of those states, or a state
// followed by at most the length of the append that came next (a torn or
// garbage tail); any crashed directory must hold one of its entry states.

// modelFile is the history of one file (inode) since its last Sync.
type modelFile struct {
	// states[0] is the durable content; states[i+1] follows appends[i].
	states [][]byte
	// appends[i] is the data of the operation after states[i], nil for a
	// truncate.
	appends [][]byte
	handle  File
}

func (f *modelFile) current() []byte { return f.states[len(f.states)-1] }

func (f *modelFile) record(state, appended []byte) {
	f.states = append(f.states, state)
	f.appends = append(f.appends, appended)
}

// allows reports whether a crash could have left content in this file.
func (f *modelFile) allows(content []byte) bool {
	for i, state := range f.states {
		if bytes.Equal(content, state) {
			return true
		}
		if i < len(f.appends) && f.appends[i] != nil && bytes.HasPrefix(content, state) &&
			len(content)-len(state) <= len(f.appends[i]) {
			return true
		}
	}
	return false
}

// model mirrors a MemFS with two directories.
type model struct {
	files []*modelFile
	// entries[directory] lists entry states since its last SyncDir, each
	// mapping a name to an index in files.
	entries map[string][]map[string]int
}

var modelDirectories = []string{"/data/x", "/data/y"}

func (m *model) currentEntries(directory string) map[string]int {
	states := m.entries[directory]
	return states[len(states)-1]
}

func (m *model) pushEntries(directory string, entries map[string]int) {
	m.entries[directory] = append(m.entries[directory], entries)
}

// step performs one random operation on both the MemFS and the model.
func (m *model) step(t *testing.T, random *rand.Rand, fsys *MemFS) {
	directory := modelDirectories[random.IntN(len(modelDirectories))]
	name := fmt.Sprintf("f%d", random.IntN(4))
	entries := m.currentEntries(directory)
	index, exists := entries[name]
	switch operation := random.IntN(10); {
	case operation < 4 && exists:
		m.write(t, random, m.files[index])
	case operation == 4 && exists:
		m.truncate(t, random, m.files[index])
	case operation == 5 && exists:
		file := m.files[index]
		check(t, file.handle.Sync())
		file.states, file.appends = [][]byte{file.current()}, nil
	case operation == 6:
		check(t, fsys.SyncDir(directory))
		m.entries[directory] = []map[string]int{entries}
	case operation == 7 && exists:
		m.rename(t, random, fsys, directory, name)
	case operation == 8 && exists:
		check(t, fsys.Remove(path.Join(directory, name)))
		next := maps.Clone(entries)
		delete(next, name)
		m.pushEntries(directory, next)
	default:
		m.create(t, fsys, directory, name)
	}
}

func (m *model) write(t *testing.T, random *rand.Rand, file *modelFile) {
	data := make([]byte, 1+random.IntN(20))
	for i := range data {
		data[i] = byte('a' + random.IntN(26))
	}
	if _, err := file.handle.Write(data); err != nil {
		t.Fatal(err)
	}
	file.record(append(slices.Clone(file.current()), data...), data)
}

func (m *model) truncate(t *testing.T, random *rand.Rand, file *modelFile) {
	size := random.IntN(len(file.current()) + 1)
	check(t, file.handle.Truncate(int64(size)))
	file.record(slices.Clone(file.current()[:size]), nil)
}

func (m *model) create(t *testing.T, fsys *MemFS, directory, name string) {
	handle, err := fsys.Create(path.Join(directory, name))
	check(t, err)
	if index, exists := m.currentEntries(directory)[name]; exists {
		check(t, handle.Close())
		m.files[index].record([]byte{}, nil)
		return
	}
	m.files = append(m.files, &modelFile{states: [][]byte{{}}, handle: handle})
	next := maps.Clone(m.currentEntries(directory))
	next[name] = len(m.files) - 1
	m.pushEntries(directory, next)
}

func (m *model) rename(t *testing.T, random *rand.Rand, fsys *MemFS, directory, name string) {
	target := modelDirectories[random.IntN(len(modelDirectories))]
	newName := fmt.Sprintf("f%d", random.IntN(4))
	check(t, fsys.Rename(path.Join(directory, name), path.Join(target, newName)))
	if target == directory && newName == name {
		return
	}
	index := m.currentEntries(directory)[name]
	source := maps.Clone(m.currentEntries(directory))
	delete(source, name)
	if target == directory {
		source[newName] = index
		m.pushEntries(directory, source)
		return
	}
	m.pushEntries(directory, source)
	destination := maps.Clone(m.currentEntries(target))
	destination[newName] = index
	m.pushEntries(target, destination)
}

// verify checks one crashed clone against the model.
func (m *model) verify(t *testing.T, clone *MemFS) {
	for _, directory := range modelDirectories {
		names, err := clone.List(directory)
		check(t, err)
		contents := map[string][]byte{}
		for _, name := range names {
			content, err := clone.ReadFile(path.Join(directory, name))
			check(t, err)
			contents[name] = content
		}
		if !m.directoryAllows(directory, contents) {
			t.Fatalf("%s after crash holds %q, which no history allows\n%s", directory, contents, clone)
		}
	}
}

func (m *model) directoryAllows(directory string, contents map[string][]byte) bool {
	for _, entries := range m.entries[directory] {
		if len(entries) != len(contents) {
			continue
		}
		allowed := true
		for name, index := range entries {
			content, ok := contents[name]
			allowed = allowed && ok && m.files[index].allows(content)
		}
		if allowed {
			return true
		}
	}
	return false
}

func TestCrashCloneAgainstModel(t *testing.T) {
	for run := range uint64(100) {
		random := rand.New(rand.NewPCG(run, 0))
		fsys := NewMem()
		m := &model{entries: map[string][]map[string]int{}}
		for _, directory := range modelDirectories {
			check(t, fsys.MkdirAll(directory))
			m.entries[directory] = []map[string]int{{}}
		}
		for range 60 {
			m.step(t, random, fsys)
		}
		for seed := range int64(20) {
			m.verify(t, fsys.CrashClone(seed))
		}
		m.verify(t, fsys.CrashCloneWith(CrashOptions{Survival: SurviveNothing}))
	}
}
