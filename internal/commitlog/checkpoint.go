package commitlog

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// File names inside a partition directory.
const (
	epochCheckpointName   = "leader-epoch-checkpoint"
	offsetsCheckpointName = "offsets-checkpoint"
	temporarySuffix       = disk.TemporarySuffix
	segmentSuffix         = ".log"
	indexSuffix           = ".index"
	timeIndexSuffix       = ".timeindex"
	maxCheckpointBytes    = 1 << 20
)

// errCheckpointFormat marks a checkpoint file whose content cannot be parsed;
// recovery then falls back to rebuilding what it held.
var errCheckpointFormat = errors.New("malformed checkpoint")

// offsetsCheckpoint is what a partition log remembers across restarts apart
// from its segments and epoch cache.
type offsetsCheckpoint struct {
	// HighWatermark is never above RecoveryPoint when written: a checkpoint
	// never claims as committed what the local disk does not hold durably.
	HighWatermark record.Offset
	// RecoveryPoint is the offset below which every segment byte is synced,
	// so recovery only scans from the segment that holds it.
	RecoveryPoint record.Offset
	// LogStartOffset is the first offset readers may see.
	LogStartOffset record.Offset
}

const offsetsCheckpointVersion = "0"

func (c offsetsCheckpoint) marshal() []byte {
	return fmt.Appendf(nil, "%s\nhigh-watermark %d\nrecovery-point %d\nlog-start-offset %d\n",
		offsetsCheckpointVersion, c.HighWatermark, c.RecoveryPoint, c.LogStartOffset)
}

func unmarshalOffsetsCheckpoint(data []byte) (offsetsCheckpoint, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[0] != offsetsCheckpointVersion {
		return offsetsCheckpoint{}, fmt.Errorf("%w: offsets checkpoint header or line count", errCheckpointFormat)
	}
	fields := []struct {
		name  string
		value *record.Offset
	}{{"high-watermark", nil}, {"recovery-point", nil}, {"log-start-offset", nil}}
	var checkpoint offsetsCheckpoint
	fields[0].value = &checkpoint.HighWatermark
	fields[1].value = &checkpoint.RecoveryPoint
	fields[2].value = &checkpoint.LogStartOffset
	for i, field := range fields {
		name, value, ok := strings.Cut(lines[i+1], " ")
		if !ok || name != field.name {
			return offsetsCheckpoint{}, fmt.Errorf("%w: offsets checkpoint: expected %s, got %q", errCheckpointFormat, field.name, lines[i+1])
		}
		parsed, err := strconv.ParseInt(value, 10, 64)
		if err != nil || parsed < 0 {
			return offsetsCheckpoint{}, fmt.Errorf("%w: offsets checkpoint %s %q", errCheckpointFormat, field.name, value)
		}
		*field.value = record.Offset(parsed)
	}
	return checkpoint, nil
}

// readSmallFile reads a whole checkpoint-sized file. A missing file returns
// an error wrapping disk.ErrNotExist.
func readSmallFile(fs disk.FS, name string) ([]byte, error) {
	file, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return nil, err
	}
	if size > maxCheckpointBytes {
		return nil, fmt.Errorf("%s: %d bytes is larger than a checkpoint can be", name, size)
	}
	data := make([]byte, size)
	if _, err := file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}
