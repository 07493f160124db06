package record

import "testing"

// A LogAppendTime stamp rewrites the header's attributes, max timestamp
// and CRC, leaves every record byte alone, and the batch still validates;
// a lookup by time then takes every record's timestamp from the header.
func TestSetLogAppendTime(t *testing.T) {
	batch := Build(BuildOptions{BaseTimestampMs: 1000, Records: []Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampDeltaMs: 5}}})
	records := string(batch[HeaderSize:])
	SetLogAppendTime(batch, 9000)
	header, err := Validate(batch, Limits{MaxBatchBytes: 1 << 20, RequireExactMaxTimestamp: true})
	if err != nil {
		t.Fatalf("stamped batch does not validate: %v", err)
	}
	if !header.IsLogAppendTime() || header.MaxTimestampMs != 9000 || header.BaseTimestampMs != 1000 || string(batch[HeaderSize:]) != records {
		t.Fatalf("stamped header %+v", header)
	}
	offset, timestampMs, ok, err := FirstRecordAtOrAfter(batch, 0, 8000, Limits{})
	if err != nil || !ok || offset != 0 || timestampMs != 9000 {
		t.Fatalf("lookup at 8000: %d %d %v %v; want the first record at the append time", offset, timestampMs, ok, err)
	}
}

func TestFirstRecordAtOrAfter(t *testing.T) {
	batch := Build(BuildOptions{BaseOffset: 10, BaseTimestampMs: 1000, Records: []Record{
		{Value: []byte("a"), TimestampDeltaMs: 0}, {Value: []byte("b"), TimestampDeltaMs: 20}, {Value: []byte("c"), TimestampDeltaMs: 10},
	}})
	for _, c := range []struct {
		from       Offset
		target     int64
		wantOffset Offset
		wantOK     bool
	}{{0, 0, 10, true}, {0, 1001, 11, true}, {0, 1015, 11, true}, {12, 1005, 12, true}, {0, 1021, 0, false}, {12, 1011, 0, false}} {
		offset, _, ok, err := FirstRecordAtOrAfter(batch, c.from, c.target, Limits{})
		if err != nil || ok != c.wantOK || ok && offset != c.wantOffset {
			t.Errorf("from %d at %d: %d %v %v, want %d %v", c.from, c.target, offset, ok, err, c.wantOffset, c.wantOK)
		}
	}
}
