package raftlog

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/tidelog/tide/internal/disk"
	pb "go.etcd.io/raft/v3/raftpb"
)

// File names inside the storage directory.
const (
	hardStateName   = "hardstate"
	snapshotName    = "snapshot"
	temporarySuffix = disk.TemporarySuffix
	segmentSuffix   = ".log"
	// segmentNameDigits zero-pads a segment's base index, so that names
	// sort in index order.
	segmentNameDigits = 20
)

func segmentFileName(base uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, base, segmentSuffix)
}

func parseSegmentFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != segmentNameDigits {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil && base > 0
}

// readFile reads a whole file of at most maxBytes. A missing file returns
// an error wrapping disk.ErrNotExist; a larger one is damage.
func readFile(fs disk.FS, name string, maxBytes int64) ([]byte, error) {
	file, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return nil, err
	}
	if size > maxBytes {
		return nil, &CorruptionError{File: name, Cause: fmt.Errorf("%w: %d bytes, at most %d expected", ErrDamaged, size, maxBytes)}
	}
	data := make([]byte, size)
	if _, err := file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}

// readMessageFile reads a hard-state or snapshot file: one frame of kind
// holding a protobuf message, and nothing after it. It reports whether the
// file exists. Any damage is a CorruptionError: these files are replaced
// atomically, so no crash leaves them torn.
func readMessageFile(fs disk.FS, name string, kind recordKind, maxPayload int64, message proto.Message) (bool, error) {
	data, err := readFile(fs, name, maxPayload+frameHeaderBytes)
	if errors.Is(err, disk.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	found, payload, size, err := decodeFrame(data, int(maxPayload))
	if err == nil && (found != kind || size != len(data)) {
		err = fmt.Errorf("%w: expected one frame of kind %d, found kind %d of %d bytes in %d", ErrDamaged, kind, found, size, len(data))
	}
	if err == nil {
		if err = proto.Unmarshal(payload, message); err != nil {
			err = fmt.Errorf("%w: %v", ErrDamaged, err)
		}
	}
	if err != nil {
		return false, &CorruptionError{File: name, Cause: err}
	}
	return true, nil
}

// writeMessageFile replaces a hard-state or snapshot file atomically.
func writeMessageFile(fs disk.FS, dir, name string, kind recordKind, message proto.Message) error {
	payload, err := proto.Marshal(message)
	if err != nil {
		return err
	}
	return disk.WriteFileAtomically(fs, dir, name, appendFrame(nil, kind, payload))
}

// hardStateValues returns a comparable copy of a hard state.
func hardStateValues(hs *pb.HardState) [3]uint64 {
	return [3]uint64{hs.GetTerm(), hs.GetVote(), hs.GetCommit()}
}
