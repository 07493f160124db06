package disk

import (
	"bytes"
	"errors"
	"io"
	"path"
	"slices"
	"sync"
	"testing"
)

// The conformance tests run the same FS behaviour against every
// implementation, so that code tested on MemFS behaves the same on real files.

type implementation struct {
	name string
	// open returns a fresh FS and an existing, empty directory in it.
	open func(t *testing.T) (FS, string)
}

func memRoot(t *testing.T, fsys FS) (FS, string) {
	t.Helper()
	if err := fsys.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	return fsys, "/data"
}

func implementations() []implementation {
	return []implementation{
		{"os", func(t *testing.T) (FS, string) { return OS(), t.TempDir() }},
		{"mem", func(t *testing.T) (FS, string) { return memRoot(t, NewMem()) }},
		{"faulty-mem", func(t *testing.T) (FS, string) {
			return memRoot(t, NewFaulty(NewMem(), FaultConfig{Seed: 1}))
		}},
		{"faulty-os", func(t *testing.T) (FS, string) {
			return NewFaulty(OS(), FaultConfig{Seed: 1}), t.TempDir()
		}},
	}
}

var conformanceCases = []struct {
	name string
	run  func(t *testing.T, fsys FS, root string)
}{
	{"WriteAndReadAt", testWriteAndReadAt},
	{"TruncateThenAppend", testTruncateThenAppend},
	{"CreateTruncatesExisting", testCreateTruncatesExisting},
	{"OpenAppendsAtEnd", testOpenAppendsAtEnd},
	{"RenameOverExisting", testRenameOverExisting},
	{"RenameDirectory", testRenameDirectory},
	{"Remove", testRemove},
	{"ListSorted", testListSorted},
	{"SyncDir", testSyncDir},
	{"MkdirAll", testMkdirAll},
	{"MissingPaths", testMissingPaths},
	{"Closed", testClosed},
	{"ConcurrentReadAndWrite", testConcurrentReadAndWrite},
}

func TestConformance(t *testing.T) {
	for _, implementation := range implementations() {
		t.Run(implementation.name, func(t *testing.T) {
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					fsys, root := implementation.open(t)
					c.run(t, fsys, root)
				})
			}
		})
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, fsys FS, name string, content string) File {
	t.Helper()
	file, err := fsys.Create(name)
	check(t, err)
	if _, err := file.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	return file
}

// contentOf reads the whole of name through a fresh handle.
func contentOf(t *testing.T, fsys FS, name string) string {
	t.Helper()
	file, err := fsys.Open(name)
	check(t, err)
	defer file.Close()
	size, err := file.Size()
	check(t, err)
	buffer := make([]byte, size)
	n, err := file.ReadAt(buffer, 0)
	if err != nil && !(err == io.EOF && n == int(size)) {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(buffer[:n])
}

func wantErrorIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want one wrapping %v", err, target)
	}
}

func testWriteAndReadAt(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a.log")
	file := create(t, fsys, name, "hello")
	defer file.Close()
	if _, err := file.Write([]byte(" world")); err != nil {
		t.Fatal(err)
	}
	if file.Name() != name {
		t.Fatalf("Name() = %q, want %q", file.Name(), name)
	}
	buffer := make([]byte, 5)
	n, err := file.ReadAt(buffer, 6)
	if n != 5 || err != nil || string(buffer) != "world" {
		t.Fatalf("ReadAt(6) = %d, %v, %q", n, err, buffer)
	}
	n, err = file.ReadAt(buffer, 8)
	if n != 3 || err != io.EOF || string(buffer[:n]) != "rld" {
		t.Fatalf("ReadAt past the end = %d, %v, %q; want 3, io.EOF", n, err, buffer[:n])
	}
	if n, err := file.ReadAt(buffer, 11); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v; want 0, io.EOF", n, err)
	}
	if size, err := file.Size(); size != 11 || err != nil {
		t.Fatalf("Size() = %d, %v", size, err)
	}
	if size, err := fsys.Stat(name); size != 11 || err != nil {
		t.Fatalf("Stat() = %d, %v", size, err)
	}
	if _, err := fsys.Stat(root); err == nil {
		t.Fatal("Stat of a directory succeeded")
	}
}

