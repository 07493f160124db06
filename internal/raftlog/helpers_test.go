package raftlog

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

const testDir = "raft"

// testConfig is a configuration with small segments, so that tests roll
// and remove segments often.
func testConfig(fs disk.FS) Config {
	return Config{FS: fs, Dir: testDir, SegmentBytes: SegmentBytesMin, MaxEntryBytes: 1024}
}

func mustOpen(t testing.TB, cfg Config) *Storage {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func newEntry(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

// entryRange returns entries [lo, hi) in term, with data saying where they
// came from.
func entryRange(lo, hi, term uint64) []*pb.Entry {
	var entries []*pb.Entry
	for i := lo; i < hi; i++ {
		entries = append(entries, newEntry(i, term, fmt.Sprintf("entry %d term %d", i, term)))
	}
	return entries
}

func newHardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func describeEntries(entries []*pb.Entry) string {
	var parts []string
	for _, e := range entries {
		parts = append(parts, fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm()))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sameEntries(a, b []*pb.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
