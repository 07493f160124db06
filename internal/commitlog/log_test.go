package commitlog

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

func openTestLog(t *testing.T, fs disk.FS, cfg Config) *Log {
	t.Helper()
	cfg.FS, cfg.Dir = fs, "p"
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A failed fsync is fatal: the log must not retry and carry on, because the
// kernel may have dropped the dirty pages it failed to write.
func TestFailedSyncIsFatal(t *testing.T) {
	faulty := disk.NewFaulty(disk.NewMem(), disk.FaultConfig{Seed: 1})
	l := openTestLog(t, faulty, Config{})
	if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), 0); err != nil {
		t.Fatal(err)
	}
	faulty.FailSyncAfter(0)
	err := l.Sync()
	if !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failing sync returned %v, want ErrLogFailed wrapping EIO", err)
	}
	if got := l.DurableEndOffset(); got != 1 {
		t.Fatalf("durable end offset %d after the failed sync, want 1", got)
	}
	faulty.SetEnabled(false)
	if err := l.Sync(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("sync after a failed sync returned %v, want ErrLogFailed", err)
	}
	if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after a failed sync returned %v, want ErrLogFailed", err)
	}
	if _, err := l.Read(0, 100, 10); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("read after a failed sync returned %v, want ErrLogFailed", err)
	}
}

func TestFailedWriteIsFatal(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(*disk.FaultyFS)
		errno  error
	}{
		{"eio", func(f *disk.FaultyFS) { f.InjectOnce(disk.OpWrite, syscall.EIO) }, syscall.EIO},
		{"enospc", func(f *disk.FaultyFS) { f.SetSpaceLimit(f.UsedBytes() + 50) }, syscall.ENOSPC},
	} {
		t.Run(c.name, func(t *testing.T) {
			faulty := disk.NewFaulty(disk.NewMem(), disk.FaultConfig{Seed: 1})
			l := openTestLog(t, faulty, Config{})
			if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), 0); err != nil {
				t.Fatal(err)
			}
			c.inject(faulty)
			// The append only copies into memory; the sync job's write
			// fails, and its completion fails the log: never retried.
			if _, err := appendAsLeader(l, testBatches(1, 1, 100, 0), 0); err != nil {
				t.Fatalf("append returned %v: an append writes nothing", err)
			}
			job, ok := l.BeginSync()
			if !ok {
				t.Fatal("nothing to sync after two appends")
			}
			runErr := job.Run()
			if !errors.Is(runErr, c.errno) {
				t.Fatalf("job returned %v, want %v", runErr, c.errno)
			}
			_, err := l.CompleteSync(job, runErr)
			if !errors.Is(err, ErrLogFailed) || !errors.Is(err, c.errno) {
				t.Fatalf("completion returned %v, want ErrLogFailed wrapping %v", err, c.errno)
			}
			if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), 0); !errors.Is(err, ErrLogFailed) {
				t.Fatalf("append after a failed write returned %v", err)
			}
			if _, err := l.TruncateTo(0); !errors.Is(err, ErrLogFailed) {
				t.Fatalf("truncate after a failed write returned %v", err)
			}
			if l.DurableEndOffset() != 0 {
				t.Fatalf("durable end %d after a failed write, want 0", l.DurableEndOffset())
			}
		})
	}
}

