package commitlog

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tidelog/tide/internal/disk"
)

// rollWithPendingBytes appends to a log of small segments until it has
// rolled with the closed segment's last appends still pending, plus one
// append into the new segment, and returns the bytes appended and the
// offset where each batch ends in them.
func rollWithPendingBytes(t *testing.T, l *Log) ([]byte, []int) {
	t.Helper()
	var appended []byte
	var ends []int
	for i := 0; l.Segments() == 1 || len(l.rolled) == 0 || l.segments[len(l.segments)-1].size == 0; i++ {
		appended = append(appended, appendKept(t, l, 1, int64(100+i))...)
		ends = append(ends, len(appended))
		if i == 3 {
			if err := l.Sync(); err != nil { // a durable prefix, then pending bytes
				t.Fatal(err)
			}
		}
	}
	if l.segments[0].pendingBytes() == 0 || l.segments[0].pendingIndexEntries() == 0 {
		t.Fatal("the closed segment has nothing pending")
	}
	return appended, ends
}

// A roll leaves the closed segment's writes, fsyncs, the directory sync
// and the checkpoint to the next job. A power loss at each point of that
// job (before it runs; written but not synced; synced but the checkpoint
// not written; done) recovers a prefix of what was appended, at least
// what was durable, with no hole: the old segment's durable part, and the
// new segment dropped, or both whole.
func TestCrashAtEachPointOfARollsJob(t *testing.T) {
	points := []string{"before-run", "written", "synced", "completed"}
	for _, point := range points {
		for _, survival := range []disk.Survival{disk.SurviveNothing, disk.SurviveRandomPrefix, disk.SurviveEverything} {
			for seed := range int64(6) {
				t.Run(fmt.Sprintf("%s/%d/%d", point, survival, seed), func(t *testing.T) {
					crashAtPointOfARollsJob(t, point, survival, seed)
				})
			}
		}
	}
}

func crashAtPointOfARollsJob(t *testing.T, point string, survival disk.Survival, seed int64) {
	mem := disk.NewMem()
	config := Config{SegmentBytes: 2048, MaxBatchBytes: 1024, IndexIntervalBytes: 128}
	l := openTestLog(t, mem, config)
	appended, ends := rollWithPendingBytes(t, l)
	durable, recoveryPoint := l.DurableEndOffset(), l.RecoveryPoint()
	job := mustBegin(t, l)
	switch point {
	case "written":
		l.mu.Lock()
		if err := l.drainLocked(); err != nil {
			t.Fatal(err)
		}
		l.mu.Unlock()
	case "synced":
		l.syncMu.Lock()
		if err := job.writeAndSyncHoldingSyncMu(); err != nil {
			t.Fatal(err)
		}
		l.syncMu.Unlock()
		durable = job.EndOffset()
	case "completed":
		if _, err := l.CompleteSync(job, job.Run()); err != nil {
			t.Fatal(err)
		}
		durable, recoveryPoint = job.EndOffset(), l.segments[1].baseOffset
		if l.RecoveryPoint() != recoveryPoint {
			t.Fatalf("the recovery point is %d after the job, want %d", l.RecoveryPoint(), recoveryPoint)
		}
	}
	if point != "completed" && l.RecoveryPoint() != 0 {
		t.Fatalf("the recovery point moved to %d before the job completed", l.RecoveryPoint())
	}
	options := disk.DefaultCrashOptions(seed)
	options.Survival = survival
	recovered := openTestLog(t, mem.CrashCloneWith(options), config)
	end := recovered.LogEndOffset()
	if end < durable || recovered.Recovery().ScannedFrom > recoveryPoint {
		t.Fatalf("recovered to %d, scanned from %d; %d was durable, the recovery point %d", end, recovered.Recovery().ScannedFrom, durable, recoveryPoint)
	}
	var want []byte
	if end > 0 {
		want = appended[:ends[end-1]]
	}
	if got := readBack(t, recovered); !bytes.Equal(got, want) {
		t.Fatalf("recovered %d bytes to offset %d, not the %d appended before it", len(got), end, len(want))
	}
	checkReadsAt(t, recovered, appended, ends[:end], []int{0, int(end) / 2, max(int(end)-1, 0)})
	if point == "completed" && recovered.Recovery().IndexesRebuilt != 0 {
		t.Fatal("the settled segment's indexes were rebuilt")
	}
}

