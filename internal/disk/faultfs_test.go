package disk

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newFaulty(t *testing.T, config FaultConfig) (*FaultyFS, *MemFS) {
	t.Helper()
	m := newMemData(t)
	return NewFaulty(m, config), m
}

func wantInjected(t *testing.T, err error, errno error) {
	t.Helper()
	wantErrorIs(t, err, ErrInjected)
	wantErrorIs(t, err, errno)
}

func TestFaultyWriteError(t *testing.T) {
	f, m := newFaulty(t, FaultConfig{Seed: 1, WriteErrorProbability: 1})
	file, err := f.Create("/data/a")
	check(t, err)
	n, err := file.Write([]byte("abc"))
	wantInjected(t, err, syscall.EIO)
	if n != 0 {
		t.Fatalf("failed write reported %d bytes", n)
	}
	if got, _ := readMem(t, m, "/data/a"); got != "" {
		t.Fatalf("failed write left %q", got)
	}
	if f.Injected() != 1 {
		t.Fatalf("Injected() = %d", f.Injected())
	}
}

func TestFaultyPartialWrite(t *testing.T) {
	f, m := newFaulty(t, FaultConfig{Seed: 1, WriteErrorProbability: 1, PartialWriteProbability: 1})
	file, err := f.Create("/data/a")
	check(t, err)
	want := ""
	for range 20 {
		n, err := file.Write([]byte("0123456789"))
		wantInjected(t, err, syscall.EIO)
		if n >= 10 {
			t.Fatalf("partial write reported %d of 10 bytes", n)
		}
		want += "0123456789"[:n]
	}
	if got, _ := readMem(t, m, "/data/a"); got != want || len(got) == 0 {
		t.Fatalf("file holds %q, want the reported prefixes %q", got, want)
	}
}

func TestFaultySyncErrorPoisonsFile(t *testing.T) {
	f, m := newFaulty(t, FaultConfig{Seed: 1, SyncErrorProbability: 1})
	file, err := f.Create("/data/a")
	check(t, err)
	check(t, f.SyncDir("/data"))
	if _, err := file.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	first := file.Sync()
	wantInjected(t, first, syscall.EIO)
	// The failed Sync did not reach the inner FS: the bytes can be lost.
	lost := m.CrashCloneWith(CrashOptions{Survival: SurviveNothing})
	if got, _ := readMem(t, lost, "/data/a"); got != "" {
		t.Fatalf("bytes of a failed Sync are durable: %q", got)
	}
	f.SetEnabled(false)
	for _, err := range []error{file.Sync(), file.Truncate(0)} {
		if err != first {
			t.Fatalf("poisoned file returned %v, want the first error %v", err, first)
		}
	}
	if _, err := file.Write([]byte("x")); err != first {
		t.Fatalf("poisoned Write returned %v", err)
	}
	buffer := make([]byte, 3)
	if _, err := file.ReadAt(buffer, 0); err != nil || string(buffer) != "abc" {
		t.Fatalf("read of poisoned file: %v, %q", err, buffer)
	}
	// A fresh handle is not poisoned.
	other, err := f.Open("/data/a")
	check(t, err)
	check(t, other.Sync())
}

func TestFaultyFailSyncAfter(t *testing.T) {
	f, _ := newFaulty(t, FaultConfig{})
	f.FailSyncAfter(2)
	a, err := f.Create("/data/a")
	check(t, err)
	b, err := f.Create("/data/b")
	check(t, err)
	check(t, a.Sync())
	check(t, b.Sync())
	wantInjected(t, a.Sync(), syscall.EIO)
	check(t, b.Sync())
	wantInjected(t, a.Sync(), syscall.EIO)
}

func TestFaultyNoSpace(t *testing.T) {
	f, m := newFaulty(t, FaultConfig{SpaceLimitBytes: 10})
	file, err := f.Create("/data/a")
	check(t, err)
	if n, err := file.Write([]byte("123456")); n != 6 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	n, err := file.Write([]byte("789abc"))
	wantInjected(t, err, syscall.ENOSPC)
	if n != 4 {
		t.Fatalf("write at the limit wrote %d bytes, want 4", n)
	}
	n, err = file.Write([]byte("x"))
	wantInjected(t, err, syscall.ENOSPC)
	if got, _ := readMem(t, m, "/data/a"); n != 0 || got != "123456789a" {
		t.Fatalf("full disk: wrote %d, holds %q", n, got)
	}
	check(t, file.Truncate(8))
	if n, err := file.Write([]byte("XYZ")); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after freeing 2 bytes: %d, %v", n, err)
	}
	check(t, f.Remove("/data/a"))
	if f.UsedBytes() != 0 {
		t.Fatalf("UsedBytes() = %d after removing the only file", f.UsedBytes())
	}
	f.SetSpaceLimit(0)
	other, err := f.Create("/data/b")
	check(t, err)
	if _, err := other.Write(make([]byte, 100)); err != nil {
		t.Fatalf("unlimited write: %v", err)
	}
}

func TestFaultySpaceFreedByCreateAndRename(t *testing.T) {
	f, _ := newFaulty(t, FaultConfig{SpaceLimitBytes: 100})
	a, err := f.Create("/data/a")
	check(t, err)
	_, err = a.Write(make([]byte, 30))
	check(t, err)
	b, err := f.Create("/data/b")
	check(t, err)
	_, err = b.Write(make([]byte, 20))
	check(t, err)
	check(t, f.Rename("/data/b", "/data/a"))
	if f.UsedBytes() != 20 {
		t.Fatalf("after rename over: UsedBytes() = %d, want 20", f.UsedBytes())
	}
	_, err = f.Create("/data/a")
	check(t, err)
	if f.UsedBytes() != 0 {
		t.Fatalf("after create over: UsedBytes() = %d, want 0", f.UsedBytes())
	}
}

