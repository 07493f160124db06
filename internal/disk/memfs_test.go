package disk

import (
	"bytes"
	"strings"
	"testing"
)

func readMem(t *testing.T, m *MemFS, name string) (string, bool) {
	t.Helper()
	content, err := m.ReadFile(name)
	if err != nil {
		wantErrorIs(t, err, ErrNotExist)
		return "", false
	}
	return string(content), true
}

// syncedFile creates name with content in m, synced and with its entry
// synced.
func syncedFile(t *testing.T, m *MemFS, name, content string) File {
	t.Helper()
	file := create(t, m, name, content)
	check(t, file.Sync())
	check(t, m.SyncDir("/data"))
	return file
}

func newMemData(t *testing.T) *MemFS {
	t.Helper()
	m := NewMem()
	check(t, m.MkdirAll("/data"))
	return m
}

func TestCrashKeepsSyncedData(t *testing.T) {
	m := newMemData(t)
	syncedFile(t, m, "/data/a", "durable")
	big := syncedFile(t, m, "/data/b", strings.Repeat("x", 10000))
	check(t, big.Truncate(100))
	check(t, big.Sync())
	for seed := range int64(200) {
		clone := m.CrashClone(seed)
		if got, _ := readMem(t, clone, "/data/a"); got != "durable" {
			t.Fatalf("seed %d: a = %q", seed, got)
		}
		if got, _ := readMem(t, clone, "/data/b"); got != strings.Repeat("x", 100) {
			t.Fatalf("seed %d: b has %d bytes", seed, len(got))
		}
	}
}

// TestCrashKeepsPrefixOfAppends checks the shape of every crashed file:
// durable content, then whole unsynced appends in order, then possibly one
// torn append (a prefix of it, or no longer than it if garbage). Over many
// seeds every outcome must show up.
func TestCrashKeepsPrefixOfAppends(t *testing.T) {
	m := newMemData(t)
	file := syncedFile(t, m, "/data/log", "DURABLE|")
	appends := []string{"first|", "second|", "third-and-longest|"}
	for _, a := range appends {
		if _, err := file.Write([]byte(a)); err != nil {
			t.Fatal(err)
		}
	}
	outcomes := map[string]int{}
	for seed := range int64(1000) {
		got, _ := readMem(t, m.CrashClone(seed), "/data/log")
		outcome, ok := classifyAppends(got, "DURABLE|", appends)
		if !ok {
			t.Fatalf("seed %d: %q is not durable content plus a prefix of appends", seed, got)
		}
		outcomes[outcome]++
	}
	for _, want := range []string{"lost all", "kept some", "kept all", "torn", "garbage"} {
		if outcomes[want] == 0 {
			t.Errorf("no seed gave outcome %q; outcomes %v", want, outcomes)
		}
	}
}

// classifyAppends reports how content relates to durable followed by
// appends, and false if no crash could have produced it.
func classifyAppends(content, durable string, appends []string) (string, bool) {
	rest, ok := strings.CutPrefix(content, durable)
	if !ok {
		return "", false
	}
	for i, a := range appends {
		if after, ok := strings.CutPrefix(rest, a); ok {
			rest = after
			continue
		}
		switch {
		case rest == "" && i == 0:
			return "lost all", true
		case rest == "":
			return "kept some", true
		case strings.HasPrefix(a, rest):
			return "torn", true
		case len(rest) <= len(a):
			return "garbage", true
		}
		return "", false
	}
	return "kept all", rest == ""
}

func TestCrashSurvivalOptions(t *testing.T) {
	m := newMemData(t)
	file := syncedFile(t, m, "/data/log", "abcdef")
	check(t, file.Truncate(2))
	if _, err := file.Write([]byte("XYZ")); err != nil {
		t.Fatal(err)
	}
	nothing := m.CrashCloneWith(CrashOptions{Seed: 1, Survival: SurviveNothing, TornProbability: 1})
	if got, _ := readMem(t, nothing, "/data/log"); got != "abcdef" {
		t.Fatalf("SurviveNothing: %q, want abcdef", got)
	}
	everything := m.CrashCloneWith(CrashOptions{Seed: 1, Survival: SurviveEverything})
	if got, _ := readMem(t, everything, "/data/log"); got != "abXYZ" {
		t.Fatalf("SurviveEverything: %q, want abXYZ", got)
	}
	torn := m.CrashCloneWith(CrashOptions{Seed: 1, Survival: SurviveEverything, TornProbability: 1})
	if got, _ := readMem(t, torn, "/data/log"); !strings.HasPrefix(got, "ab") || len(got) >= 5 || !strings.HasPrefix("abXYZ", got) {
		t.Fatalf("torn: %q, want ab followed by a strict prefix of XYZ", got)
	}
	garbage := m.CrashCloneWith(CrashOptions{Seed: 3, Survival: SurviveEverything, TornProbability: 1, GarbageProbability: 1})
	if got, _ := readMem(t, garbage, "/data/log"); !strings.HasPrefix(got, "ab") || len(got) < 3 || len(got) > 5 {
		t.Fatalf("garbage: %q, want ab followed by 1 to 3 bytes", got)
	}
}

