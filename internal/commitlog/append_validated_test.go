package commitlog

import (
	"errors"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// AppendValidated appends what Append would, given the batches' own
// headers, and refuses headers that are not the bytes' and batches over
// the log's size limit, leaving the log as it was.
func TestAppendValidated(t *testing.T) {
	l := openTestLog(t, disk.NewMem(), Config{})
	batches := followerBatches(0, 0, 3, 2, 10, 1_000)
	headers, err := record.ValidateAll(batches, record.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	wrong := append([]record.Header(nil), headers...)
	wrong[2].MaxTimestampMs++
	if _, err := l.AppendValidated(batches, wrong); !errors.Is(err, record.ErrCorrupt) || l.LogEndOffset() != 0 {
		t.Fatalf("a header that is not the bytes': %v, log end %d", err, l.LogEndOffset())
	}
	result, err := l.AppendValidated(batches, headers)
	if err != nil || result.BaseOffset != 0 || result.NextOffset != 6 || result.Batches != 3 || l.LogEndOffset() != 6 {
		t.Fatalf("AppendValidated: %+v, %v, log end %d", result, err, l.LogEndOffset())
	}
	if _, err := l.AppendValidated(batches, headers); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("the same batches again: %v", err)
	}
	small := openTestLog(t, disk.NewMem(), Config{MaxBatchBytes: headers[0].Size() - 1})
	if _, err := small.AppendValidated(batches, headers); !errors.Is(err, record.ErrTooLarge) {
		t.Fatalf("a batch over the log's limit: %v", err)
	}
	read, err := l.Read(0, 1<<20, 6)
	if err != nil {
		t.Fatal(err)
	}
	data, err := read.AppendTo(nil)
	if err != nil || string(data) != string(batches) {
		t.Fatalf("read back %d bytes, %v; appended %d", len(data), err, len(batches))
	}
}