// A bad batch from a producer or a peer is refused with a typed error and
// leaves the log unchanged.
func TestAppendRejectsBadBatches(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	good := testBatches(1, 2, 10, 0)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	for _, c := range []struct {
		name  string
		bytes []byte
		want  error
	}{
		{"crc", corrupt, record.ErrCorrupt},
		{"torn", good[:len(good)-3], record.ErrTruncated},
		{"too short", good[:10], record.ErrTruncated},
	} {
		if _, err := appendAsLeader(l, append([]byte(nil), c.bytes...), 0); !errors.Is(err, c.want) {
			t.Errorf("%s: leader append returned %v, want %v", c.name, err, c.want)
		}
		if _, err := l.Append(append([]byte(nil), c.bytes...)); !errors.Is(err, c.want) {
			t.Errorf("%s: follower append returned %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := appendAsLeader(l, testBatches(1, 1, 10, 0), -1); !errors.Is(err, ErrEpochRegression) {
		t.Errorf("append in epoch -1 returned %v", err)
	}
	if end := l.LogEndOffset(); end != 0 {
		t.Fatalf("rejected appends moved the log end offset to %d", end)
	}
}

// countingFS counts segment syncs and makes each one slow, so that syncs
// overlap appends and reads.
type countingFS struct {
	disk.FS
	syncs atomic.Int64
	delay time.Duration
}

func (f *countingFS) Create(name string) (disk.File, error) {
	file, err := f.FS.Create(name)
	return &countingFile{File: file, fs: f}, err
}

func (f *countingFS) Open(name string) (disk.File, error) {
	file, err := f.FS.Open(name)
	return &countingFile{File: file, fs: f}, err
}

type countingFile struct {
	disk.File
	fs *countingFS
}

func (f *countingFile) Sync() error {
	f.fs.syncs.Add(1)
	time.Sleep(f.fs.delay)
	return f.File.Sync()
}

// Appends (serialised by the caller, as the broker's one loop does) and
// syncs from many goroutines run safely together: each sync makes durable
// everything appended before it, and the batches read back whole. The
// small-segment case rolls while syncs run.
func TestConcurrentAppendsAndSyncs(t *testing.T) {
	for _, segmentBytes := range []int64{1 << 30, 4096} {
		t.Run(fmt.Sprintf("segment-bytes=%d", segmentBytes), func(t *testing.T) {
			testConcurrentAppendsAndSyncs(t, segmentBytes)
		})
	}
}

func testConcurrentAppendsAndSyncs(t *testing.T, segmentBytes int64) {
	fs := &countingFS{FS: disk.NewMem(), delay: time.Millisecond}
	l := openTestLog(t, fs, Config{SegmentBytes: segmentBytes})
	const appenders, appendsEach = 8, 20
	var wg sync.WaitGroup
	var appending sync.Mutex // the caller stamps and appends in order
	errs := make(chan error, appenders)
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range appendsEach {
				appending.Lock()
				result, err := appendAsLeader(l, testBatches(1, 1, 100, 0), 0)
				appending.Unlock()
				if err == nil {
					err = l.Sync()
				}
				if err != nil {
					errs <- err
					return
				}
				if durable := l.DurableEndOffset(); durable < result.NextOffset {
					errs <- errors.New("sync returned before the batch appended before it was durable")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.LogEndOffset() != appenders*appendsEach {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), appenders*appendsEach)
	}
	result, err := l.Read(0, 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if headers, err := record.ValidateAll(data, record.Limits{MaxBatchBytes: 1 << 20}); err != nil || len(headers) != appenders*appendsEach {
		t.Fatalf("read back %d batches, err %v", len(headers), err)
	}
}

// Reads run alongside appends and truncations without tearing: every read
// returns whole, valid batches (ReadAppend, as a reader off the owner's
// goroutine must).
func TestConcurrentReadsSeeWholeBatches(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 4096, IndexIntervalBytes: 256})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 400; i++ {
			if _, err := appendAsLeader(l, testBatches(1, 3, 50, 0), 0); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 49 {
				if _, err := l.TruncateTo(l.LogEndOffset() - 10); err != nil {
					t.Error(err)
					return
				}
			}
		}
		close(stop)
	}()
	for reader := 0; reader < 4; reader++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Off the owner's goroutine, a read copies under the log's
				// lock: a roll or truncation may recycle a memory chunk's
				// buffer the moment the lock is released (Chunk).
				_, data, err := l.ReadAppend(nil, l.LogStartOffset(), 2048, l.LogEndOffset())
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := record.ValidateAll(data, record.Limits{MaxBatchBytes: 1 << 20}); err != nil {
					t.Errorf("read returned damaged batches: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestSegmentRollsByAge(t *testing.T) {
	// segment.ms follows the records' timestamps (Kafka's
	// rollingBasedTimestamp), whatever the clock says.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := openTestLog(t, disk.NewMem(), Config{SegmentAge: time.Hour})
	appendAsLeader(l, testBatches(1, 1, 10, now.UnixMilli()), 0)
	now = now.Add(59 * time.Minute)
	appendAsLeader(l, testBatches(1, 1, 10, now.UnixMilli()), 0)
	if l.Segments() != 1 {
		t.Fatalf("rolled before the segment was an hour old")
	}
	now = now.Add(time.Minute)
	appendAsLeader(l, testBatches(1, 1, 10, now.UnixMilli()), 0)
	if l.Segments() != 2 {
		t.Fatalf("did not roll a segment an hour old: %d segments", l.Segments())
	}
}

func TestSegmentWithoutTimestampsRollsByTheGivenClock(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentAge: time.Hour})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	l.SetClock(start)
	appendAsLeader(l, testBatches(1, 1, 10, -1), 0)
	l.SetClock(start + time.Hour.Milliseconds() - 1)
	appendAsLeader(l, testBatches(1, 1, 10, -1), 0)
	if l.Segments() != 1 {
		t.Fatalf("rolled before the segment was an hour old by the clock")
	}
	l.SetClock(start + time.Hour.Milliseconds())
	appendAsLeader(l, testBatches(1, 1, 10, -1), 0)
	if l.Segments() != 2 {
		t.Fatalf("did not roll a segment an hour old by the clock: %d segments", l.Segments())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []Config{
		{},
		{FS: disk.NewMem(), Dir: "p", SegmentBytes: 10},
		{FS: disk.NewMem(), Dir: "p", SegmentBytes: 1 << 40},
		{FS: disk.NewMem(), Dir: "p", IndexIntervalBytes: 1},
		{FS: disk.NewMem(), Dir: "p", SegmentBytes: 4096, MaxBatchBytes: 8192},
		{FS: disk.NewMem(), Dir: "p", SegmentAge: -time.Second},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("config %+v validated", bad)
		}
		if _, err := Open(bad); err == nil {
			t.Errorf("Open accepted config %+v", bad)
		}
	}
}

func TestOpenOnRealFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{FS: disk.OS(), Dir: dir, SegmentBytes: 4096}
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := appendAsLeader(l, testBatches(1, 2, 100, 0), record.LeaderEpoch(i/10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil { // written bytes are read from the files
		t.Fatal(err)
	}
	result, err := l.Read(0, 1<<20, 1000)
	if err != nil || result.NextOffset != 100 {
		t.Fatalf("read: %v %+v", err, result)
	}
	if _, ok := result.Chunks[0].File.(disk.OSFile); !ok {
		t.Errorf("chunks on real files should expose the *os.File for sendfile")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if reopened.LogEndOffset() != 100 {
		t.Fatalf("reopened log: %s", reopened)
	}
	if epoch, end := reopened.EndOffsetForEpoch(2); epoch != 2 || end != 60 {
		t.Fatalf("epoch 2 ends at (%d, %d), want (2, 60)", epoch, end)
	}
}
