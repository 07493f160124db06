package commitlog

import (
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// Operating errors: the request cannot be served, the log is fine.
var (
	// ErrOffsetOutOfRange is returned for a read or truncation outside
	// [log start offset, log end offset].
	ErrOffsetOutOfRange = errors.New("commitlog: offset out of range")
	// ErrNotContiguous is returned when a follower append does not start
	// at the log end offset or its batches leave gaps.
	ErrNotContiguous = errors.New("commitlog: follower append is not contiguous")
	// ErrEpochRegression is returned when an append carries a leader epoch
	// below the latest epoch the log already has.
	ErrEpochRegression = errors.New("commitlog: leader epoch goes backwards")
	// ErrBatchTooLarge is returned when one append cannot fit a segment.
	ErrBatchTooLarge = errors.New("commitlog: append larger than a segment")
	// ErrOffsetSpanTooLarge is returned when one append covers more offsets
	// than a segment can index (SegmentOffsetSpanMax): one append never
	// spans two segments, so it cannot be stored. The log is unchanged.
	ErrOffsetSpanTooLarge = errors.New("commitlog: append spans more offsets than a segment can index")
	// ErrTooManySegments is returned when a roll would exceed SegmentsOpenMax.
	ErrTooManySegments = errors.New("commitlog: too many segments")
	// ErrWriteBacklog is returned for an append that would take the bytes
	// appended and not yet written past Config.PendingBytesMax: the disk is
	// behind. The log is unchanged; the append may be tried again once
	// sync jobs have written the backlog (CheckWriteBacklog says when).
	ErrWriteBacklog = errors.New("commitlog: too many appended bytes wait to be written")
	// ErrClosed is returned by every operation on a closed log.
	ErrClosed = errors.New("commitlog: log closed")
)

// ErrLogFailed is wrapped by every error a log returns after a write or sync
// failed. A failed fsync leaves the file in an unknown state (the kernel may
// have dropped the dirty pages), so the log stops instead of retrying: the
// broker must take the replica offline and recover it from disk or from the
// leader.
var ErrLogFailed = errors.New("commitlog: log failed")

type failedError struct{ cause error }

func (e *failedError) Error() string   { return fmt.Sprintf("commitlog: log failed: %v", e.cause) }
func (e *failedError) Unwrap() []error { return []error{ErrLogFailed, e.cause} }

// CorruptionError reports damage that recovery refuses to repair by cutting,
// because the damaged bytes lie below the recovery point: they were synced,
// so cutting them could drop acknowledged data.
type CorruptionError struct {
	Segment  string
	Position int64
	Offset   record.Offset
	Cause    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("commitlog: corrupt synced data in %s at byte %d (offset %d): %v", e.Segment, e.Position, e.Offset, e.Cause)
}

func (e *CorruptionError) Unwrap() error { return e.Cause }

// errCannotIndex is the damage of a batch that ends beyond what its
// segment's index can address (SegmentOffsetSpanMax). It wraps
// record.ErrInvalid, so recovery treats it like any invalid batch: a tail
// to cut above the recovery point, a CorruptionError below it.
func errCannotIndex(s *segment, header record.Header) error {
	return fmt.Errorf("batch [%d, %d) in segment %d spans past the %d offsets a segment can index: %w",
		header.BaseOffset, header.NextOffset(), s.baseOffset, int64(SegmentOffsetSpanMax), record.ErrInvalid)
}
