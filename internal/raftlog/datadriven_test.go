package raftlog

import (
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestDatadriven runs the scripts in testdata/scripts. Each command prints
// what it did, then every filesystem operation it caused (creations,
// writes with their sizes, syncs, renames, removals, truncations and
// directory syncs), so the expected output pins down the durability
// protocol, the order of every sync, and not just the result.
//
// Commands:
//
//	open [segment-bytes=N]
//	save [hs=TERM/VOTE/COMMIT] [entries=LO-HI] [term=T] [data-bytes=N]
//	create-snapshot index=I
//	compact index=I
//	apply-snapshot index=I term=T     (with the hard state T/0/I, as raft saves it)
//	crash [survive=nothing|everything|random] [seed=S]   (then reopens)
//	corrupt file=NAME at=N bytes=TEXT    (overwrites durable bytes)
//	garbage file=NAME bytes=N            (appends N bytes of 0xff, durably)
//	describe | close
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, file string) {
		h := &scriptHarness{mem: disk.NewMem(), cfg: testConfig(nil)}
		defer h.close()
		datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.run(t, d)
			if err != nil {
				out += fmt.Sprintf("error: %v\n", err)
			}
			for _, op := range h.fs.Take() {
				out += "  fs: " + op + "\n"
			}
			return out
		})
	})
}

type scriptHarness struct {
	mem *disk.MemFS
	fs  *disk.LoggingFS
	cfg Config
	s   *Storage
}

func (h *scriptHarness) close() {
	if h.s != nil {
		h.s.Close()
	}
}

func (h *scriptHarness) open() (string, error) {
	h.fs = &disk.LoggingFS{FS: h.mem, LogWrites: true}
	h.cfg.FS = h.fs
	s, err := Open(h.cfg)
	if err != nil {
		return "", err
	}
	h.s = s
	return describeRecovery(s.Recovery()) + describeStorage(s), nil
}

func (h *scriptHarness) run(t *testing.T, d *datadriven.TestData) (string, error) {
	if h.fs == nil {
		h.fs = &disk.LoggingFS{FS: h.mem, LogWrites: true}
	}
	switch d.Cmd {
	case "open":
		if d.HasArg("segment-bytes") {
			d.ScanArgs(t, "segment-bytes", &h.cfg.SegmentBytes)
		}
		return h.open()
	case "save":
		return h.save(t, d)
	case "create-snapshot":
		var index uint64
		d.ScanArgs(t, "index", &index)
		_, err := h.s.CreateSnapshot(index, &pb.ConfState{Voters: []uint64{1, 2, 3}}, fmt.Appendf(nil, "image at %d", index))
		return "", err
	case "compact":
		var index uint64
		d.ScanArgs(t, "index", &index)
		return "", h.s.Compact(index)
	case "apply-snapshot":
		var index, term uint64
		d.ScanArgs(t, "index", &index)
		d.ScanArgs(t, "term", &term)
		snapshot := &pb.Snapshot{Data: []byte("leader image"), Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
		return "", h.s.Save(newHardState(term, 0, index), nil, snapshot)
	case "crash":
		return h.crash(t, d)
	case "corrupt", "garbage":
		return "", h.damage(t, d)
	case "describe":
		return describeStorage(h.s), nil
	case "close":
		err := h.s.Close()
		h.s = nil
		return "", err
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return "", nil
}

func (h *scriptHarness) save(t *testing.T, d *datadriven.TestData) (string, error) {
	var hs *pb.HardState
	if d.HasArg("hs") {
		var text string
		d.ScanArgs(t, "hs", &text)
		var term, vote, commit uint64
		if _, err := fmt.Sscanf(text, "%d/%d/%d", &term, &vote, &commit); err != nil {
			t.Fatalf("hs=%q: %v", text, err)
		}
		hs = newHardState(term, vote, commit)
	}
	var entries []*pb.Entry
	if d.HasArg("entries") {
		var text string
		var lo, hi, term, dataBytes uint64 = 0, 0, 1, 20
		d.ScanArgs(t, "entries", &text)
		if _, err := fmt.Sscanf(text, "%d-%d", &lo, &hi); err != nil {
			t.Fatalf("entries=%q: %v", text, err)
		}
		if d.HasArg("term") {
			d.ScanArgs(t, "term", &term)
		}
		if d.HasArg("data-bytes") {
			d.ScanArgs(t, "data-bytes", &dataBytes)
		}
		for i := lo; i <= hi; i++ {
			entries = append(entries, newEntry(i, term, strings.Repeat("d", int(dataBytes))))
		}
	}
	return "", h.s.Save(hs, entries, nil)
}

func (h *scriptHarness) crash(t *testing.T, d *datadriven.TestData) (string, error) {
	options := disk.CrashOptions{Survival: disk.SurviveNothing}
	if d.HasArg("survive") {
		var survive string
		d.ScanArgs(t, "survive", &survive)
		options.Survival = map[string]disk.Survival{"nothing": disk.SurviveNothing, "everything": disk.SurviveEverything, "random": disk.SurviveRandomPrefix}[survive]
	}
	if d.HasArg("seed") {
		d.ScanArgs(t, "seed", &options.Seed)
	}
	if h.s != nil {
		h.s.Close()
		h.s = nil
	}
	h.mem = h.mem.CrashCloneWith(options)
	return h.open()
}

func (h *scriptHarness) damage(t *testing.T, d *datadriven.TestData) error {
	var name string
	d.ScanArgs(t, "file", &name)
	name = path.Join(testDir, name)
	if d.Cmd == "corrupt" {
		var at int64
		var text string
		d.ScanArgs(t, "at", &at)
		d.ScanArgs(t, "bytes", &text)
		return h.mem.CorruptAt(name, at, []byte(text))
	}
	var count int
	d.ScanArgs(t, "bytes", &count)
	file, err := h.mem.Open(name)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.Write([]byte(strings.Repeat("\xff", count))); err != nil {
		return err
	}
	return file.Sync()
}

func describeRecovery(r RecoveryReport) string {
	out := fmt.Sprintf("recovered: segments=%d entries=%d", r.SegmentsRead, r.EntriesRead)
	if r.TruncatedBytes > 0 || r.RemovedSegments > 0 {
		out += fmt.Sprintf(" cut=%d bytes removed-segments=%d", r.TruncatedBytes, r.RemovedSegments)
	}
	if r.LogResetToSnapshot {
		out += " log-reset-to-snapshot"
	}
	if r.RemovedTemporaryFiles > 0 {
		out += fmt.Sprintf(" removed-temporary=%d", r.RemovedTemporaryFiles)
	}
	if r.TailError != nil {
		out += fmt.Sprintf("\ntail: %v", r.TailError)
	}
	return out + "\n"
}

func describeStorage(s *Storage) string {
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	term, _ := s.Term(first - 1)
	hs, _, _ := s.InitialState()
	snapshot, _ := s.Snapshot()
	out := fmt.Sprintf("log [%d, %d] after term %d; hard state %d/%d/%d; snapshot %d/%d\n", first, last, term,
		hs.GetTerm(), hs.GetVote(), hs.GetCommit(), snapshot.GetMetadata().GetIndex(), snapshot.GetMetadata().GetTerm())
	for _, segment := range s.segments {
		out += fmt.Sprintf("segment %s [%d, %d] bytes=%d\n", path.Base(segment.name), segment.header.base, segment.lastIndex(), segment.size)
	}
	return out
}
