package commitlog

import (
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// ReadHeaders must see every batch across segment rolls and after a
// truncation, in offset order, and apply its filter.
func TestReadHeadersAcrossSegments(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{SegmentBytes: SegmentBytesMin})
	for i := 0; i < 40; i++ {
		producer := &record.ProducerState{ProducerID: int64(i % 2), BaseSequence: int32(i / 2)}
		if i%4 == 3 {
			producer = nil
		}
		batch := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, Producer: producer, Records: []record.Record{{Value: []byte("value")}, {Value: []byte("v")}}})
		if _, err := appendAsLeader(l, batch, 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.Segments() < 2 {
		t.Fatalf("%d segments; the test needs the log to roll", l.Segments())
	}
	all, err := l.ReadHeaders(nil)
	if err != nil || len(all) != 40 {
		t.Fatalf("read %d headers (%v), want 40", len(all), err)
	}
	for i, header := range all {
		if header.BaseOffset != record.Offset(2*i) {
			t.Fatalf("header %d at offset %d, want %d", i, header.BaseOffset, 2*i)
		}
	}
	if _, err := l.TruncateTo(31); err != nil {
		t.Fatal(err)
	}
	idempotent, err := l.ReadHeaders(func(h record.Header) bool { return h.ProducerID >= 0 })
	if err != nil {
		t.Fatal(err)
	}
	if len(idempotent) != 12 || idempotent[len(idempotent)-1].NextOffset() > 30 {
		t.Fatalf("after truncating to 30, %d idempotent headers ending at %d, want 12 ending at or below 30", len(idempotent), idempotent[len(idempotent)-1].NextOffset())
	}
}
