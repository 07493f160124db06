package commitlog

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Limits on a log's resources. They exist so that a bad peer or a bad
// configuration is refused with an error instead of exhausting memory,
// offsets in an index or file handles.
const (
	// SegmentBytesMax bounds a segment so that positions fit the index's
	// 32-bit fields.
	SegmentBytesMax = 1 << 31
	// SegmentBytesMin keeps a segment big enough for any valid batch header.
	SegmentBytesMin = 1 << 10
	// SegmentsOpenMax bounds the segments (each two open files) one log
	// keeps; retention must keep a log under it.
	SegmentsOpenMax = 10_000
	// IndexIntervalBytesMin keeps the sparse index sparse.
	IndexIntervalBytesMin = 64
	// SegmentOffsetSpanMax is the most offsets one segment may cover: a
	// segment holds [base, base+SegmentOffsetSpanMax) at most, because an
	// index entry stores an offset relative to the segment's base as a
	// uint32. A batch ending further out could not be indexed (and a lookup
	// would wrap), so the log rolls before it, refuses an append spanning
	// more (ErrOffsetSpanTooLarge), and recovery treats a segment holding
	// one as damage.
	SegmentOffsetSpanMax = math.MaxUint32
)

// Config configures one partition log.
type Config struct {
	// FS holds the log; Dir is the partition's directory in it.
	FS  disk.FS
	Dir string
	// SegmentBytes rolls the active segment once an append would take it
	// past this size. Default 1 GiB.
	SegmentBytes int64
	// SegmentAge rolls a non-empty active segment older than this (Kafka's
	// segment.ms): measured from the max timestamp of its first batch to
	// that of the incoming one, as Kafka does, or by the log's clock
	// (SetClock) from the segment's creation when either batch has no
	// timestamp. Default 7 days, as Kafka's log.roll.hours.
	SegmentAge time.Duration
	// IndexIntervalBytes is the number of segment bytes between sparse
	// index entries. Default 4 KiB.
	IndexIntervalBytes int64
	// MaxBatchBytes bounds one record batch. Default
	// record.DefaultMaxBatchBytes, or SegmentBytes if that is smaller.
	MaxBatchBytes int
	// RetentionBytes and RetentionAge are the retention EnforceRetention
	// applies (a broker passes its topics' current values to
	// RetentionOffset instead). RetentionBytes deletes the oldest segments
	// while the log is larger; negative means no limit, default -1.
	// RetentionAge deletes segments whose newest record is older; zero
	// means the default, 7 days.
	RetentionBytes int64
	RetentionAge   time.Duration
	// PendingBytesMax bounds the bytes appended and not yet written to a
	// file (pending.go), which a sync job writes: an append that would take
	// them past it is refused with ErrWriteBacklog, unless nothing is
	// pending (so that any append the log takes at all can go in). A disk
	// that stalls then makes producers wait, rather than the heap grow.
	// Default 32 MiB: several passes of the node loop at a disk's full
	// rate, for one partition.
	PendingBytesMax int64
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = 1 << 30
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = 7 * 24 * time.Hour
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = 4096
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = int(min(record.DefaultMaxBatchBytes, c.SegmentBytes))
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = 7 * 24 * time.Hour
	}
	if c.PendingBytesMax == 0 {
		c.PendingBytesMax = 32 << 20
	}
	return c
}

// Validate rejects configurations that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []error
	if c.FS == nil || c.Dir == "" {
		problems = append(problems, errors.New("a log needs an FS and a directory"))
	}
	if c.SegmentBytes < SegmentBytesMin || c.SegmentBytes > SegmentBytesMax {
		problems = append(problems, fmt.Errorf("segment bytes %d outside [%d, %d]", c.SegmentBytes, SegmentBytesMin, int64(SegmentBytesMax)))
	}
	if c.IndexIntervalBytes < IndexIntervalBytesMin {
		problems = append(problems, fmt.Errorf("index interval %d bytes below %d", c.IndexIntervalBytes, IndexIntervalBytesMin))
	}
	if c.MaxBatchBytes <= 0 || int64(c.MaxBatchBytes) > c.SegmentBytes {
		problems = append(problems, fmt.Errorf("max batch bytes %d must be positive and fit a segment of %d bytes", c.MaxBatchBytes, c.SegmentBytes))
	}
	if c.PendingBytesMax < 0 {
		problems = append(problems, fmt.Errorf("pending bytes max %d is negative", c.PendingBytesMax))
	}
	if c.SegmentAge < 0 || c.RetentionAge < 0 {
		problems = append(problems, errors.New("durations must not be negative"))
	}
	return errors.Join(problems...)
}