func TestCrashUnsyncedCreateCanVanish(t *testing.T) {
	m := newMemData(t)
	file := create(t, m, "/data/new", "content")
	check(t, file.Sync()) // the content is durable, the entry is not
	kept, lost := 0, 0
	for seed := range int64(100) {
		if _, ok := readMem(t, m.CrashClone(seed), "/data/new"); ok {
			kept++
		} else {
			lost++
		}
	}
	if kept == 0 || lost == 0 {
		t.Fatalf("unsynced create kept %d times and lost %d times; want both", kept, lost)
	}
	if _, ok := readMem(t, m.CrashCloneWith(CrashOptions{Survival: SurviveNothing}), "/data/new"); ok {
		t.Fatal("unsynced create survived SurviveNothing")
	}
	check(t, m.SyncDir("/data"))
	for seed := range int64(100) {
		if got, _ := readMem(t, m.CrashClone(seed), "/data/new"); got != "content" {
			t.Fatalf("seed %d: synced create gave %q", seed, got)
		}
	}
}

func TestCrashUnsyncedRemoveCanComeBack(t *testing.T) {
	m := newMemData(t)
	syncedFile(t, m, "/data/old", "old")
	check(t, m.Remove("/data/old"))
	back := 0
	for seed := range int64(100) {
		if got, ok := readMem(t, m.CrashClone(seed), "/data/old"); ok {
			if got != "old" {
				t.Fatalf("seed %d: removed file came back as %q", seed, got)
			}
			back++
		}
	}
	if back == 0 || back == 100 {
		t.Fatalf("removed file came back %d times in 100; want some", back)
	}
}

// TestCrashRenameIsAtomic is the checkpoint pattern: write a temporary
// file, sync it, rename it over the old one. A crash shows the old or the
// new checkpoint, never neither or both.
func TestCrashRenameIsAtomic(t *testing.T) {
	m := newMemData(t)
	syncedFile(t, m, "/data/checkpoint", "old")
	syncedFile(t, m, "/data/checkpoint.tmp", "new")
	check(t, m.Rename("/data/checkpoint.tmp", "/data/checkpoint"))
	outcomes := map[string]int{}
	for seed := range int64(100) {
		clone := m.CrashClone(seed)
		final, _ := readMem(t, clone, "/data/checkpoint")
		_, temporary := readMem(t, clone, "/data/checkpoint.tmp")
		switch {
		case final == "old" && temporary, final == "new" && !temporary:
			outcomes[final]++
		default:
			t.Fatalf("seed %d: checkpoint %q, temporary present %v", seed, final, temporary)
		}
	}
	if outcomes["old"] == 0 || outcomes["new"] == 0 {
		t.Fatalf("outcomes %v; want both old and new", outcomes)
	}
	check(t, m.SyncDir("/data"))
	if got, _ := readMem(t, m.CrashClone(1), "/data/checkpoint"); got != "new" {
		t.Fatalf("after SyncDir the checkpoint is %q", got)
	}
}

// TestCrashRenameBetweenDirectories shows why both directories must be
// synced: otherwise the file can end up in both or in neither.
func TestCrashRenameBetweenDirectories(t *testing.T) {
	m := newMemData(t)
	check(t, m.MkdirAll("/data/other"))
	syncedFile(t, m, "/data/f", "content")
	check(t, m.Rename("/data/f", "/data/other/f"))
	places := map[[2]bool]int{}
	for seed := range int64(200) {
		clone := m.CrashClone(seed)
		_, inSource := readMem(t, clone, "/data/f")
		_, inTarget := readMem(t, clone, "/data/other/f")
		places[[2]bool{inSource, inTarget}]++
	}
	if len(places) != 4 {
		t.Fatalf("saw (source, target) placements %v; want all four", places)
	}
	check(t, m.SyncDir("/data"))
	check(t, m.SyncDir("/data/other"))
	clone := m.CrashClone(1)
	if _, ok := readMem(t, clone, "/data/f"); ok {
		t.Fatal("file still in source after syncing both directories")
	}
	if got, _ := readMem(t, clone, "/data/other/f"); got != "content" {
		t.Fatalf("target holds %q", got)
	}
}

// historyForDeterminism builds a filesystem with unsynced operations of
// every kind.
func historyForDeterminism(t *testing.T) *MemFS {
	m := newMemData(t)
	check(t, m.MkdirAll("/data/sub"))
	for i, name := range []string{"/data/a", "/data/b", "/data/sub/c", "/data/d"} {
		file := create(t, m, name, strings.Repeat(string(rune('a'+i)), 10))
		if i%2 == 0 {
			check(t, file.Sync())
		}
		for j := range 5 {
			if _, err := file.Write(bytes.Repeat([]byte{byte('0' + j)}, 7)); err != nil {
				t.Fatal(err)
			}
		}
		check(t, file.Truncate(30))
		if _, err := file.Write([]byte("tail")); err != nil {
			t.Fatal(err)
		}
	}
	check(t, m.SyncDir("/data"))
	check(t, m.Rename("/data/a", "/data/e"))
	check(t, m.Remove("/data/b"))
	return m
}

