package commitlog

import (
	"bytes"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// FuzzWriteBehind runs a history of appends, sync jobs begun, run and
// completed as separate steps, truncations, rolls (small segments) and
// clean reopenings, drawn from the input, against a model that is just the
// bytes appended and kept. After every step a read of the whole log must
// be the model byte for byte, wherever the bytes are (file or pending
// buffers); at the end, after a sync, the segment files must be too:
// nothing written twice, nothing lost. Reads at single offsets (through
// the offset index, whose entries may be pending) must each return the
// model's batch, and a clean reopening must find every index it trusts
// consistent: no entry points at bytes the files lack.
func FuzzWriteBehind(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 0, 4, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 0, 3, 5, 0, 1, 4, 2, 3})
	f.Add([]byte{0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 4, 3, 0, 5, 0, 1, 3})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 200 {
			return
		}
		fs := disk.NewMem()
		config := Config{SegmentBytes: 1024, MaxBatchBytes: 1024, IndexIntervalBytes: 128}
		l := openTestLog(t, fs, config)
		var model []byte
		var ends []int // ends[i] is where offset i's batch ends in model
		var job *SyncJob
		ran := false
		var runErr error
		for i, step := range steps {
			switch step % 6 {
			case 0:
				batch := appendKept(t, l, 1, int64(i))
				model = append(model, batch...)
				ends = append(ends, len(model))
			case 1:
				if job != nil {
					break // one job per log at a time, as the broker keeps it
				}
				if begun, ok := l.BeginSync(); ok {
					job, ran = &begun, false
				}
			case 2:
				if job != nil && !ran {
					runErr, ran = job.Run(), true
				}
			case 3:
				if job != nil {
					if !ran {
						runErr = job.Run()
					}
					if _, err := l.CompleteSync(*job, runErr); err != nil {
						t.Fatal(err)
					}
					job = nil
				}
			case 4:
				if len(ends) > 0 {
					end, err := l.TruncateTo(record.Offset(max(len(ends)-1-int(step/6)%3, 0)))
					if err != nil {
						t.Fatal(err)
					}
					ends = ends[:end] // one record per batch: a batch ends at each offset
					model = model[:0]
					if end > 0 {
						model = model[:ends[end-1]]
					}
				}
			case 5:
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l, job = openTestLog(t, fs, config), nil
				if rebuilt := l.Recovery().IndexesRebuilt; rebuilt != 0 {
					t.Fatalf("step %d: a clean reopening rebuilt %d indexes", i, rebuilt)
				}
			}
			if got := readBack(t, l); !bytes.Equal(got, model) {
				t.Fatalf("step %d (%d): the log reads %d bytes, the model has %d", i, step%6, len(got), len(model))
			}
			if len(ends) > 0 {
				checkReadsAt(t, l, model, ends, []int{0, len(ends) / 2, len(ends) - 1, i % len(ends)})
			}
		}
		if job != nil {
			if _, err := l.CompleteSync(*job, job.Run()); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if files := segmentFiles(t, fs); !bytes.Equal(files, model) {
			t.Fatalf("the files hold %d bytes, the model %d", len(files), len(model))
		}
	})
}

// readBack reads the whole log.
func readBack(t *testing.T, l *Log) []byte {
	t.Helper()
	result, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkReadsAt reads one batch at each offset (one record per batch, as
// the fuzz appends) and compares it with the model's.
func checkReadsAt(t *testing.T, l *Log, model []byte, ends []int, offsets []int) {
	t.Helper()
	for _, offset := range offsets {
		result, err := l.Read(record.Offset(offset), 1, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got, err := result.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		start := 0
		if offset > 0 {
			start = ends[offset-1]
		}
		if result.FirstOffset != record.Offset(offset) || !bytes.Equal(got, model[start:ends[offset]]) {
			t.Fatalf("a read at %d starts at %d with %d bytes, the model's batch has %d", offset, result.FirstOffset, len(got), ends[offset]-start)
		}
	}
}
