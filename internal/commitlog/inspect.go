package commitlog

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

// SegmentReport describes one segment file as Inspect found it.
type SegmentReport struct {
	Name       string
	BaseOffset record.Offset
	// NextOffset is the offset after the last valid batch.
	NextOffset record.Offset
	SizeBytes  int64
	Batches    int
	// Damage is the first problem found, at byte DamagePosition; nil when
	// every batch is valid and contiguous.
	Damage         error
	DamagePosition int64
}

// InspectReport is a read-only account of a partition directory.
type InspectReport struct {
	Segments []SegmentReport
	// Epochs is the epoch checkpoint's content; EpochsError says why it
	// could not be read.
	Epochs      []leaderepoch.Entry
	EpochsError error
	// HighWatermark, RecoveryPoint and LogStartOffset come from the offsets
	// checkpoint; OffsetsError says why it could not be read.
	HighWatermark, RecoveryPoint, LogStartOffset record.Offset
	OffsetsError                                 error
}

// Inspect reads a partition directory without changing it: it validates
// every batch of every segment (CRC, offsets, contiguity) and reads the
// checkpoints. It is for operators and tests; Open is what repairs.
func Inspect(fs disk.FS, dir string) (InspectReport, error) {
	names, err := fs.List(dir)
	if err != nil {
		return InspectReport{}, err
	}
	var report InspectReport
	expected := record.Offset(-1)
	for _, name := range names {
		base, ok := parseSegmentFileName(name)
		if !ok {
			continue
		}
		segmentReport, err := inspectSegment(fs, path.Join(dir, name), base, expected)
		if err != nil {
			return InspectReport{}, err
		}
		report.Segments = append(report.Segments, segmentReport)
		expected = segmentReport.NextOffset
	}
	if data, err := readSmallFile(fs, path.Join(dir, epochCheckpointName)); err != nil {
		report.EpochsError = err
	} else if cache, err := leaderepoch.UnmarshalCheckpoint(data); err != nil {
		report.EpochsError = err
	} else {
		report.Epochs = cache.Entries()
	}
	if data, err := readSmallFile(fs, path.Join(dir, offsetsCheckpointName)); err != nil {
		report.OffsetsError = err
	} else if checkpoint, err := unmarshalOffsetsCheckpoint(data); err != nil {
		report.OffsetsError = err
	} else {
		report.HighWatermark, report.RecoveryPoint, report.LogStartOffset = checkpoint.HighWatermark, checkpoint.RecoveryPoint, checkpoint.LogStartOffset
	}
	return report, nil
}

// inspectSegment validates the segment at name; expected is where the
// previous segment ended, or -1 for the first.
func inspectSegment(fs disk.FS, name string, base, expected record.Offset) (SegmentReport, error) {
	file, err := fs.Open(name)
	if err != nil {
		return SegmentReport{}, err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return SegmentReport{}, err
	}
	report := SegmentReport{Name: path.Base(name), BaseOffset: base, NextOffset: base, SizeBytes: size}
	if expected >= 0 && base != expected {
		report.Damage = fmt.Errorf("segment starts at %d, the previous one ends at %d", base, expected)
		return report, nil
	}
	s := &segment{baseOffset: base, file: file}
	s.setFileSize(size) // all of it in the file: the reads are the file's
	limits := record.Limits{MaxBatchBytes: SegmentBytesMax}
	for position := int64(0); position < size; {
		_, header, err := s.readBatch(position, limits)
		if err == nil && header.BaseOffset != report.NextOffset {
			err = fmt.Errorf("batch at offset %d where %d was expected: %w", header.BaseOffset, report.NextOffset, record.ErrInvalid)
		}
		if err == nil && !s.canIndex(header.NextOffset()) {
			err = errCannotIndex(s, header)
		}
		if err != nil && !isBatchDamage(err) && !errors.Is(err, io.EOF) {
			return SegmentReport{}, err
		}
		if err != nil {
			report.Damage, report.DamagePosition = err, position
			return report, nil
		}
		report.Batches++
		report.NextOffset = header.NextOffset()
		position += batchSize(header)
	}
	return report, nil
}

// String renders the report as a table for people.
func (r InspectReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %12s %12s %12s %8s  %s\n", "SEGMENT", "BASE", "NEXT", "BYTES", "BATCHES", "STATUS")
	for _, s := range r.Segments {
		status := "ok"
		if s.Damage != nil {
			status = fmt.Sprintf("damaged at byte %d: %v", s.DamagePosition, s.Damage)
		}
		fmt.Fprintf(&b, "%-26s %12d %12d %12d %8d  %s\n", s.Name, s.BaseOffset, s.NextOffset, s.SizeBytes, s.Batches, status)
	}
	if r.OffsetsError != nil {
		fmt.Fprintf(&b, "offsets checkpoint: %v\n", r.OffsetsError)
	} else {
		fmt.Fprintf(&b, "log start offset %d, high watermark %d, recovery point %d\n", r.LogStartOffset, r.HighWatermark, r.RecoveryPoint)
	}
	if r.EpochsError != nil {
		fmt.Fprintf(&b, "epoch checkpoint: %v\n", r.EpochsError)
	} else {
		fmt.Fprintf(&b, "leader epochs:")
		for _, e := range r.Epochs {
			fmt.Fprintf(&b, " %d@%d", e.Epoch, e.StartOffset)
		}
		fmt.Fprintln(&b)
	}
	return b.String()
}

// Damaged reports whether any segment is damaged.
func (r InspectReport) Damaged() bool {
	for _, s := range r.Segments {
		if s.Damage != nil {
			return true
		}
	}
	return false
}