func TestFaultyInjectOnceEveryOperation(t *testing.T) {
	calls := map[Op]func(f *FaultyFS, file File) error{
		OpCreate:   func(f *FaultyFS, _ File) error { _, err := f.Create("/data/b"); return err },
		OpOpen:     func(f *FaultyFS, _ File) error { _, err := f.Open("/data/a"); return err },
		OpRemove:   func(f *FaultyFS, _ File) error { return f.Remove("/data/a") },
		OpRename:   func(f *FaultyFS, _ File) error { return f.Rename("/data/a", "/data/c") },
		OpMkdirAll: func(f *FaultyFS, _ File) error { return f.MkdirAll("/data/d") },
		OpList:     func(f *FaultyFS, _ File) error { _, err := f.List("/data"); return err },
		OpSyncDir:  func(f *FaultyFS, _ File) error { return f.SyncDir("/data") },
		OpStat:     func(f *FaultyFS, _ File) error { _, err := f.Stat("/data/a"); return err },
		OpRead:     func(_ *FaultyFS, file File) error { _, err := file.ReadAt(make([]byte, 1), 0); return err },
		OpWrite:    func(_ *FaultyFS, file File) error { _, err := file.Write([]byte("x")); return err },
		OpTruncate: func(_ *FaultyFS, file File) error { return file.Truncate(0) },
		OpSync:     func(_ *FaultyFS, file File) error { return file.Sync() },
	}
	for op := range opCount {
		t.Run(op.String(), func(t *testing.T) {
			f, _ := newFaulty(t, FaultConfig{})
			file := create(t, f, "/data/a", "abc")
			f.InjectOnce(op, fs.ErrPermission)
			err := calls[op](f, file)
			wantInjected(t, err, fs.ErrPermission)
			if !strings.Contains(err.Error(), op.String()) {
				t.Fatalf("error %q does not name %v", err, op)
			}
			if op == OpSync {
				return // a failed Sync poisons the handle
			}
			check(t, calls[op](f, file))
		})
	}
}

func TestFaultyDisabled(t *testing.T) {
	config := FaultConfig{
		Seed: 1, WriteErrorProbability: 1, SyncErrorProbability: 1,
		SyncDirErrorProbability: 1, SpaceLimitBytes: 1,
	}
	f, _ := newFaulty(t, config)
	f.InjectOnce(OpCreate, nil)
	f.SetEnabled(false)
	file := create(t, f, "/data/a", "abc")
	check(t, file.Sync())
	check(t, f.SyncDir("/data"))
	f.SetEnabled(true)
	_, err := f.Create("/data/b")
	wantInjected(t, err, syscall.EIO)
	wantInjected(t, f.SyncDir("/data"), syscall.EIO)
}

func TestFaultyLatency(t *testing.T) {
	var slept []time.Duration
	config := FaultConfig{
		Seed:         7,
		Sleep:        func(d time.Duration) { slept = append(slept, d) },
		WriteLatency: Latency{Minimum: time.Millisecond, Maximum: 3 * time.Millisecond},
		SyncLatency:  Latency{Minimum: 5 * time.Millisecond, Maximum: 5 * time.Millisecond, SpikeProbability: 1, Spike: time.Second},
	}
	run := func() []time.Duration {
		slept = nil
		f, _ := newFaulty(t, config)
		file, err := f.Create("/data/a")
		check(t, err)
		for range 50 {
			_, err := file.Write([]byte("x"))
			check(t, err)
		}
		check(t, file.Sync())
		return slept
	}
	first := run()
	if len(first) != 51 || first[50] != time.Second {
		t.Fatalf("slept %d times, last %v; want 51, ending with the 1s spike", len(first), first[len(first)-1])
	}
	distinct := map[time.Duration]bool{}
	for _, d := range first[:50] {
		if d < time.Millisecond || d > 3*time.Millisecond {
			t.Fatalf("write latency %v outside [1ms, 3ms]", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct latencies", len(distinct))
	}
	if second := run(); !slices.Equal(first, second) {
		t.Fatal("same seed gave different latencies")
	}
}

// TestFaultyIsDeterministic replays the same calls on two FaultyFS with the
// same seed and expects the same faults.
func TestFaultyIsDeterministic(t *testing.T) {
	config := FaultConfig{Seed: 42, WriteErrorProbability: 0.3, PartialWriteProbability: 0.5}
	pattern := func() string {
		f, m := newFaulty(t, config)
		file, err := f.Create("/data/a")
		check(t, err)
		var out strings.Builder
		for range 100 {
			n, err := file.Write([]byte("0123456789"))
			out.WriteString(strings.Repeat("+", n))
			if err != nil {
				out.WriteString("!")
			}
		}
		content, _ := readMem(t, m, "/data/a")
		return out.String() + content
	}
	first := pattern()
	if !strings.Contains(first, "!") || first != pattern() {
		t.Fatalf("pattern %q not reproducible or without faults", first)
	}
}

func TestFaultConfigValidate(t *testing.T) {
	bad := []FaultConfig{
		{WriteErrorProbability: -0.1},
		{SyncErrorProbability: 1.5},
		{SpaceLimitBytes: -1},
		{WriteLatency: Latency{Minimum: 2, Maximum: 1}},
		{SyncLatency: Latency{Spike: -1}},
	}
	for _, config := range bad {
		if config.Validate() == nil {
			t.Errorf("Validate accepted %+v", config)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewFaulty accepted an invalid config")
		}
	}()
	NewFaulty(NewMem(), bad[0])
}

func TestOpString(t *testing.T) {
	if OpSync.String() != "sync" || Op(99).String() != "Op(99)" {
		t.Fatalf("got %q and %q", OpSync, Op(99))
	}
}
