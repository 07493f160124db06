package commitlog

import (
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// TestDatadriven runs the log operation scripts in testdata/scripts. Each command
// prints what it did, then the filesystem operations it caused (every sync,
// directory sync, creation, rename, removal and truncation), so the expected
// output pins down the durability protocol, not just the result.
//
// Commands:
//
//	open [segment-bytes=N] [index-interval=N] [flush=always|never] [retention-bytes=N] [retention-age=D]
//	append-leader epoch=E [batches=N] [records=N] [value-bytes=N]
//	append-follower base=O epoch=E [batches=N] [records=N] [value-bytes=N]
//	assign-epoch epoch=E
//	read from=O [max-bytes=N] [up-to=O]
//	truncate to=O
//	truncate-fully start=O
//	set-hw offset=O
//	advance-start offset=O
//	retention
//	checkpoint | sync | close | state
//	end-offset epoch=E
//	clock advance=D
//	crash [seed=S] [survive=random|nothing|everything] [torn]   (then reopens)
//	corrupt file=NAME at=N [bytes=HEX-ISH]               (overwrites synced bytes)
//
// The log syncs only when asked; flush=always (the default) makes the
// harness sync after every append, as the broker does with flush=always,
// and flush=never leaves syncing to the sync command, rolls and close.
func TestDatadriven(t *testing.T) {
	walkScripts(t, "testdata/scripts", (*harness).run)
}

// walkScripts runs every script under dir, each on a fresh harness, with
// command answering each command; after a command's output come its error,
// if any, and the filesystem operations it caused.
func walkScripts(t *testing.T, dir string, command func(*harness, *testing.T, *datadriven.TestData) (string, error)) {
	datadriven.Walk(t, dir, func(t *testing.T, file string) {
		h := &harness{mem: disk.NewMem(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		defer h.close()
		datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
			out, err := command(h, t, d)
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

type harness struct {
	mem *disk.MemFS
	fs  *disk.LoggingFS
	cfg Config
	log *Log
	now time.Time
	// syncAppends is flush=always: every append is followed by a sync.
	syncAppends bool
}

const harnessDir = "data/topic-0"

func (h *harness) close() {
	if h.log != nil {
		h.log.Close()
	}
}

func (h *harness) open() error {
	h.fs = &disk.LoggingFS{FS: h.mem}
	h.cfg.FS, h.cfg.Dir = h.fs, harnessDir
	l, err := Open(h.cfg)
	h.log = l
	if err == nil {
		l.SetClock(h.now.UnixMilli())
	}
	return err
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) (string, error) {
	if h.fs == nil {
		h.fs = &disk.LoggingFS{FS: h.mem}
	}
	switch d.Cmd {
	case "open":
		h.cfg = Config{}
		h.cfg.SegmentBytes = int64(intArg(t, d, "segment-bytes", 0))
		h.cfg.IndexIntervalBytes = int64(intArg(t, d, "index-interval", 0))
		h.cfg.RetentionBytes = int64(intArg(t, d, "retention-bytes", 0))
		if d.HasArg("retention-age") {
			h.cfg.RetentionAge = durationArg(t, d, "retention-age")
		}
		h.syncAppends = true
		if d.HasArg("flush") {
			var mode string
			d.ScanArgs(t, "flush", &mode)
			if mode != "always" && mode != "never" {
				return "", fmt.Errorf("flush=%s: always or never", mode)
			}
			h.syncAppends = mode == "always"
		}
		if err := h.open(); err != nil {
			return "", err
		}
		return describeLog(h.log), nil
	case "crash":
		return h.crash(t, d)
	case "corrupt":
		var name string
		d.ScanArgs(t, "file", &name)
		data := []byte("XXXX")
		if d.HasArg("bytes") {
			var text string
			d.ScanArgs(t, "bytes", &text)
			data = []byte(text)
		}
		return "", h.mem.CorruptAt(path.Join(harnessDir, name), int64(intArg(t, d, "at", 0)), data)
	case "clock":
		h.now = h.now.Add(durationArg(t, d, "advance"))
		if h.log != nil {
			h.log.SetClock(h.now.UnixMilli())
		}
		return fmt.Sprintf("now %s\n", h.now.Format(time.RFC3339)), nil
	}
	if h.log == nil {
		return "", fmt.Errorf("no open log")
	}
	return h.runOnLog(t, d)
}

// appended describes an append and syncs it with flush=always.
func (h *harness) appended(result AppendResult, err error) (string, error) {
	if err == nil && h.syncAppends {
		err = h.log.Sync()
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("appended [%d, %d) in %d batches\n", result.BaseOffset, result.NextOffset, result.Batches), nil
}

func (h *harness) runOnLog(t *testing.T, d *datadriven.TestData) (string, error) {
	l := h.log
	switch d.Cmd {
	case "append-leader":
		batches := testBatches(intArg(t, d, "batches", 1), intArg(t, d, "records", 1), intArg(t, d, "value-bytes", 10), h.now.UnixMilli())
		result, err := appendAsLeader(l, batches, record.LeaderEpoch(intArg(t, d, "epoch", 0)))
		return h.appended(result, err)
	case "append-follower":
		batches := followerBatches(record.Offset(intArg(t, d, "base", 0)), record.LeaderEpoch(intArg(t, d, "epoch", 0)),
			intArg(t, d, "batches", 1), intArg(t, d, "records", 1), intArg(t, d, "value-bytes", 10), h.now.UnixMilli())
		return h.appended(l.Append(batches))
	case "assign-epoch":
		return "", l.AssignEpochStartOffset(record.LeaderEpoch(intArg(t, d, "epoch", 0)))
	case "read":
		return h.read(t, d)
	case "truncate":
		end, err := l.TruncateTo(record.Offset(intArg(t, d, "to", 0)))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("log end %d\n", end), nil
	case "truncate-fully":
		return "", l.TruncateFullyAndStartAt(record.Offset(intArg(t, d, "start", 0)))
	case "set-hw":
		return "", l.SetHighWatermark(record.Offset(intArg(t, d, "offset", 0)))
	case "advance-start":
		return "", l.AdvanceLogStartOffset(record.Offset(intArg(t, d, "offset", 0)))
	case "retention":
		deleted, err := l.EnforceRetention(h.now.UnixMilli())
		return fmt.Sprintf("deleted %d segments\n", deleted), err
	case "checkpoint":
		return "", l.Checkpoint()
	case "sync":
		return "", l.Sync()
	case "write":
		// A sync job's write without its sync: the pending bytes reach the
		// file, where a power loss may keep any prefix of them.
		l.mu.Lock()
		defer l.mu.Unlock()
		return "", l.drainLocked()
	case "close":
		err := l.Close()
		h.log = nil
		return "", err
	case "state":
		return describeLog(l), nil
	case "end-offset":
		epoch, end := l.EndOffsetForEpoch(record.LeaderEpoch(intArg(t, d, "epoch", 0)))
		return fmt.Sprintf("epoch %d ends at %d\n", epoch, end), nil
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return "", nil
}

func (h *harness) read(t *testing.T, d *datadriven.TestData) (string, error) {
	upTo := record.Offset(1 << 62)
	if d.HasArg("up-to") {
		upTo = record.Offset(intArg(t, d, "up-to", 0))
	}
	result, err := h.log.Read(record.Offset(intArg(t, d, "from", 0)), int64(intArg(t, d, "max-bytes", 1<<20)), upTo)
	if err != nil {
		return "", err
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("read [%d, %d) %d bytes in %d chunks\n%s", result.FirstOffset, result.NextOffset, result.SizeBytes, len(result.Chunks), describeBatches(data)), nil
}

// crash drops the open log without closing it, crashes the filesystem and
// reopens the log on what survived, printing the recovery report.
func (h *harness) crash(t *testing.T, d *datadriven.TestData) (string, error) {
	options := disk.DefaultCrashOptions(int64(intArg(t, d, "seed", 0)))
	if d.HasArg("survive") {
		var survive string
		d.ScanArgs(t, "survive", &survive)
		options.Survival = map[string]disk.Survival{"random": disk.SurviveRandomPrefix, "nothing": disk.SurviveNothing, "everything": disk.SurviveEverything}[survive]
		options.TornProbability = 0
	}
	if d.HasArg("torn") {
		options.TornProbability = 1
	}
	h.mem = h.mem.CrashCloneWith(options)
	h.log = nil
	err := h.open()
	if err != nil {
		return "", err
	}
	report := h.log.Recovery()
	var b strings.Builder
	fmt.Fprintf(&b, "recovered: scanned %d batches from %d, cut %d bytes, removed %d segments, rebuilt %d indexes",
		report.ScannedBatches, report.ScannedFrom, report.TruncatedBytes, report.RemovedSegments, report.IndexesRebuilt)
	if report.EpochCacheRebuilt {
		b.WriteString(", rebuilt epoch cache")
	}
	if report.TailError != nil {
		fmt.Fprintf(&b, "\ntail: %v", report.TailError)
	}
	b.WriteString("\n")
	b.WriteString(describeLog(h.log))
	return b.String(), nil
}

func intArg(t *testing.T, d *datadriven.TestData, key string, fallback int) int {
	if !d.HasArg(key) {
		return fallback
	}
	var value int
	d.ScanArgs(t, key, &value)
	return value
}

func durationArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var text string
	d.ScanArgs(t, key, &text)
	duration, err := time.ParseDuration(text)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return duration
}
