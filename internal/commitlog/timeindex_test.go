package commitlog

import (
	"fmt"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// timedRecord is one record a naive reference remembers: its offset and
// timestamp.
type timedRecord struct {
	offset      record.Offset
	timestampMs int64
}

// appendTimedBatches appends count batches of 1-4 records whose timestamps
// wander (mostly forward, sometimes back, as producers' clocks do) and
// returns what it appended, record by record.
func appendTimedBatches(t *testing.T, l *Log, random *rand.Rand, count int, timestampMs *int64) []timedRecord {
	t.Helper()
	var appended []timedRecord
	for range count {
		records := make([]record.Record, 1+random.IntN(4))
		base := *timestampMs
		for i := range records {
			records[i] = record.Record{Value: []byte("value"), TimestampDeltaMs: int64(random.IntN(50)) - 10}
		}
		next := l.LogEndOffset()
		for i, r := range records {
			appended = append(appended, timedRecord{offset: next + record.Offset(i), timestampMs: base + r.TimestampDeltaMs})
		}
		batch := record.Build(record.BuildOptions{BaseTimestampMs: base, Records: records, LeaderEpoch: record.NoLeaderEpoch})
		if _, err := appendAsLeader(l, batch, 0); err != nil {
			t.Fatalf("append: %v", err)
		}
		*timestampMs += int64(random.IntN(40)) - 8
	}
	return appended
}

// naiveOffsetForTimestamp is the reference: the first record at or above
// logStart whose timestamp is at or after target.
func naiveOffsetForTimestamp(records []timedRecord, logStart record.Offset, target int64) (timedRecord, bool) {
	for _, r := range records {
		if r.offset >= logStart && r.timestampMs >= target {
			return r, true
		}
	}
	return timedRecord{}, false
}

// naiveMaxTimestamp is the reference for MAX_TIMESTAMP: the first record
// with the largest timestamp at or above logStart.
func naiveMaxTimestamp(records []timedRecord, logStart record.Offset) (timedRecord, bool) {
	var best timedRecord
	found := false
	for _, r := range records {
		if r.offset >= logStart && (!found || r.timestampMs > best.timestampMs) {
			best, found = r, true
		}
	}
	return best, found
}

func checkTimestampLookups(t *testing.T, l *Log, records []timedRecord, random *rand.Rand, what string) {
	t.Helper()
	logStart, upTo := l.LogStartOffset(), l.LogEndOffset()
	lowest, highest := records[0].timestampMs, records[0].timestampMs
	for _, r := range records {
		lowest, highest = min(lowest, r.timestampMs), max(highest, r.timestampMs)
	}
	for range 200 {
		target := lowest - 5 + random.Int64N(highest-lowest+10)
		got, ok, err := l.OffsetForTimestamp(target, upTo)
		if err != nil {
			t.Fatalf("%s: offset for %d: %v", what, target, err)
		}
		want, wantOK := naiveOffsetForTimestamp(records, logStart, target)
		if ok != wantOK || ok && (got.Offset != want.offset || got.TimestampMs != want.timestampMs) {
			t.Fatalf("%s: offset for timestamp %d = %+v %v, the reference says %+v %v", what, target, got, ok, want, wantOK)
		}
	}
	got, ok, err := l.MaxTimestampOffset(upTo)
	want, wantOK := naiveMaxTimestamp(records, logStart)
	if err != nil || ok != wantOK || ok && (got.Offset != want.offset || got.TimestampMs != want.timestampMs) {
		t.Fatalf("%s: max timestamp = %+v %v %v, the reference says %+v %v", what, got, ok, err, want, wantOK)
	}
}

// The time index is checked against a naive scan of every record, on logs
// of many small segments, as appended, after a clean reopen (indexes
// loaded), after losing every .timeindex file (an upgraded directory:
// rebuilt), after a truncation and after the log start moves.
func TestOffsetForTimestampAgainstReference(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			random := rand.New(rand.NewPCG(seed, 33))
			fs := disk.NewMem()
			cfg := Config{FS: fs, Dir: "p", SegmentBytes: int64(1024 + random.IntN(2000)), IndexIntervalBytes: int64(64 + random.IntN(300))}
			l, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			timestampMs := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			records := appendTimedBatches(t, l, random, 60+random.IntN(100), &timestampMs)
			checkTimestampLookups(t, l, records, random, "appended")

			l.Close()
			if l, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
			checkTimestampLookups(t, l, records, random, "reopened")
			l.Close()

			names, _ := fs.List("p")
			for _, name := range names {
				if path.Ext(name) == timeIndexSuffix {
					fs.Remove(path.Join("p", name))
				}
			}
			if l, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
			if l.Segments() > 1 && l.Recovery().IndexesRebuilt == 0 {
				t.Fatalf("missing time indexes were not rebuilt")
			}
			checkTimestampLookups(t, l, records, random, "rebuilt")

			cut := records[len(records)/2].offset
			end, err := l.TruncateTo(cut)
			if err != nil {
				t.Fatal(err)
			}
			for len(records) > 0 && records[len(records)-1].offset >= end {
				records = records[:len(records)-1]
			}
			checkTimestampLookups(t, l, records, random, "truncated")
			records = append(records, appendTimedBatches(t, l, random, 20, &timestampMs)...)
			checkTimestampLookups(t, l, records, random, "appended after truncation")

			l.Sync()
			l.SetHighWatermark(l.LogEndOffset())
			if err := l.AdvanceLogStartOffset(records[len(records)/3].offset); err != nil {
				t.Fatal(err)
			}
			checkTimestampLookups(t, l, records, random, "log start moved")
			l.Close()
		})
	}
}

