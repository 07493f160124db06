package raftlog

import (
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/disk"
)

// Limits on what one Storage holds. They exist so that a bad peer, a bad
// configuration or bad bytes on disk are refused with an error instead of
// exhausting memory: every length read from disk is checked against one of
// them before anything is allocated for it.
const (
	// SegmentBytesMin keeps a segment large enough for its header and a
	// few small entries, so that rolling stays rare.
	SegmentBytesMin = 4 << 10
	// SegmentBytesMax bounds a segment so that recovery can read one whole
	// segment into memory at a time.
	SegmentBytesMax = 1 << 30
	// EntryBytesMaxLimit bounds the configurable MaxEntryBytes.
	EntryBytesMaxLimit = 64 << 20
	// SnapshotBytesMaxLimit bounds the configurable MaxSnapshotBytes: a
	// snapshot is read whole into memory at open.
	SnapshotBytesMaxLimit = 1 << 31
	// hardStateBytesMax bounds the hard-state file: three varints.
	hardStateBytesMax = 64

	defaultSegmentBytes     = 16 << 20
	defaultMaxEntryBytes    = 1 << 20
	defaultMaxSnapshotBytes = 256 << 20
)

// Config configures one Storage.
type Config struct {
	// FS holds the storage; Dir is its directory in it, used by nothing
	// else.
	FS  disk.FS
	Dir string
	// SegmentBytes rolls the active segment once an append would take it
	// past this size. Default 16 MiB.
	SegmentBytes int64
	// MaxEntryBytes bounds one entry's encoding (raftpb.Entry protobuf
	// bytes): Append refuses larger entries. Recovery reads with
	// EntryBytesMaxLimit instead, so that lowering this between runs never
	// makes written entries look damaged. It must leave room for the
	// segment header in a segment. Default 1 MiB. The metadata quorum's proposals are small;
	// the caller should also set raft.Config.MaxSizePerMsg below it.
	MaxEntryBytes int
	// MaxSnapshotBytes bounds a snapshot's encoding (metadata and the
	// application's data) when it is written; recovery reads up to
	// SnapshotBytesMaxLimit. Default 256 MiB.
	MaxSnapshotBytes int64
}

func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = int(min(defaultMaxEntryBytes, c.SegmentBytes-segmentHeaderBytes-frameHeaderBytes))
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = defaultMaxSnapshotBytes
	}
	return c
}

// Validate rejects configurations that cannot work. Defaults are applied
// first, so a zero field is never the problem.
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []error
	if c.FS == nil || c.Dir == "" {
		problems = append(problems, errors.New("a raft storage needs an FS and a directory"))
	}
	if c.SegmentBytes < SegmentBytesMin || c.SegmentBytes > SegmentBytesMax {
		problems = append(problems, fmt.Errorf("segment bytes %d outside [%d, %d]", c.SegmentBytes, SegmentBytesMin, SegmentBytesMax))
	}
	if c.MaxEntryBytes <= 0 || c.MaxEntryBytes > EntryBytesMaxLimit {
		problems = append(problems, fmt.Errorf("max entry bytes %d outside [1, %d]", c.MaxEntryBytes, EntryBytesMaxLimit))
	}
	if int64(c.MaxEntryBytes)+frameHeaderBytes+segmentHeaderBytes > c.SegmentBytes {
		problems = append(problems, fmt.Errorf("an entry of %d bytes does not fit a segment of %d bytes after its header", c.MaxEntryBytes, c.SegmentBytes))
	}
	if c.MaxSnapshotBytes <= 0 || c.MaxSnapshotBytes > SnapshotBytesMaxLimit {
		problems = append(problems, fmt.Errorf("max snapshot bytes %d outside [1, %d]", c.MaxSnapshotBytes, int64(SnapshotBytesMaxLimit)))
	}
	return errors.Join(problems...)
}
