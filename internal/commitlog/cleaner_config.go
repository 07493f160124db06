package commitlog

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// Limits of the log cleaner.
const (
	// CleanerOffsetMapBytesDefault bounds the memory of one cleaning pass's
	// offset map (key -> latest offset), like Kafka's
	// log.cleaner.dedupe.buffer.size (128 MiB shared by its cleaner
	// threads; tide cleans one log at a time). A dirty section whose keys do
	// not fit is cleaned in several passes: each pass cleans up to the last
	// batch whose keys fit and moves the cleaner checkpoint there.
	CleanerOffsetMapBytesDefault = 16 << 20
	// CleanerOffsetMapBytesMin keeps the map useful.
	CleanerOffsetMapBytesMin = 1 << 10
	// offsetMapEntryOverheadBytes is what the map charges for one key on
	// top of the key's bytes: the map's own bucket, string header and
	// offset, roughly.
	offsetMapEntryOverheadBytes = 48
	// cleanerDecompressedBatchBytesMax bounds what one stored compressed
	// batch may inflate to while the cleaner opens it: what the producer's
	// gateway allowed (record.DefaultMaxDecompressedBatchBytes).
	cleanerDecompressedBatchBytesMax = record.DefaultMaxDecompressedBatchBytes
)

// Kafka's defaults for the cleaner's topic configs.
const (
	// DeleteRetentionMsDefault is delete.retention.ms: one day.
	DeleteRetentionMsDefault = 24 * 60 * 60 * 1000
	// MinCleanableDirtyRatioDefault is min.cleanable.dirty.ratio.
	MinCleanableDirtyRatioDefault = 0.5
)

// CleanerConfig is what the cleaner needs of a topic's configuration:
// cleanup.policy, delete.retention.ms, min.compaction.lag.ms,
// max.compaction.lag.ms and min.cleanable.dirty.ratio, with Kafka's meanings and defaults
// (DefaultCleanerConfig), plus the memory bound of a pass. The broker builds
// it from the topic's configs (see broker.CleanerConfigFor, the one seam
// where per-topic configs plug in).
type CleanerConfig struct {
	// Compact is true when cleanup.policy contains compact. A log whose
	// policy does not is never cleaned.
	Compact bool
	// DeleteRetentionMs is how long a tombstone (a keyed record with a null
	// value) stays after the cleaner first sees it (KIP-534's delete
	// horizon), so that a consumer reading from the start still sees the
	// delete.
	DeleteRetentionMs int64
	// MinCompactionLagMs keeps a segment out of cleaning while its newest
	// record is younger than this, so that consumers may see every update
	// that recent.
	MinCompactionLagMs int64
	// MinCleanableDirtyRatio is the share of the log's cleanable bytes
	// that must be dirty (not cleaned yet) before a pass runs.
	MinCleanableDirtyRatio float64
	// MaxCompactionLagMs is max.compaction.lag.ms: once a cleanable dirty
	// segment's newest record is older than this, a pass runs whatever
	// the dirty ratio, so that no update waits uncompacted for longer
	// (KIP-354). Zero or less means no bound (Kafka's default, the
	// largest long).
	MaxCompactionLagMs int64
	// OffsetMapBytes bounds the pass's offset map; default
	// CleanerOffsetMapBytesDefault.
	OffsetMapBytes int64
}

// DefaultCleanerConfig is Kafka's defaults with compaction on: what a topic
// with cleanup.policy=compact and no other cleaner config gets.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{
		Compact:                true,
		DeleteRetentionMs:      DeleteRetentionMsDefault,
		MinCompactionLagMs:     0,
		MinCleanableDirtyRatio: MinCleanableDirtyRatioDefault,
		OffsetMapBytes:         CleanerOffsetMapBytesDefault,
	}
}

