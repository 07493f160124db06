package commitlog

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"sort"
	"sync"
	"syscall"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// appendKept appends count batches stamped at timestampMs as leader and
// returns the bytes the log holds for them. It then overwrites the
// caller's buffer, as the server's buffer pool reuses it after the pass:
// the log must have copied it.
func appendKept(t *testing.T, l *Log, count int, timestampMs int64) []byte {
	t.Helper()
	batches := testBatches(count, 1, 100, timestampMs)
	if _, err := appendAsLeader(l, batches, 0); err != nil {
		t.Fatal(err)
	}
	kept := append([]byte(nil), batches...)
	for i := range batches {
		batches[i] = 0xee
	}
	return kept
}

// readAll reads the log from from to its end and returns the bytes and
// the chunks they came in.
func readAll(t *testing.T, l *Log, from record.Offset) ([]byte, []Chunk) {
	t.Helper()
	result, err := l.Read(from, 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return data, result.Chunks
}

// memoryChunks counts the chunks in memory.
func memoryChunks(chunks []Chunk) int {
	n := 0
	for _, chunk := range chunks {
		if chunk.File == nil {
			n++
			if int64(len(chunk.Bytes)) != chunk.Size {
				panic("a memory chunk whose size is not its bytes'")
			}
		}
	}
	return n
}

// segmentFiles reads every segment file of the log's directory on fs, in
// offset order, concatenated: what the disk holds, whatever the log knows.
func segmentFiles(t *testing.T, fs disk.FS) []byte {
	t.Helper()
	names, err := fs.List("p")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var all []byte
	for _, name := range names {
		if _, ok := parseSegmentFileName(name); !ok {
			continue
		}
		file, err := fs.Open(path.Join("p", name))
		if err != nil {
			t.Fatal(err)
		}
		size, _ := file.Size()
		data := make([]byte, size)
		if _, err := file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		file.Close()
		all = append(all, data...)
	}
	return all
}

// Appended bytes are read back from memory until a completed job has
// written them: headers, whole batches, timestamps, and Read, whose
// chunks split where the file ends and the pending buffers begin.
func TestReadsOfThePendingTail(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	var want []byte
	for i := range 5 {
		want = append(want, appendKept(t, l, 1, 1000+int64(i))...)
	}
	data, chunks := readAll(t, l, 0)
	if !bytes.Equal(data, want) || memoryChunks(chunks) != len(chunks) {
		t.Fatalf("all pending: %d chunks, %d in memory, bytes equal %v", len(chunks), memoryChunks(chunks), bytes.Equal(data, want))
	}
	if found, ok, err := l.OffsetForTimestamp(1003, l.LogEndOffset()); err != nil || !ok || found.Offset != 3 {
		t.Fatalf("offset for timestamp 1003 in pending bytes: %+v %v %v", found, ok, err)
	}
	if headers, err := l.ReadHeaders(func(record.Header) bool { return true }); err != nil || len(headers) != 5 {
		t.Fatalf("headers of pending batches: %d, %v", len(headers), err)
	}

	// A completed job moves the boundary: [0, 5) from the file, the rest
	// from memory, and a read across it gets both.
	job := mustBegin(t, l)
	if _, err := l.CompleteSync(job, job.Run()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		want = append(want, appendKept(t, l, 1, 2000+int64(i))...)
	}
	data, chunks = readAll(t, l, 0)
	if !bytes.Equal(data, want) || len(chunks) != 2 || chunks[0].File == nil || chunks[1].File != nil {
		t.Fatalf("across the boundary: %d chunks, %d in memory, bytes equal %v", len(chunks), memoryChunks(chunks), bytes.Equal(data, want))
	}
	if chunks[1].Position != chunks[0].Size {
		t.Fatalf("the memory chunk starts at %d, the file chunk ends at %d", chunks[1].Position, chunks[0].Size)
	}

	// A job begun seals its buffer: the next append starts another, and a
	// read spans both. Once run but not completed, its bytes are in the
	// file and still read from memory; completed, from the file.
	sealed := mustBegin(t, l)
	want = append(want, appendKept(t, l, 2, 3000)...)
	data, chunks = readAll(t, l, 5)
	if !bytes.Equal(data, want[len(want)-len(data):]) || memoryChunks(chunks) != 2 {
		t.Fatalf("two pending buffers: %d chunks, %d in memory", len(chunks), memoryChunks(chunks))
	}
	runErr := sealed.Run()
	if data, chunks = readAll(t, l, 0); !bytes.Equal(data, want) || memoryChunks(chunks) != 2 {
		t.Fatalf("after the job ran: %d chunks, %d in memory", len(chunks), memoryChunks(chunks))
	}
	if _, err := l.CompleteSync(sealed, runErr); err != nil {
		t.Fatal(err)
	}
	if data, chunks = readAll(t, l, 0); !bytes.Equal(data, want) || memoryChunks(chunks) != 1 || chunks[0].File == nil {
		t.Fatalf("after the job completed: %d chunks, %d in memory", len(chunks), memoryChunks(chunks))
	}
	// A read that stops for maxBytes inside the pending tail.
	result, err := l.Read(8, 1, l.LogEndOffset())
	if err != nil || result.FirstOffset != 8 || result.NextOffset != 9 || result.InFiles() {
		t.Fatalf("one batch of the pending tail: %+v, %v", result, err)
	}
}

// segment.readAt against the bytes appended, on random reads across the
// file and the pending buffers, as appends, jobs and completions come in a
// random order; the file always holds a prefix of them.
func TestSegmentReadAtMatchesAppendedBytes(t *testing.T) {
	random := rand.New(rand.NewPCG(7, 7))
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{})
	var want []byte
	var job *SyncJob
	var ran error
	for step := range 300 {
		switch random.IntN(4) {
		case 0, 1:
			want = append(want, appendKept(t, l, 1+random.IntN(3), int64(step))...)
		case 2:
			if job == nil {
				if begun, ok := l.BeginSync(); ok {
					job, ran = &begun, nil
					if random.IntN(2) == 0 {
						ran = job.Run()
					}
				}
			}
		case 3:
			if job != nil {
				if _, err := l.CompleteSync(*job, errors.Join(ran, job.Run())); err != nil {
					t.Fatal(err)
				}
				job = nil
			}
		}
		s := l.segments[0]
		if files := segmentFiles(t, fs); !bytes.Equal(files, want[:len(files)]) || int64(len(files)) < s.flushed {
			t.Fatalf("step %d: the file's %d bytes are not a prefix of the %d appended, flushed %d", step, len(files), len(want), s.flushed)
		}
		for range 5 {
			if len(want) == 0 {
				break
			}
			position := random.IntN(len(want))
			length := 1 + random.IntN(len(want)-position)
			got := make([]byte, length)
			if n, err := s.readAt(got, int64(position)); n != length || err != nil || !bytes.Equal(got, want[position:position+length]) {
				t.Fatalf("step %d: readAt(%d, %d) read %d, %v, equal %v (flushed %d, size %d)", step, position, length, n, err, bytes.Equal(got, want[position:position+length]), s.flushed, s.size)
			}
		}
		if n, err := s.readAt(make([]byte, 1), int64(len(want))); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("step %d: a read at the end read %d, %v", step, n, err)
		}
	}
}