// A job out while a second roll comes: it settles the first rolled
// segment only and checkpoints its successor's base; the next job settles
// the second. Reads across both boundaries, with the closed segments'
// tails in memory, return the bytes appended.
func TestJobRacingASecondRoll(t *testing.T) {
	mem := disk.NewMem()
	l := openTestLog(t, mem, Config{SegmentBytes: 2048, MaxBatchBytes: 1024, IndexIntervalBytes: 128})
	appended, ends := rollWithPendingBytes(t, l)
	first := l.segments[0]
	job := mustBegin(t, l)
	for len(l.segments) < 3 {
		appended = append(appended, appendKept(t, l, 1, int64(500+len(ends)))...)
		ends = append(ends, len(appended))
	}
	appended = append(appended, appendKept(t, l, 1, 999)...)
	ends = append(ends, len(appended))
	if len(l.rolled) != 2 {
		t.Fatalf("%d rolled segments, want 2", len(l.rolled))
	}
	data, chunks := readAll(t, l, 0)
	if !bytes.Equal(data, appended) || memoryChunks(chunks) < 2 {
		t.Fatalf("a read across two rolls: %d bytes of %d, %d memory chunks", len(data), len(appended), memoryChunks(chunks))
	}
	checkReadsAt(t, l, appended, ends, []int{0, len(ends) / 2, len(ends) - 1, int(l.segments[1].baseOffset), int(l.segments[2].baseOffset)})
	if _, err := l.CompleteSync(job, job.Run()); err != nil {
		t.Fatal(err)
	}
	if len(l.rolled) != 1 || l.rolled[0] != l.segments[1] || !first.index.spilled || l.RecoveryPoint() != l.segments[1].baseOffset {
		t.Fatalf("after the first job: %d rolled, recovery point %d, first spilled %t", len(l.rolled), l.RecoveryPoint(), first.index.spilled)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(l.rolled) != 0 || l.RecoveryPoint() != l.segments[2].baseOffset {
		t.Fatalf("after the second job: %d rolled, recovery point %d", len(l.rolled), l.RecoveryPoint())
	}
	if data, _ := readAll(t, l, 0); !bytes.Equal(data, appended) {
		t.Fatal("the log differs from what was appended")
	}
	if files := segmentFiles(t, mem); !bytes.Equal(files, appended) {
		t.Fatalf("the files hold %d bytes, %d were appended", len(files), len(appended))
	}
}

// A checkpoint the owner writes while a job is out (a log start move)
// wins: the job writes none over it, and the next job writes the
// recovery point it could not.
func TestJobCheckpointAfterAnOwnersCheckpoint(t *testing.T) {
	mem := disk.NewMem()
	l := openTestLog(t, mem, Config{SegmentBytes: 2048, MaxBatchBytes: 1024})
	rollWithPendingBytes(t, l)
	job := mustBegin(t, l)
	if err := l.SetHighWatermark(2); err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceLogStartOffset(2); err != nil { // settles the roll inline, writes the checkpoint
		t.Fatal(err)
	}
	if _, err := l.CompleteSync(job, job.Run()); err != nil {
		t.Fatal(err)
	}
	checkpoint, err := readSmallFile(mem, "p/"+offsetsCheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := unmarshalOffsetsCheckpoint(checkpoint)
	if err != nil || parsed.LogStartOffset != 2 {
		t.Fatalf("checkpoint %+v, %v: the job overwrote the log start", parsed, err)
	}
	if l.RecoveryPoint() != parsed.RecoveryPoint {
		t.Fatalf("the log's recovery point %d, the file's %d", l.RecoveryPoint(), parsed.RecoveryPoint)
	}
	mustAppend(t, l, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != l.segments[len(l.segments)-1].baseOffset {
		t.Fatalf("the next job left the recovery point at %d, the active segment starts at %d", l.RecoveryPoint(), l.segments[len(l.segments)-1].baseOffset)
	}
}

// The loop writes nothing to a segment or an index while it appends, rolls
// included: a roll creates files and leaves every write to the job.
func TestAppendsAcrossRollsWriteNothing(t *testing.T) {
	mem := disk.NewMem()
	fs := newWriteCountingFS(mem)
	l := openTestLog(t, fs, Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 256})
	appendKept(t, l, 1, 1) // the first epoch's checkpoint
	before := fs.total()
	for i := range 400 {
		appendKept(t, l, 1, int64(2+i))
	}
	if l.Segments() < 3 {
		t.Fatalf("%d segments, want rolls", l.Segments())
	}
	if writes := fs.total() - before; writes != 0 {
		t.Fatalf("%d writes to segments and indexes while appending across %d rolls", writes, l.Segments()-1)
	}
}