// Validate rejects values Kafka's LogConfig rejects (INVALID_CONFIG there).
func (c CleanerConfig) Validate() error {
	var problems []error
	if c.DeleteRetentionMs < 0 {
		problems = append(problems, fmt.Errorf("delete.retention.ms %d is negative", c.DeleteRetentionMs))
	}
	if c.MinCompactionLagMs < 0 {
		problems = append(problems, fmt.Errorf("min.compaction.lag.ms %d is negative", c.MinCompactionLagMs))
	}
	if c.MaxCompactionLagMs > 0 && c.MaxCompactionLagMs < c.MinCompactionLagMs {
		problems = append(problems, fmt.Errorf("max.compaction.lag.ms %d is below min.compaction.lag.ms %d", c.MaxCompactionLagMs, c.MinCompactionLagMs))
	}
	if !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) {
		problems = append(problems, fmt.Errorf("min.cleanable.dirty.ratio %v outside [0, 1]", c.MinCleanableDirtyRatio))
	}
	if c.OffsetMapBytes != 0 && c.OffsetMapBytes < CleanerOffsetMapBytesMin {
		problems = append(problems, fmt.Errorf("offset map of %d bytes is below %d", c.OffsetMapBytes, CleanerOffsetMapBytesMin))
	}
	return errors.Join(problems...)
}

func (c CleanerConfig) offsetMapBytes() int64 {
	if c.OffsetMapBytes == 0 {
		return CleanerOffsetMapBytesDefault
	}
	return c.OffsetMapBytes
}

// The cleaner's files in a partition directory.
const (
	// cleanerCheckpointName holds the cleaner checkpoint: the offset below
	// which the log has been cleaned (Kafka keeps one such file per log
	// directory, cleaner-offset-checkpoint; tide keeps one per partition).
	cleanerCheckpointName = "cleaner-offset-checkpoint"
	// cleanedSuffix ends a segment or index the cleaner is writing; it
	// replaces the original by rename. Recovery removes leftovers: a crash
	// stopped the pass before the swap, and the original is intact.
	cleanedSuffix = ".cleaned"
)

const cleanerCheckpointVersion = "0"

func marshalCleanerCheckpoint(offset record.Offset) []byte {
	return fmt.Appendf(nil, "%s\n%d\n", cleanerCheckpointVersion, offset)
}

func unmarshalCleanerCheckpoint(data []byte) (record.Offset, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != cleanerCheckpointVersion {
		return 0, fmt.Errorf("%w: cleaner checkpoint header or line count", errCheckpointFormat)
	}
	offset, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || offset < 0 {
		return 0, fmt.Errorf("%w: cleaner checkpoint offset %q", errCheckpointFormat, lines[1])
	}
	return record.Offset(offset), nil
}

// cleanerState is what the log remembers of its cleaning.
type cleanerState struct {
	// loaded is false until the checkpoint has been read (on the first
	// pass after Open).
	loaded bool
	// cleanedTo is the cleaner checkpoint: the first dirty offset.
	cleanedTo record.Offset
	// retired are segments swapped out, whose files are still open.
	retired []*segment
}

// firstDirtyLocked returns where the dirty section starts: the cleaner
// checkpoint, reset to the log start offset when it lies outside the log
// (Kafka's LogCleanerManager does the same), for instance after a
// truncation or a move of the log start. A missing or unreadable checkpoint
// means nothing is clean yet.
func (l *Log) firstDirtyLocked() (record.Offset, error) {
	if !l.cleaner.loaded {
		data, err := readSmallFile(l.cfg.FS, path.Join(l.cfg.Dir, cleanerCheckpointName))
		switch {
		case err == nil:
			if offset, parseErr := unmarshalCleanerCheckpoint(data); parseErr == nil {
				l.cleaner.cleanedTo = offset
			}
		case !errors.Is(err, disk.ErrNotExist):
			return 0, err
		}
		l.cleaner.loaded = true
	}
	if l.cleaner.cleanedTo < l.logStartOffset || l.cleaner.cleanedTo > l.logEndOffsetLocked() {
		return l.logStartOffset, nil
	}
	return l.cleaner.cleanedTo, nil
}

// writeCleanerCheckpointLocked records that the log is clean below offset.
func (l *Log) writeCleanerCheckpointLocked(offset record.Offset) error {
	if err := disk.WriteFileAtomically(l.cfg.FS, l.cfg.Dir, cleanerCheckpointName, marshalCleanerCheckpoint(offset)); err != nil {
		return l.failLocked(fmt.Errorf("write cleaner checkpoint: %w", err))
	}
	l.cleaner.cleanedTo = offset
	return nil
}
