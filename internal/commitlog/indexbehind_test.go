package commitlog

import (
	"bytes"
	"errors"
	"io"
	"path"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidelog/tide/internal/disk"
)

// writeCountingFS counts the Write calls made on its files, by the files' name
// suffix: how many write(2) a log does, and where.
type writeCountingFS struct {
	disk.FS
	writes map[string]*atomic.Int64
}

func newWriteCountingFS(fs disk.FS) *writeCountingFS {
	c := &writeCountingFS{FS: fs, writes: map[string]*atomic.Int64{}}
	for _, suffix := range []string{segmentSuffix, indexSuffix, timeIndexSuffix, "other"} {
		c.writes[suffix] = &atomic.Int64{}
	}
	return c
}

func (c *writeCountingFS) counter(name string) *atomic.Int64 {
	for _, suffix := range []string{segmentSuffix, indexSuffix, timeIndexSuffix} {
		if strings.HasSuffix(name, suffix) {
			return c.writes[suffix]
		}
	}
	return c.writes["other"]
}

func (c *writeCountingFS) Create(name string) (disk.File, error) {
	file, err := c.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return writeCountingFile{file, c.counter(name)}, nil
}

func (c *writeCountingFS) Open(name string) (disk.File, error) {
	file, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return writeCountingFile{file, c.counter(name)}, nil
}

// total is the count of writes to segments and indexes (not checkpoints).
func (c *writeCountingFS) total() int64 {
	return c.writes[segmentSuffix].Load() + c.writes[indexSuffix].Load() + c.writes[timeIndexSuffix].Load()
}

type writeCountingFile struct {
	disk.File
	writes *atomic.Int64
}

func (f writeCountingFile) Write(p []byte) (int, error) {
	f.writes.Add(1)
	return f.File.Write(p)
}

// indexFileBytes reads an index file of the log's directory on fs.
func indexFileBytes(t *testing.T, fs disk.FS, name string) []byte {
	t.Helper()
	file, err := fs.Open(path.Join("p", name))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	size, _ := file.Size()
	data := make([]byte, size)
	if _, err := file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return data
}

// encodedEntries is what the segment's indexes hold in memory, encoded as
// their files hold them.
func encodedEntries(s *segment) ([]byte, []byte) {
	var index, timeIndex []byte
	for _, entry := range s.index.entries {
		index = encodeIndexEntry(index, entry)
	}
	for _, entry := range s.timeIndex.entries {
		timeIndex = encodeTimeIndexEntry(timeIndex, entry)
	}
	return index, timeIndex
}

// checkLookups compares reads by offset and lookups by timestamp of l with
// those of reference, for every offset and timestamp either holds.
func checkLookups(t *testing.T, when string, l, reference *Log, timestamps int64) {
	t.Helper()
	if l.LogEndOffset() != reference.LogEndOffset() {
		t.Fatalf("%s: log ends at %d, the reference at %d", when, l.LogEndOffset(), reference.LogEndOffset())
	}
	end := l.LogEndOffset()
	for offset := l.LogStartOffset(); offset < end; offset++ {
		got, err := l.Read(offset, 1, end)
		want, referenceErr := reference.Read(offset, 1, end)
		if err != nil || referenceErr != nil {
			t.Fatalf("%s: read at %d: %v, reference %v", when, offset, err, referenceErr)
		}
		gotBytes, _ := got.AppendTo(nil)
		wantBytes, _ := want.AppendTo(nil)
		if got.FirstOffset != want.FirstOffset || !bytes.Equal(gotBytes, wantBytes) {
			t.Fatalf("%s: read at %d starts at %d, the reference's at %d", when, offset, got.FirstOffset, want.FirstOffset)
		}
	}
	for timestamp := int64(0); timestamp <= timestamps; timestamp++ {
		got, gotOK, err := l.OffsetForTimestamp(timestamp, end)
		want, wantOK, referenceErr := reference.OffsetForTimestamp(timestamp, end)
		if err != nil || referenceErr != nil || gotOK != wantOK || got != want {
			t.Fatalf("%s: offset for timestamp %d: %+v %t %v, reference %+v %t %v", when, timestamp, got, gotOK, err, want, wantOK, referenceErr)
		}
	}
}

