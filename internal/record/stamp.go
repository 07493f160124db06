package record

import (
	"encoding/binary"
	"fmt"
)

// The leader assigns a batch its base offset and its leader epoch on append,
// after the producer computed the CRC. Both fields lie before the CRC-covered
// region [AttributesPosition, Size()), which is why Kafka put them there: the
// leader can stamp them in place, and the producer's CRC still holds.
//
// These functions take a batch that has already been validated. A buffer too
// short to hold a header, or without magic 2, is a programming error in the
// caller, so they panic rather than return an error.

// SetBaseOffset writes offset into the batch's baseOffset field in place.
func SetBaseOffset(b []byte, offset Offset) {
	assertBatchHeader(b)
	binary.BigEndian.PutUint64(b[BaseOffsetPosition:], uint64(offset))
}

// SetPartitionLeaderEpoch writes epoch into the batch's partitionLeaderEpoch
// field in place.
func SetPartitionLeaderEpoch(b []byte, epoch LeaderEpoch) {
	assertBatchHeader(b)
	binary.BigEndian.PutUint32(b[PartitionLeaderEpochPosition:], uint32(epoch))
}

// BaseOffset reads the batch's baseOffset field.
func BaseOffset(b []byte) Offset {
	assertBatchHeader(b)
	return Offset(binary.BigEndian.Uint64(b[BaseOffsetPosition:]))
}

// PartitionLeaderEpoch reads the batch's partitionLeaderEpoch field.
func PartitionLeaderEpoch(b []byte) LeaderEpoch {
	assertBatchHeader(b)
	return LeaderEpoch(binary.BigEndian.Uint32(b[PartitionLeaderEpochPosition:]))
}

// assertBatchHeader panics unless b starts with a v2 batch header. Writing an
// offset into bytes that are not a batch would corrupt the log silently.
func assertBatchHeader(b []byte) {
	if len(b) < HeaderSize {
		panic(fmt.Sprintf("record: %d bytes cannot hold a batch header of %d bytes", len(b), HeaderSize))
	}
	if b[MagicPosition] != Magic {
		panic(fmt.Sprintf("record: magic %d, expected a v2 batch", int8(b[MagicPosition])))
	}
}