// A lookup never answers a record at or above the bound it is given (the
// high watermark for consumers).
func TestOffsetForTimestampStopsAtTheBound(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	for i := range 5 {
		appendAsLeader(l, testBatches(1, 1, 10, int64(1000+i*10)), 0)
	}
	if found, ok, _ := l.OffsetForTimestamp(1020, 5); !ok || found.Offset != 2 || found.TimestampMs != 1020 {
		t.Fatalf("timestamp 1020: %+v %v, want offset 2", found, ok)
	}
	if found, ok, _ := l.OffsetForTimestamp(1020, 2); ok {
		t.Fatalf("answered offset %d at the bound 2", found.Offset)
	}
	if found, ok, _ := l.OffsetForTimestamp(1041, 5); ok {
		t.Fatalf("answered offset %d after every timestamp", found.Offset)
	}
	if found, ok, _ := l.MaxTimestampOffset(4); ok {
		t.Fatalf("max timestamp answered offset %d above the bound", found.Offset)
	}
	if found, ok, _ := l.MaxTimestampOffset(5); !ok || found.Offset != 4 || found.TimestampMs != 1040 {
		t.Fatalf("max timestamp: %+v %v, want offset 4 at 1040", found, ok)
	}
}

// Time index files are Kafka's format: 12-byte entries, an int64
// timestamp then a uint32 relative offset, big-endian; an inactive
// segment's last entry is its largest timestamp.
func TestTimeIndexFileFormat(t *testing.T) {
	fs := disk.NewMem()
	l := openTestLog(t, fs, Config{SegmentBytes: 1024, IndexIntervalBytes: 64})
	for i := range 20 {
		appendAsLeader(l, testBatches(1, 1, 40, int64(5000+i)), 0)
	}
	if l.Segments() < 2 {
		t.Fatalf("want several segments, have %d", l.Segments())
	}
	if err := l.Sync(); err != nil { // the job writes the rolled segment's entries
		t.Fatal(err)
	}
	second := l.segments[1].baseOffset
	data, err := readSmallFile(fs, path.Join("p", timeIndexFileName(0)))
	if err != nil || len(data) == 0 || len(data)%timeIndexEntryBytes != 0 {
		t.Fatalf("time index of the first segment: %d bytes, %v", len(data), err)
	}
	last := data[len(data)-timeIndexEntryBytes:]
	timestampMs := int64(uint64(last[0])<<56 | uint64(last[1])<<48 | uint64(last[2])<<40 | uint64(last[3])<<32 |
		uint64(last[4])<<24 | uint64(last[5])<<16 | uint64(last[6])<<8 | uint64(last[7]))
	relative := uint32(last[8])<<24 | uint32(last[9])<<16 | uint32(last[10])<<8 | uint32(last[11])
	if want := int64(5000) + int64(second) - 1; timestampMs != want || record.Offset(relative) != second-1 {
		t.Fatalf("last entry (%d, %d), want (%d, %d)", timestampMs, relative, want, second-1)
	}
}

