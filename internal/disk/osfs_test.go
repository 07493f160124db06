package disk

import (
	"io/fs"
	"path"
	"testing"
)

func TestOSFileExposesOSFile(t *testing.T) {
	name := path.Join(t.TempDir(), "a")
	file := create(t, OS(), name, "abc")
	defer file.Close()
	osFile, ok := file.(OSFile)
	if !ok {
		t.Fatalf("%T does not implement OSFile", file)
	}
	if got := osFile.OSFile().Name(); got != name {
		t.Fatalf("OSFile().Name() = %q, want %q", got, name)
	}
}

func TestOSClosedWrapsBothErrors(t *testing.T) {
	file := create(t, OS(), path.Join(t.TempDir(), "a"), "abc")
	check(t, file.Close())
	err := file.Sync()
	wantErrorIs(t, err, ErrClosed)
	wantErrorIs(t, err, fs.ErrClosed)
}

func TestFaultyFileHidesOSFile(t *testing.T) {
	f := NewFaulty(OS(), FaultConfig{})
	file := create(t, f, path.Join(t.TempDir(), "a"), "")
	defer file.Close()
	if _, ok := file.(OSFile); ok {
		t.Fatal("a FaultyFS file exposes its *os.File, bypassing injection")
	}
}