// A roll between a job's begin and run drains the segment it closes: the
// job finds its bytes written and writes none of them twice.
func TestSyncJobAcrossARollWritesNothingTwice(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{SegmentBytes: 2048, MaxBatchBytes: 1024})
	want := appendKept(t, l, 6, 1)
	job := mustBegin(t, l)
	for l.Segments() == 1 {
		want = append(want, appendKept(t, l, 1, 2)...)
	}
	if _, err := l.CompleteSync(job, job.Run()); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, fs); !bytes.Equal(files, want) {
		t.Fatalf("the files hold %d bytes, %d were appended", len(files), len(want))
	}
}

// A truncation between a job's begin and run writes the pending bytes
// before it cuts the file, and the job writes nothing: the file holds the
// kept prefix and what came after, once each.
func TestSyncJobAcrossATruncationWritesNothingTwice(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{})
	var want []byte
	var ends []int
	for range 6 {
		want = append(want, appendKept(t, l, 1, 1)...)
		ends = append(ends, len(want))
	}
	job := mustBegin(t, l)
	appendKept(t, l, 2, 2)
	if _, err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	want = want[:ends[3]]
	if durable, err := l.CompleteSync(job, job.Run()); err != nil || durable != 4 {
		t.Fatalf("the outdated job completed with %d, %v; want 4 (the truncation synced)", durable, err)
	}
	want = append(want, appendKept(t, l, 3, 3)...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, fs); !bytes.Equal(files, want) {
		t.Fatalf("the files hold %d bytes, want %d", len(files), len(want))
	}
}

// Jobs run on a worker while the owner appends, rolls and truncates (run
// with -race); at the end the files hold exactly the log's bytes.
func TestSyncJobsRacingRollsAndTruncations(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{SegmentBytes: 4096, MaxBatchBytes: 1024})
	jobs, done := make(chan SyncJob), make(chan error)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for job := range jobs {
			done <- job.Run()
		}
	}()
	var want []byte
	var ends []int // ends[i] is the end of offset i's batch in want
	var inFlight *SyncJob
	for i := range 500 {
		batch := appendKept(t, l, 1, int64(i))
		want = append(want, batch...)
		ends = append(ends, len(want))
		if i%41 == 40 {
			end, err := l.TruncateTo(l.LogEndOffset() - 3)
			if err != nil {
				t.Fatal(err)
			}
			want, ends = want[:ends[end-1]], ends[:end]
		}
		if inFlight == nil {
			if job, ok := l.BeginSync(); ok {
				inFlight = &job
				jobs <- job
			}
			continue
		}
		select {
		case runErr := <-done:
			if _, err := l.CompleteSync(*inFlight, runErr); err != nil {
				t.Fatal(err)
			}
			inFlight = nil
		default:
		}
	}
	if inFlight != nil {
		if _, err := l.CompleteSync(*inFlight, <-done); err != nil {
			t.Fatal(err)
		}
	}
	close(jobs)
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if data, _ := readAll(t, l, 0); !bytes.Equal(data, want) {
		t.Fatalf("the log reads %d bytes, want %d", len(data), len(want))
	}
	if files := segmentFiles(t, fs); !bytes.Equal(files, want) {
		t.Fatalf("the files hold %d bytes, want %d", len(files), len(want))
	}
}

