package commitlog

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/tidelog/tide/internal/record"
)

// TestCleanerDatadriven runs the cleaner scripts in testdata/cleaner, on the
// same harness as TestDatadriven (every command of it works here, and the
// filesystem operations are printed the same way), with three more:
//
//	append-keyed epoch=E [codec=none|gzip|snappy|lz4|zstd] [producer=ID] [pad=N]
//	    one batch per input line of records key=value; key=~ is a
//	    tombstone, =value has no key; timestamped with the harness clock;
//	    pad gives each record a header of N bytes (not printed), to fill
//	    segments
//	clean [up-to=O] [ratio=F] [lag=D] [delete-retention=D] [map-bytes=N] [force]
//	    one pass with CleanOptions.UpTo (default: the high watermark)
//	records [from=O]
//	    every batch from O and its records, offset:key=value
//	roll
//	    starts a new active segment, as an append to a full one would
func TestCleanerDatadriven(t *testing.T) {
	walkScripts(t, "testdata/cleaner", (*harness).runCleaner)
}

// runCleaner answers the cleaner scripts' commands, and the log scripts'.
func (h *harness) runCleaner(t *testing.T, d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "append-keyed":
		return h.appendKeyed(t, d)
	case "clean":
		return h.clean(t, d)
	case "records":
		return h.records(t, d)
	case "roll":
		h.log.mu.Lock()
		defer h.log.mu.Unlock()
		return "", h.log.rollLocked()
	}
	return h.run(t, d)
}

var codecsByName = map[string]record.Compression{
	"none": record.CompressionNone, "gzip": record.CompressionGzip, "snappy": record.CompressionSnappy,
	"lz4": record.CompressionLZ4, "zstd": record.CompressionZstd,
}

// keyedBatch builds one producer batch (offsets from 0, no epoch) of the
// records in line, compressed with codec.
func keyedBatch(line string, codec record.Compression, producerID int64, sequence int32, timestampMs int64, padBytes int) ([]byte, error) {
	var records []record.StoredRecord
	for i, field := range strings.Fields(line) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return nil, fmt.Errorf("record %q: want key=value", field)
		}
		r := record.StoredRecord{OffsetDelta: int32(i), TimestampMs: timestampMs, Key: []byte(key), Value: []byte(value)}
		if key == "" {
			r.Key = nil
		}
		if value == "~" {
			r.Value = nil
		}
		if padBytes > 0 {
			r.Headers = []record.RecordHeader{{Key: "pad", Value: []byte(strings.Repeat(".", padBytes))}}
		}
		records = append(records, r)
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("a batch needs records")
	}
	header := record.Header{LastOffsetDelta: int32(len(records) - 1), PartitionLeaderEpoch: record.NoLeaderEpoch,
		BaseTimestampMs: timestampMs, MaxTimestampMs: timestampMs, Attributes: int16(codec),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if producerID >= 0 {
		header.ProducerID, header.ProducerEpoch, header.BaseSequence = producerID, 0, sequence
	}
	return record.RewriteBatch(header, records, -1)
}

func (h *harness) appendKeyed(t *testing.T, d *datadriven.TestData) (string, error) {
	if h.log == nil {
		return "", fmt.Errorf("no open log")
	}
	codec := record.CompressionNone
	if d.HasArg("codec") {
		var name string
		d.ScanArgs(t, "codec", &name)
		codec = codecsByName[name]
	}
	producerID := int64(intArg(t, d, "producer", -1))
	var batches []byte
	sequence := int32(0)
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		batch, err := keyedBatch(line, codec, producerID, sequence, h.now.UnixMilli(), intArg(t, d, "pad", 0))
		if err != nil {
			return "", err
		}
		sequence += int32(len(strings.Fields(line)))
		batches = append(batches, batch...)
	}
	return h.appended(appendAsLeader(h.log, batches, record.LeaderEpoch(intArg(t, d, "epoch", 0))))
}

func (h *harness) clean(t *testing.T, d *datadriven.TestData) (string, error) {
	if h.log == nil {
		return "", fmt.Errorf("no open log")
	}
	config := DefaultCleanerConfig()
	if d.HasArg("ratio") {
		var text string
		d.ScanArgs(t, "ratio", &text)
		ratio, err := strconv.ParseFloat(text, 64)
		if err != nil {
			t.Fatalf("ratio: %v", err)
		}
		config.MinCleanableDirtyRatio = ratio
	}
	if d.HasArg("lag") {
		config.MinCompactionLagMs = durationArg(t, d, "lag").Milliseconds()
	}
	if d.HasArg("delete-retention") {
		config.DeleteRetentionMs = durationArg(t, d, "delete-retention").Milliseconds()
	}
	config.OffsetMapBytes = int64(intArg(t, d, "map-bytes", 0))
	upTo := h.log.HighWatermark()
	if d.HasArg("up-to") {
		upTo = record.Offset(intArg(t, d, "up-to", 0))
	}
	result, err := h.log.Clean(CleanOptions{Config: config, UpTo: upTo, NowMs: h.now.UnixMilli(), IgnoreDirtyRatio: d.HasArg("force")})
	if err != nil {
		return "", err
	}
	if !result.Cleaned {
		return fmt.Sprintf("skipped: %s (first dirty %d, ratio %.2f)\n", result.Skipped, result.FirstDirty, result.DirtyRatio), nil
	}
	return fmt.Sprintf("cleaned [%d, %d) ratio %.2f: %d segments rewritten, %d -> %d bytes, %d records and %d tombstones removed\n",
		result.FirstDirty, result.End, result.DirtyRatio, result.SegmentsRewritten, result.BytesBefore, result.BytesAfter,
		result.RecordsRemoved, result.TombstonesRemoved), nil
}

func (h *harness) records(t *testing.T, d *datadriven.TestData) (string, error) {
	if h.log == nil {
		return "", fmt.Errorf("no open log")
	}
	from := record.Offset(intArg(t, d, "from", int(h.log.LogStartOffset())))
	result, err := h.log.Read(from, 1<<30, h.log.LogEndOffset())
	if err != nil {
		return "", err
	}
	data, err := result.AppendTo(nil)
	if err != nil {
		return "", err
	}
	return describeRecords(data)
}

// describeRecords lists each batch and its records.
func describeRecords(data []byte) (string, error) {
	var b strings.Builder
	it := record.NewIterator(data, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		header, records, err := record.DecodeRecords(it.Batch(), 1<<30, 1<<30)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "[%d, %d) epoch=%d %s", header.BaseOffset, header.NextOffset(), header.PartitionLeaderEpoch, header.Compression())
		if header.ProducerID >= 0 {
			fmt.Fprintf(&b, " producer=%d seq=%d", header.ProducerID, header.BaseSequence)
		}
		if header.HasDeleteHorizon() {
			fmt.Fprintf(&b, " horizon=%s", time.UnixMilli(header.DeleteHorizonMs()).UTC().Format(time.RFC3339))
		}
		if len(records) == 0 {
			b.WriteString(" (empty)")
		}
		b.WriteString(":")
		for _, r := range records {
			value := string(r.Value)
			if r.Value == nil {
				value = "~"
			}
			fmt.Fprintf(&b, " %d:%s=%s", header.BaseOffset+record.Offset(r.OffsetDelta), r.Key, value)
		}
		b.WriteString("\n")
	}
	return b.String(), it.Err()
}
