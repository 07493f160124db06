package disk

import (
	"fmt"
	"testing"
)

// BenchmarkAppendSync measures the common log path: append a batch, sync.
func BenchmarkAppendSync(b *testing.B) {
	batch := make([]byte, 4096)
	for _, implementation := range []struct {
		name string
		fsys FS
		root string
	}{
		{"mem", NewMem(), "/"},
		{"os", OS(), b.TempDir()},
	} {
		b.Run(implementation.name, func(b *testing.B) {
			file, err := implementation.fsys.Create(implementation.root + "/log")
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if _, err := file.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := file.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCrashClone measures crashing 100 files with unsynced tails.
func BenchmarkCrashClone(b *testing.B) {
	m := NewMem()
	batch := make([]byte, 1024)
	for i := range 100 {
		file, err := m.Create(fmt.Sprintf("/f%03d", i))
		if err != nil {
			b.Fatal(err)
		}
		for j := range 64 {
			if _, err := file.Write(batch); err != nil {
				b.Fatal(err)
			}
			if j == 32 {
				if err := file.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	var seed int64
	for b.Loop() {
		seed++
		m.CrashClone(seed)
	}
}