func testTruncateThenAppend(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a.log")
	file := create(t, fsys, name, "abcdef")
	defer file.Close()
	check(t, file.Truncate(3))
	if _, err := file.Write([]byte("XY")); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, fsys, name); got != "abcXY" {
		t.Fatalf("content %q, want abcXY", got)
	}
	if err := file.Truncate(6); err == nil {
		t.Fatal("Truncate grew the file")
	}
	if err := file.Truncate(-1); err == nil {
		t.Fatal("Truncate(-1) succeeded")
	}
	check(t, file.Truncate(0))
	check(t, file.Sync())
	if size, _ := fsys.Stat(name); size != 0 {
		t.Fatalf("size after Truncate(0) = %d", size)
	}
}

func testCreateTruncatesExisting(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a")
	check(t, create(t, fsys, name, "old content").Close())
	file := create(t, fsys, name, "new")
	check(t, file.Close())
	if got := contentOf(t, fsys, name); got != "new" {
		t.Fatalf("content %q, want new", got)
	}
}

func testOpenAppendsAtEnd(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a")
	check(t, create(t, fsys, name, "ab").Close())
	file, err := fsys.Open(name)
	check(t, err)
	defer file.Close()
	if _, err := file.Write([]byte("cd")); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, fsys, name); got != "abcd" {
		t.Fatalf("content %q, want abcd", got)
	}
}

func testRenameOverExisting(t *testing.T, fsys FS, root string) {
	temporary, final := path.Join(root, "tmp"), path.Join(root, "final")
	check(t, create(t, fsys, final, "old").Close())
	handle := create(t, fsys, temporary, "new")
	defer handle.Close()
	check(t, fsys.Rename(temporary, final))
	if got := contentOf(t, fsys, final); got != "new" {
		t.Fatalf("content %q, want new", got)
	}
	_, err := fsys.Stat(temporary)
	wantErrorIs(t, err, ErrNotExist)
	// A handle follows the file, not the name.
	if _, err := handle.Write([]byte("er")); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, fsys, final); got != "newer" {
		t.Fatalf("content %q after writing through the old handle, want newer", got)
	}
	check(t, fsys.Rename(final, final))
	if got := contentOf(t, fsys, final); got != "newer" {
		t.Fatalf("rename onto itself changed content to %q", got)
	}
}

func testRenameDirectory(t *testing.T, fsys FS, root string) {
	check(t, fsys.MkdirAll(path.Join(root, "x/y")))
	check(t, create(t, fsys, path.Join(root, "x/y/f"), "data").Close())
	check(t, fsys.Rename(path.Join(root, "x"), path.Join(root, "z")))
	if got := contentOf(t, fsys, path.Join(root, "z/y/f")); got != "data" {
		t.Fatalf("content %q after directory rename", got)
	}
	_, err := fsys.List(path.Join(root, "x"))
	wantErrorIs(t, err, ErrNotExist)
}

func testRemove(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a")
	check(t, create(t, fsys, name, "x").Close())
	check(t, fsys.Remove(name))
	_, err := fsys.Stat(name)
	wantErrorIs(t, err, ErrNotExist)
	wantErrorIs(t, fsys.Remove(name), ErrNotExist)
	directory := path.Join(root, "d")
	check(t, fsys.MkdirAll(directory))
	check(t, create(t, fsys, path.Join(directory, "f"), "").Close())
	if err := fsys.Remove(directory); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	check(t, fsys.Remove(path.Join(directory, "f")))
	check(t, fsys.Remove(directory))
	names, err := fsys.List(root)
	check(t, err)
	if len(names) != 0 {
		t.Fatalf("List after removals = %q", names)
	}
}

