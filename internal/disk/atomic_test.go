package disk

import (
	"io"
	"testing"
)

// Once WriteFileAtomically returns, the new content survives a power loss
// that keeps only what was synced; no temporary file is left behind.
func TestWriteFileAtomicallyIsDurable(t *testing.T) {
	fs := NewMem()
	if err := fs.MkdirAll("dir"); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"old", "new content"} {
		if err := WriteFileAtomically(fs, "dir", "f", []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	options := DefaultCrashOptions(1)
	options.Survival = SurviveNothing
	crashed := fs.CrashCloneWith(options)
	file, err := crashed.Open("dir/f")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(io.NewSectionReader(file, 0, 100))
	if err != nil || string(data) != "new content" {
		t.Fatalf("after a power loss the file holds %q (%v)", data, err)
	}
	if names, _ := crashed.List("dir"); len(names) != 1 {
		t.Fatalf("files left: %v", names)
	}
}
