package raftlog

import (
	"testing"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkSaveReady measures one typical Ready of the metadata quorum:
// one 200-byte entry and a hard state whose commit moves, on MemFS (the
// code's own cost) and on real files (with the fsyncs).
func BenchmarkSaveReady(b *testing.B) {
	for _, fs := range []struct {
		name string
		dir  func() (disk.FS, string)
	}{
		{"memfs", func() (disk.FS, string) { return disk.NewMem(), "raft" }},
		{"os", func() (disk.FS, string) { return disk.OS(), b.TempDir() + "/raft" }},
	} {
		b.Run(fs.name, func(b *testing.B) {
			filesystem, dir := fs.dir()
			s := mustOpen(b, Config{FS: filesystem, Dir: dir})
			defer s.Close()
			data := string(make([]byte, 200))
			b.ResetTimer()
			for i := uint64(1); i <= uint64(b.N); i++ {
				if err := s.Save(newHardState(1, 1, i-1), []*pb.Entry{newEntry(i, 1, data)}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