func testListSorted(t *testing.T, fsys FS, root string) {
	for _, name := range []string{"c", "a", "b"} {
		check(t, create(t, fsys, path.Join(root, name), name).Close())
	}
	check(t, fsys.MkdirAll(path.Join(root, "d/e")))
	names, err := fsys.List(root)
	check(t, err)
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q", names, want)
	}
	if _, err := fsys.List(path.Join(root, "a")); err == nil {
		t.Fatal("List of a file succeeded")
	}
}

func testSyncDir(t *testing.T, fsys FS, root string) {
	file := create(t, fsys, path.Join(root, "a"), "x")
	check(t, file.Sync())
	check(t, file.Close())
	check(t, fsys.SyncDir(root))
	wantErrorIs(t, fsys.SyncDir(path.Join(root, "missing")), ErrNotExist)
}

func testMkdirAll(t *testing.T, fsys FS, root string) {
	nested := path.Join(root, "p/q/r")
	check(t, fsys.MkdirAll(nested))
	check(t, fsys.MkdirAll(nested))
	check(t, create(t, fsys, path.Join(nested, "f"), "").Close())
	if err := fsys.MkdirAll(path.Join(nested, "f")); err == nil {
		t.Fatal("MkdirAll over a file succeeded")
	}
	if err := fsys.MkdirAll(path.Join(nested, "f/g")); err == nil {
		t.Fatal("MkdirAll under a file succeeded")
	}
	if _, err := fsys.Create(path.Join(root, "p")); err == nil {
		t.Fatal("Create over a directory succeeded")
	}
	if _, err := fsys.Open(path.Join(root, "p")); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

func testMissingPaths(t *testing.T, fsys FS, root string) {
	missing := path.Join(root, "missing")
	_, err := fsys.Open(missing)
	wantErrorIs(t, err, ErrNotExist)
	_, err = fsys.Stat(missing)
	wantErrorIs(t, err, ErrNotExist)
	wantErrorIs(t, fsys.Remove(missing), ErrNotExist)
	wantErrorIs(t, fsys.Rename(missing, path.Join(root, "other")), ErrNotExist)
	_, err = fsys.List(missing)
	wantErrorIs(t, err, ErrNotExist)
	_, err = fsys.Create(path.Join(missing, "file"))
	wantErrorIs(t, err, ErrNotExist)
	check(t, create(t, fsys, path.Join(root, "a"), "").Close())
	wantErrorIs(t, fsys.Rename(path.Join(root, "a"), path.Join(missing, "a")), ErrNotExist)
}

func testClosed(t *testing.T, fsys FS, root string) {
	file := create(t, fsys, path.Join(root, "a"), "abc")
	check(t, file.Close())
	_, err := file.Write([]byte("x"))
	wantErrorIs(t, err, ErrClosed)
	_, err = file.ReadAt(make([]byte, 1), 0)
	wantErrorIs(t, err, ErrClosed)
	wantErrorIs(t, file.Sync(), ErrClosed)
	wantErrorIs(t, file.Truncate(0), ErrClosed)
	_, err = file.Size()
	wantErrorIs(t, err, ErrClosed)
	wantErrorIs(t, file.Close(), ErrClosed)
}

// testConcurrentReadAndWrite exercises the one concurrency File promises:
// ReadAt alongside Write. Run under -race.
func testConcurrentReadAndWrite(t *testing.T, fsys FS, root string) {
	file := create(t, fsys, path.Join(root, "a"), "")
	defer file.Close()
	chunk := bytes.Repeat([]byte{7}, 64)
	var group sync.WaitGroup
	for range 4 {
		group.Go(func() {
			buffer := make([]byte, len(chunk))
			for offset := int64(0); offset < 100*int64(len(chunk)); offset += int64(len(chunk)) {
				n, _ := file.ReadAt(buffer, offset)
				if !bytes.Equal(buffer[:n], chunk[:n]) {
					t.Errorf("read %v at %d", buffer[:n], offset)
					return
				}
			}
		})
	}
	for range 100 {
		if _, err := file.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	group.Wait()
}