// Retention by time uses each segment's largest record timestamp, stops at
// the first segment it keeps, never passes the high watermark, and takes
// the active segment too (rolling an empty one) once all of it is expired
// and committed, as Kafka does.
func TestRetentionOffsetByTime(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 1024})
	hour := time.Hour.Milliseconds()
	for i := range 12 {
		appendAsLeader(l, testBatches(1, 1, 300, int64(i)*hour), 0) // 2 batches of 370 bytes a segment
	}
	l.Sync()
	policy := Retention{Ms: 2 * hour, Bytes: -1}
	now := 12 * hour
	if offset, _ := l.RetentionOffset(now, policy); offset != 0 {
		t.Fatalf("retention passed the high watermark 0: %d", offset)
	}
	l.SetHighWatermark(7)
	if offset, _ := l.RetentionOffset(now, policy); offset != 6 {
		t.Fatalf("high watermark 7: retention wants %d, want 6 (the segment [6, 9) is not committed)", offset)
	}
	l.SetHighWatermark(12)
	if offset, _ := l.RetentionOffset(now, policy); offset != 10 {
		t.Fatalf("retention wants %d, want 10: the segment [10, 12) holds records 2 hours old or less", offset)
	}
	if offset, _ := l.RetentionOffset(now, Retention{Ms: -1, Bytes: -1}); offset != 0 {
		t.Fatalf("unlimited retention wants %d", offset)
	}
	if offset, _ := l.RetentionOffset(now, Retention{Ms: -1, Bytes: 2000}); offset != 6 {
		t.Fatalf("retention.bytes=2000 wants %d, want 6 (three segments of 740 bytes kept, 2220 >= 2000)", offset)
	}
	offset, _ := l.RetentionOffset(100*hour, policy)
	if offset != 12 {
		t.Fatalf("everything expired: retention wants %d, want the log end 12", offset)
	}
	if err := l.AdvanceLogStartOffset(offset); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 1 || l.LogStartOffset() != 12 || l.SizeBytes() != 0 {
		t.Fatalf("after deleting everything: %s", l)
	}
	appendAsLeader(l, testBatches(1, 1, 10, 100*hour), 0)
	if l.LogEndOffset() != 13 {
		t.Fatalf("append after deleting everything: %s", l)
	}
}

// Damaged time indexes of trusted segments (bytes overwritten, a torn
// entry, entries out of order) are found by recovery's check and rebuilt
// from the batch headers: lookups by timestamp still agree with the
// reference, and the segments' data is untouched.
func TestRecoveryRebuildsDamagedTimeIndexes(t *testing.T) {
	for seed := range uint64(10) {
		random := rand.New(rand.NewPCG(seed, 12))
		fs := disk.NewMem()
		cfg := Config{FS: fs, Dir: "p", SegmentBytes: 1024, IndexIntervalBytes: 64}
		l, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		timestampMs := int64(1_700_000_000_000)
		records := appendTimedBatches(t, l, random, 80, &timestampMs)
		l.Close()
		damaged := 0
		names, _ := fs.List("p")
		for _, name := range names {
			if path.Ext(name) != timeIndexSuffix || random.IntN(2) == 0 {
				continue
			}
			data, _ := readSmallFile(fs, path.Join("p", name))
			if len(data) < timeIndexEntryBytes {
				continue
			}
			damage := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
			if random.IntN(2) == 0 {
				damage = []byte{0, 0, 0, 0} // timestamps back to zero, out of order
			}
			if err := fs.CorruptAt(path.Join("p", name), int64(random.IntN(len(data)/timeIndexEntryBytes))*timeIndexEntryBytes, damage); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
		if l, err = Open(cfg); err != nil {
			t.Fatalf("seed %d: open with %d damaged time indexes: %v", seed, damaged, err)
		}
		checkTimestampLookups(t, l, records, random, fmt.Sprintf("seed %d, %d time indexes damaged", seed, damaged))
		l.Close()
	}
}
