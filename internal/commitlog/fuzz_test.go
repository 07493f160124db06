package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// FuzzRecovery damages the bytes of a synced log's segments and reopens it.
// Recovery must never panic or hang, must keep every batch that lies before
// the damage byte for byte, may cut only what lies after it, and may refuse
// to open (with a CorruptionError) only when the damage is below the
// recovery point.
func FuzzRecovery(f *testing.F) {
	f.Add(uint8(0), uint16(100), []byte("XXXX"), uint8(5))
	f.Add(uint8(1), uint16(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(12))
	f.Add(uint8(2), uint16(61), []byte{0xff}, uint8(0))
	f.Add(uint8(1), uint16(9), []byte{0x7f, 0xff, 0xff}, uint8(30))
	f.Fuzz(func(t *testing.T, segmentChoice uint8, position uint16, damage []byte, checkpointAfter uint8) {
		if len(damage) == 0 || len(damage) > 64 {
			return
		}
		mem := disk.NewMem()
		cfg := Config{FS: mem, Dir: "p", SegmentBytes: 2048, IndexIntervalBytes: 128}
		l, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var batches [][]byte
		for i := 0; i < 30; i++ {
			if _, err := appendAsLeader(l, testBatches(1, 1+i%3, 40+i*7%50, int64(i)), record.LeaderEpoch(i/8)); err != nil {
				t.Fatal(err)
			}
			if i == int(checkpointAfter)%30 {
				l.Sync()
				l.Checkpoint()
			}
		}
		l.Sync()
		all, err := l.Read(0, 1<<20, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		original, _ := all.AppendTo(nil)
		it := record.NewIterator(original, record.Limits{MaxBatchBytes: 1 << 20})
		for it.Next() {
			batches = append(batches, bytes.Clone(it.Batch()))
		}
		recoveryPoint := l.RecoveryPoint()
		names := segmentNames(t, mem)
		name := names[int(segmentChoice)%len(names)]
		size, _ := mem.Stat(path.Join("p", name))
		if size == 0 {
			return
		}
		at := int64(position) % size
		damage = damage[:min(int64(len(damage)), size-at)]
		if err := mem.CorruptAt(path.Join("p", name), at, damage); err != nil {
			t.Fatal(err)
		}
		// Drop l without closing, as a crash would; everything was synced.
		reopened, err := Open(cfg)
		damagedOffset := offsetAtPosition(batches, name, at)
		if err != nil {
			var corruption *CorruptionError
			if !errors.As(err, &corruption) {
				t.Fatalf("open failed with %v, want a CorruptionError", err)
			}
			if damagedOffset >= recoveryPoint {
				t.Fatalf("refused to open for damage at offset %d, above the recovery point %d: %v", damagedOffset, recoveryPoint, err)
			}
			return
		}
		defer reopened.Close()
		result, err := reopened.Read(reopened.LogStartOffset(), 1<<20, 1<<20)
		if err != nil {
			return // damage in a trusted segment may surface on read
		}
		recovered, err := result.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		var before []byte
		for _, batch := range batches {
			if record.BaseOffset(batch) >= damagedOffset {
				break
			}
			before = append(before, batch...)
		}
		if !bytes.HasPrefix(recovered, before) {
			t.Fatalf("recovery lost batches before the damage at offset %d (%s byte %d): kept %d of %d bytes", damagedOffset, name, at, len(recovered), len(before))
		}
	})
}

func segmentNames(t *testing.T, mem *disk.MemFS) []string {
	names, err := mem.List("p")
	if err != nil {
		t.Fatal(err)
	}
	var segments []string
	for _, name := range names {
		if _, ok := parseSegmentFileName(name); ok {
			segments = append(segments, name)
		}
	}
	return segments
}

// offsetAtPosition returns the base offset of the batch of segment name that
// holds byte position.
func offsetAtPosition(batches [][]byte, name string, position int64) record.Offset {
	base, _ := parseSegmentFileName(name)
	var at int64
	for _, batch := range batches {
		offset := record.BaseOffset(batch)
		if offset < base {
			continue
		}
		if at+int64(len(batch)) > position {
			return offset
		}
		at += int64(len(batch))
	}
	panic(fmt.Sprintf("no batch at %s byte %d", name, position))
}
