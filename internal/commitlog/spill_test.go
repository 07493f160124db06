package commitlog

import (
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Only the active segment keeps its index entries in memory; an inactive
// one answers offset and timestamp lookups from its files exactly as it
// did from memory, and takes appends again (read back) once a truncation
// makes it the active one.
func TestSpilledIndexesAnswerAsInMemory(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 256})
	records := []record.Record{{Value: make([]byte, 100)}}
	for i := range 400 {
		batch := record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: int64(1000 + 10*i)})
		if _, err := appendValidatedAsLeader(l, batch, 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.segments) < 3 {
		t.Fatalf("%d segments, want several", len(l.segments))
	}
	if err := l.Sync(); err != nil { // settles the rolled segments, which spills them
		t.Fatal(err)
	}
	for i, s := range l.segments {
		active := i == len(l.segments)-1
		if s.index.spilled == active || s.timeIndex.spilled == active || (!active && (s.index.entries != nil || s.timeIndex.entries != nil)) {
			t.Fatalf("segment %d of %d: spilled %t/%t, %d/%d entries in memory", i, len(l.segments), s.index.spilled, s.timeIndex.spilled,
				len(s.index.entries), len(s.timeIndex.entries))
		}
	}
	s := l.segments[1]
	span := uint32(s.nextOffset - s.baseOffset)
	spilledOffsets, spilledTimes := make([]int64, span+1), make([]uint32, 0)
	for relative := range span + 1 {
		spilledOffsets[relative] = s.index.lookup(relative)
	}
	for timestamp := int64(900); timestamp < 1000+10*400+20; timestamp += 5 {
		spilledTimes = append(spilledTimes, s.timeIndex.lookup(timestamp))
	}
	spilledLast, _ := s.timeIndex.last()
	if err := s.index.unspill(); err != nil {
		t.Fatal(err)
	}
	if err := s.timeIndex.unspill(); err != nil {
		t.Fatal(err)
	}
	if s.index.length() == 0 || s.timeIndex.length() == 0 {
		t.Fatal("nothing indexed")
	}
	for relative := range span + 1 {
		if got := s.index.lookup(relative); got != spilledOffsets[relative] {
			t.Fatalf("offset lookup of %d: %d from the file, %d from memory", relative, spilledOffsets[relative], got)
		}
	}
	for i, timestamp := 0, int64(900); timestamp < 1000+10*400+20; i, timestamp = i+1, timestamp+5 {
		if got := s.timeIndex.lookup(timestamp); got != spilledTimes[i] {
			t.Fatalf("time lookup of %d: %d from the file, %d from memory", timestamp, spilledTimes[i], got)
		}
	}
	if last, _ := s.timeIndex.last(); last != spilledLast {
		t.Fatalf("newest time entry %+v from memory, %+v kept when spilled", last, spilledLast)
	}
	// Truncate into the first segment, spilled: it becomes the active one,
	// reads its entries back, and takes appends and reads again.
	first := l.segments[0]
	cut := first.baseOffset + (first.nextOffset-first.baseOffset)/2
	if _, err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if len(l.segments) != 1 || l.segments[0].index.spilled || l.segments[0].timeIndex.spilled {
		t.Fatalf("after truncating to %d: %d segments, spilled %t", cut, len(l.segments), l.segments[0].index.spilled)
	}
	batch := record.Build(record.BuildOptions{Records: records, LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: 99_000})
	if _, err := appendValidatedAsLeader(l, batch, 0); err != nil {
		t.Fatal(err)
	}
	if result, err := l.Read(0, 1<<20, l.LogEndOffset()); err != nil || result.NextOffset != l.LogEndOffset() {
		t.Fatalf("read after the truncation and append: %+v, %v", result.NextOffset, err)
	}
}