// dump is every path and its content, for comparing whole filesystems.
func dump(t *testing.T, m *MemFS) string {
	t.Helper()
	var out strings.Builder
	out.WriteString(m.String())
	for _, name := range m.Files() {
		content, err := m.ReadFile(name)
		check(t, err)
		out.WriteString("\n" + name + ": " + string(content))
	}
	return out.String()
}

func TestCrashCloneIsDeterministic(t *testing.T) {
	m := historyForDeterminism(t)
	before := dump(t, m)
	distinct := map[string]bool{}
	for seed := range int64(50) {
		first, second := dump(t, m.CrashClone(seed)), dump(t, m.CrashClone(seed))
		if first != second {
			t.Fatalf("seed %d gave two different clones:\n%s\n---\n%s", seed, first, second)
		}
		if again := dump(t, historyForDeterminism(t).CrashClone(seed)); again != first {
			t.Fatalf("seed %d on a replayed history gave a different clone", seed)
		}
		distinct[first] = true
	}
	if len(distinct) < 25 {
		t.Fatalf("50 seeds gave only %d distinct clones", len(distinct))
	}
	if after := dump(t, m); after != before {
		t.Fatalf("CrashClone changed the original:\n%s\n---\n%s", before, after)
	}
}

func TestCrashCloneIsIndependent(t *testing.T) {
	m := newMemData(t)
	file := syncedFile(t, m, "/data/a", "abc")
	clone := m.CrashClone(1)
	if _, err := file.Write([]byte("def")); err != nil {
		t.Fatal(err)
	}
	cloned, err := clone.Open("/data/a")
	check(t, err)
	if _, err := cloned.Write([]byte("XYZ")); err != nil {
		t.Fatal(err)
	}
	if got, _ := readMem(t, m, "/data/a"); got != "abcdef" {
		t.Fatalf("original %q", got)
	}
	if got, _ := readMem(t, clone, "/data/a"); got != "abcXYZ" {
		t.Fatalf("clone %q", got)
	}
	// The clone's state is all durable: crashing it again changes nothing
	// that was there at the first crash.
	if got, _ := readMem(t, clone.CrashCloneWith(CrashOptions{Survival: SurviveNothing}), "/data/a"); got != "abc" {
		t.Fatalf("clone of clone %q", got)
	}
}

func TestCorruptAt(t *testing.T) {
	m := newMemData(t)
	file := syncedFile(t, m, "/data/a", "0123456789")
	if _, err := file.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	check(t, m.CorruptAt("/data/a", 8, []byte("XYZ")))
	if got, _ := readMem(t, m, "/data/a"); got != "01234567XYZbc" {
		t.Fatalf("current %q", got)
	}
	lost := m.CrashCloneWith(CrashOptions{Survival: SurviveNothing})
	if got, _ := readMem(t, lost, "/data/a"); got != "01234567XY" {
		t.Fatalf("durable %q", got)
	}
	// The unsynced append keeps its own bytes.
	kept := m.CrashCloneWith(CrashOptions{Survival: SurviveEverything})
	if got, _ := readMem(t, kept, "/data/a"); got != "01234567XYabc" {
		t.Fatalf("kept %q", got)
	}
	if err := m.CorruptAt("/data/a", 12, []byte("XY")); err == nil {
		t.Fatal("CorruptAt past the end succeeded")
	}
	wantErrorIs(t, m.CorruptAt("/data/missing", 0, []byte("X")), ErrNotExist)
}

func TestMemString(t *testing.T) {
	m := newMemData(t)
	syncedFile(t, m, "/data/a", "abc")
	file := create(t, m, "/data/b", "xy")
	if _, err := file.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"./",
		"/",
		"/data/ (1 unsynced entry operations)",
		"/data/a 3 bytes",
		"/data/b 3 bytes (durable 0 bytes, 2 unsynced operations)",
	}, "\n")
	if got := m.String(); got != want {
		t.Fatalf("String():\n%s\nwant:\n%s", got, want)
	}
}

func TestMemHandleOutlivesRemove(t *testing.T) {
	m := newMemData(t)
	file := syncedFile(t, m, "/data/a", "abc")
	check(t, m.Remove("/data/a"))
	if _, err := file.Write([]byte("def")); err != nil {
		t.Fatal(err)
	}
	buffer := make([]byte, 6)
	if n, err := file.ReadAt(buffer, 0); n != 6 || err != nil || string(buffer) != "abcdef" {
		t.Fatalf("ReadAt after remove = %d, %v, %q", n, err, buffer)
	}
}