// Index entries are written behind, as segment bytes are: appends write
// nothing to any file, reads by offset and by timestamp answer from the
// entries in memory, and a job writes them after the segment's bytes, one
// Write per index, so that the index files hold what memory holds.
func TestIndexEntriesAreWrittenByTheJob(t *testing.T) {
	mem := disk.NewMem()
	fs := newWriteCountingFS(mem)
	l := openTestLog(t, fs, Config{IndexIntervalBytes: 256})
	reference := openTestLog(t, disk.NewMem(), Config{IndexIntervalBytes: 256})
	before := fs.total()
	for i := range 200 {
		batch := testBatches(1, 1, 100, int64(10+i))
		if _, err := appendAsLeader(l, batch, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := appendAsLeader(reference, testBatches(1, 1, 100, int64(10+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := reference.Sync(); err != nil {
		t.Fatal(err)
	}
	s := l.segments[0]
	if writes := fs.total() - before; writes != 0 || s.index.length() < 50 || s.timeIndex.length() < 50 {
		t.Fatalf("200 appends made %d writes and %d/%d index entries", writes, s.index.length(), s.timeIndex.length())
	}
	if len(indexFileBytes(t, mem, indexFileName(0))) != 0 || s.pendingIndexEntries() != s.index.length()+s.timeIndex.length() {
		t.Fatal("index entries in the file before any job")
	}
	checkLookups(t, "entries pending", l, reference, 220)

	job := mustBegin(t, l)
	for i := range 20 { // appends while the job is out: fresh entries, not the job's
		if _, err := appendAsLeader(l, testBatches(1, 1, 100, int64(210+i)), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := appendAsLeader(reference, testBatches(1, 1, 100, int64(210+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	before = fs.total()
	runErr := job.Run()
	if runErr != nil {
		t.Fatal(runErr)
	}
	if index, timeIndex := fs.writes[indexSuffix].Load(), fs.writes[timeIndexSuffix].Load(); index != 1 || timeIndex != 1 || fs.total()-before != 2+int64(len(job.writes[0].buffers)) {
		t.Fatalf("the job wrote %d times, %d to the index and %d to the time index; want one each and one per buffer (%d)", fs.total()-before, index, timeIndex, len(job.writes[0].buffers))
	}
	if _, err := l.CompleteSync(job, runErr); err != nil {
		t.Fatal(err)
	}
	if s.pendingIndexEntries() == 0 {
		t.Fatal("the entries added while the job was out are not pending")
	}
	checkLookups(t, "part written", l, reference, 240)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	index, timeIndex := encodedEntries(s)
	if !bytes.Equal(indexFileBytes(t, mem, indexFileName(0)), index) || !bytes.Equal(indexFileBytes(t, mem, timeIndexFileName(0)), timeIndex) {
		t.Fatal("after the jobs, the index files differ from the entries in memory")
	}
	checkLookups(t, "all written", l, reference, 240)
}

// A truncation between a job's begin and its run drains the entries and
// cuts the index files; the outdated job writes none of its entries, and
// the files then hold exactly the entries memory holds.
func TestIndexEntriesOfAJobRacingATruncation(t *testing.T) {
	mem := disk.NewMem()
	l := openTestLog(t, mem, Config{IndexIntervalBytes: 256})
	for i := range 60 {
		if _, err := appendAsLeader(l, testBatches(1, 1, 100, int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	job := mustBegin(t, l)
	if _, err := appendAsLeader(l, testBatches(1, 1, 100, 100), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(30); err != nil {
		t.Fatal(err)
	}
	s := l.segments[0]
	if s.pendingIndexEntries() != 0 {
		t.Fatal("the truncation left entries pending")
	}
	if durable, err := l.CompleteSync(job, job.Run()); err != nil || durable != 30 {
		t.Fatalf("the outdated job completed with %d, %v", durable, err)
	}
	for i := range 30 {
		if _, err := appendAsLeader(l, testBatches(1, 1, 100, int64(200+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	index, timeIndex := encodedEntries(s)
	if !bytes.Equal(indexFileBytes(t, mem, indexFileName(0)), index) || !bytes.Equal(indexFileBytes(t, mem, timeIndexFileName(0)), timeIndex) {
		t.Fatalf("the index files hold %d/%d bytes, memory %d/%d", len(indexFileBytes(t, mem, indexFileName(0))), len(indexFileBytes(t, mem, timeIndexFileName(0))), len(index), len(timeIndex))
	}
}

// A segment's entries leave memory only once they are in its index files:
// every inactive segment, spilled, has files holding all its entries, and
// a clean reopen finds every trusted segment's indexes consistent.
func TestSpillWritesPendingEntriesFirst(t *testing.T) {
	mem := disk.NewMem()
	config := Config{SegmentBytes: 4096, IndexIntervalBytes: 256}
	l := openTestLog(t, mem, config)
	for i := range 150 {
		if _, err := appendAsLeader(l, testBatches(1, 1, 100, int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.segments) < 3 {
		t.Fatalf("%d segments", len(l.segments))
	}
	// The segments rolled since the last job keep their entries in memory
	// until a job writes them.
	for _, s := range l.rolled {
		if s.index.spilled || s.pendingIndexEntries() == 0 {
			t.Fatalf("rolled segment %d: spilled %t with %d entries pending", s.baseOffset, s.index.spilled, s.pendingIndexEntries())
		}
	}
	if len(l.rolled) == 0 {
		t.Fatal("no rolled segment waits for a job")
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.segments[:len(l.segments)-1] {
		if !s.index.spilled || s.pendingIndexEntries() != 0 {
			t.Fatalf("segment %d: spilled %t with %d entries pending", s.baseOffset, s.index.spilled, s.pendingIndexEntries())
		}
		if got := int64(len(indexFileBytes(t, mem, indexFileName(s.baseOffset)))); got != int64(s.index.count)*indexEntryBytes || s.index.count == 0 {
			t.Fatalf("segment %d: index file of %d bytes for %d entries", s.baseOffset, got, s.index.count)
		}
		if got := int64(len(indexFileBytes(t, mem, timeIndexFileName(s.baseOffset)))); got != int64(s.timeIndex.count)*timeIndexEntryBytes {
			t.Fatalf("segment %d: time index file of %d bytes for %d entries", s.baseOffset, got, s.timeIndex.count)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openTestLog(t, mem, config)
	if rebuilt := reopened.Recovery().IndexesRebuilt; rebuilt != 0 {
		t.Fatalf("%d indexes rebuilt after a clean close", rebuilt)
	}
}

// Power loss with index entries never written (appended after the last
// job, or written by a job whose index files no fsync covered): recovery
// rebuilds what it must, and reads by offset and by timestamp answer as a
// log that never crashed does.
func TestCrashWithIndexEntriesNeverWritten(t *testing.T) {
	for _, survival := range []disk.Survival{disk.SurviveNothing, disk.SurviveRandomPrefix, disk.SurviveEverything} {
		for seed := range int64(8) {
			mem := disk.NewMem()
			config := Config{SegmentBytes: 8192, IndexIntervalBytes: 200}
			l := openTestLog(t, mem, config)
			reference := openTestLog(t, disk.NewMem(), config)
			appendBoth := func(from, to int) {
				for i := from; i < to; i++ {
					for _, target := range []*Log{l, reference} {
						if _, err := appendAsLeader(target, testBatches(1, 1+i%3, 60, int64(1000+i)), 0); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			durableCount := 100 + int(seed)*7
			appendBoth(0, durableCount)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			durable := l.DurableEndOffset()
			appendBoth(durableCount, durableCount+40) // unwritten, but what a roll synced
			options := disk.DefaultCrashOptions(seed)
			options.Survival = survival
			recovered := openTestLog(t, mem.CrashCloneWith(options), config)
			if recovered.LogEndOffset() < durable {
				t.Fatalf("recovered to %d, %d was durable", recovered.LogEndOffset(), durable)
			}
			if _, err := reference.TruncateTo(recovered.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			checkLookups(t, "after the crash", recovered, reference, int64(1000+durableCount+50))
		}
	}
}