// Close without a sync leaves every appended byte in the file, as a
// write(2) per append did; a job begun before it completes as a no-op.
func TestCloseWritesThePendingBytes(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{})
	want := appendKept(t, l, 4, 1)
	job := mustBegin(t, l)
	want = append(want, appendKept(t, l, 2, 2)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := job.Run(); !errors.Is(err, errSyncStale) {
		t.Fatalf("a job run after Close returned %v", err)
	}
	if files := segmentFiles(t, fs); !bytes.Equal(files, want) {
		t.Fatalf("the file's %d bytes after Close differ from the %d appended", len(files), len(want))
	}
	reopened := openTestLog(t, fs, Config{})
	if reopened.LogEndOffset() != 6 {
		t.Fatalf("reopened log ends at %d, want 6", reopened.LogEndOffset())
	}
}

// The write backlog is bounded: an append that would take the pending
// bytes past PendingBytesMax is refused and changes nothing, until a
// completed job has written them; an append larger than the bound goes in
// when nothing is pending.
func TestWriteBacklogIsBounded(t *testing.T) {
	one := int64(len(testBatches(1, 1, 100, 0)))
	l := openTestLog(t, disk.NewMem(), Config{PendingBytesMax: 3 * one})
	mustAppend(t, l, 3)
	if err := l.CheckWriteBacklog(one); !errors.Is(err, ErrWriteBacklog) {
		t.Fatalf("check with %d of %d bytes pending: %v", l.PendingBytes(), 3*one, err)
	}
	if _, err := appendAsLeader(l, testBatches(1, 1, 100, 0), 0); !errors.Is(err, ErrWriteBacklog) {
		t.Fatalf("append past the bound returned %v", err)
	}
	if l.LogEndOffset() != 3 || l.PendingBytes() != 3*one {
		t.Fatalf("a refused append changed the log: %s, %d pending", l, l.PendingBytes())
	}
	job := mustBegin(t, l)
	runErr := job.Run()
	if err := l.CheckWriteBacklog(one); !errors.Is(err, ErrWriteBacklog) {
		t.Fatalf("room before the job completed: %v", err)
	}
	if _, err := l.CompleteSync(job, runErr); err != nil {
		t.Fatal(err)
	}
	if l.PendingBytes() != 0 {
		t.Fatalf("%d bytes pending after the job", l.PendingBytes())
	}
	mustAppend(t, l, 5) // more than the bound, with nothing pending
	if _, err := appendAsLeader(l, testBatches(1, 1, 100, 0), 0); !errors.Is(err, ErrWriteBacklog) {
		t.Fatalf("append after an oversized one returned %v", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, 1)
}

// A drain that fails to write (a truncation's here) fails the log, as a
// job's failed write does, and nothing is written after it.
func TestFailedDrainFailsTheLog(t *testing.T) {
	faulty := disk.NewFaulty(disk.NewMem(), disk.FaultConfig{Seed: 1})
	l := openTestLog(t, faulty, Config{})
	mustAppend(t, l, 4)
	faulty.InjectOnce(disk.OpWrite, syscall.EIO)
	if _, err := l.TruncateTo(2); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("truncate with a failing write returned %v", err)
	}
	if _, ok := l.BeginSync(); ok {
		t.Fatal("a failed log began a sync")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close of a failed log: %v", err)
	}
}

// A power loss loses the appends no job wrote, even when the disk keeps
// every write it was given, and keeps everything synced.
func TestPowerLossLosesUnwrittenAppends(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{})
	mustAppend(t, l, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, 2)
	job := mustBegin(t, l)
	everything := disk.DefaultCrashOptions(1)
	everything.Survival, everything.TornProbability = disk.SurviveEverything, 0
	if crashed := openTestLog(t, fs.CrashCloneWith(everything), Config{}); crashed.LogEndOffset() != 3 {
		t.Fatalf("a power loss before the job ran kept the log to %d, want 3", crashed.LogEndOffset())
	}
	if err := job.Run(); err != nil {
		t.Fatal(err)
	}
	if crashed := reopenAfterPowerLoss(t, fs); crashed.LogEndOffset() != 5 {
		t.Fatalf("a power loss after the job ran kept the log to %d, want 5", crashed.LogEndOffset())
	}
}
