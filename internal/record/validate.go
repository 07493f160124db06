package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// DefaultMaxBatchBytes is Kafka's default message.max.bytes: the largest
// batch, header included, a broker accepts (1 MiB plus the 12-byte log
// overhead).
const DefaultMaxBatchBytes = 1048588

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2 or ARMv8 CRC
// instructions for it where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Limits bounds what the validators accept.
type Limits struct {
	// MaxBatchBytes is the largest batch accepted, in bytes, header
	// included. Bigger batches fail with ErrKindTooLarge.
	MaxBatchBytes int
	// RequireDenseOffsets says every offset in [BaseOffset, NextOffset())
	// has exactly one record: recordCount == lastOffsetDelta+1 and record i
	// has offsetDelta i. Set it for batches from producers, which always
	// write them that way. Clear it for batches read back from a log that
	// compaction may have thinned: compaction removes records but keeps
	// lastOffsetDelta, and may keep a batch with no records at all to
	// preserve a producer's last sequence number (KIP-98).
	RequireDenseOffsets bool
	// MaxDecompressedBatchBytes, when positive, opens compressed batches:
	// their records are decompressed, at most this many bytes of them (more
	// fails with ErrKindInvalid as soon as the limit is passed), and checked
	// like uncompressed records. Set it for batches from producers, which
	// nothing checked before (default DefaultMaxDecompressedBatchBytes).
	// Zero checks compressed batches at header level only: for batches a
	// leader already opened, read back from a log or replicated to a
	// follower, whose CRC proves they are the bytes that were checked.
	MaxDecompressedBatchBytes int
	// RequireExactMaxTimestamp says a CreateTime batch's maxTimestamp must
	// be its largest record timestamp, as producers write it; see
	// checkMaxTimestamp. It is checked only where the records are walked.
	RequireExactMaxTimestamp bool
}

// DefaultLimits are the limits for producer input: Kafka's default
// message.max.bytes, dense offsets, compressed batches opened up to
// DefaultMaxDecompressedBatchBytes, and exact max timestamps.
func DefaultLimits() Limits {
	return Limits{MaxBatchBytes: DefaultMaxBatchBytes, RequireDenseOffsets: true,
		MaxDecompressedBatchBytes: DefaultMaxDecompressedBatchBytes, RequireExactMaxTimestamp: true}
}

// Validate rejects limits no batch could meet. Call it once when loading
// configuration; the validators panic on limits that fail it.
func (l Limits) Validate() error {
	if l.MaxBatchBytes < HeaderSize || l.MaxBatchBytes > LogOverheadSize+math.MaxInt32 {
		return fmt.Errorf("record: MaxBatchBytes %d is outside [%d, %d]",
			l.MaxBatchBytes, HeaderSize, LogOverheadSize+math.MaxInt32)
	}
	if l.MaxDecompressedBatchBytes < 0 || l.MaxDecompressedBatchBytes > MaxDecompressedBatchBytesMax {
		return fmt.Errorf("record: MaxDecompressedBatchBytes %d is outside [0, %d]",
			l.MaxDecompressedBatchBytes, MaxDecompressedBatchBytesMax)
	}
	return nil
}

// Validate checks that b holds exactly one acceptable v2 batch, and returns
// its header. The checks, in order, each failing with the kind shown:
//
//   - b holds the batchLength field: truncated
//   - batchLength >= MinBatchLength: corrupt
//   - the batch size <= limits.MaxBatchBytes: too large
//   - the batch size <= len(b): truncated
//   - magic == 2: invalid
//   - the CRC-32C of [AttributesPosition, size) matches: corrupt
//   - the codec is 0 to 4, lastOffsetDelta >= 0, and 0 <= recordCount <=
//     lastOffsetDelta+1; with limits.RequireDenseOffsets, recordCount ==
//     lastOffsetDelta+1 (so at least one record): invalid
//   - compressed records, with limits.MaxDecompressedBatchBytes: they
//     decompress with the batch's codec (corrupt) to at most that many
//     bytes (invalid)
//   - uncompressed records, and decompressed ones: every record is well
//     formed and lies inside the batch, offset deltas strictly increase up
//     to lastOffsetDelta (and equal the record's index when dense), there
//     are exactly recordCount records and no bytes after them: invalid,
//     naming the record (Error.RecordIndex) where one is at fault
//   - with limits.RequireExactMaxTimestamp, maxTimestamp is the largest
//     record timestamp: invalid (Kafka's INVALID_TIMESTAMP)
//   - len(b) is the batch size, with nothing after it: invalid
//
// Without limits.MaxDecompressedBatchBytes a compressed batch gets the
// header checks only, for batches a leader already opened.
//
// The returned error, if any, is an *Error. Validate does not keep b.
func Validate(b []byte, limits Limits) (Header, error) {
	assertLimits(limits)
	header, err := validateBatch(b, limits)
	if err != nil {
		return Header{}, err
	}
	if header.Size() != len(b) {
		return Header{}, newError(ErrKindInvalid, 0, header.Size(),
			fmt.Sprintf("%d bytes after the batch", len(b)-header.Size()))
	}
	return header, nil
}

// ValidateAll checks a buffer of concatenated batches, as a produce request
// or a fetch response carries them, and returns the headers of the batches
// that passed, in order. On the first batch that fails it stops and returns
// the headers before it with an *Error whose BatchPosition is where the bad
// batch starts. An empty buffer holds no batches and is valid.
func ValidateAll(b []byte, limits Limits) ([]Header, error) {
	var headers []Header
	iterator := NewIterator(b, limits)
	for iterator.Next() {
		headers = append(headers, iterator.Header())
	}
	return headers, iterator.Err()
}

// MatchHeaders checks that b is exactly the batches headers describe, in
// order: each header, read from b where the one before it ends, equals the
// one given, and the last ends where b does. It reads headers only, not the
// records or their CRC: it is the check a layer makes on batches that the
// layer above validated in full (ValidateAll, at the gateway) and handed
// down with their headers, so that a mix-up between the two (a header of
// another buffer, bytes changed after the validation without the header)
// is caught at a cost per batch rather than per byte. An error is an
// *Error, ErrKindCorrupt.
func MatchHeaders(b []byte, headers []Header) error {
	position := 0
	for i, want := range headers {
		got, err := ParseHeader(b[position:])
		if err != nil {
			return err.(*Error).withBase(position)
		}
		if got != want || got.Size() > len(b)-position {
			return newError(ErrKindCorrupt, position, position,
				fmt.Sprintf("batch %d: header %+v in the bytes, %+v handed down", i, got, want))
		}
		position += got.Size()
	}
	if position != len(b) {
		return newError(ErrKindCorrupt, position, position, fmt.Sprintf("%d bytes after the %d batches handed down", len(b)-position, len(headers)))
	}
	return nil
}

// validateBatch checks the batch at the start of b, which may continue past
// it. Positions in the error are relative to b. The caller has checked
// limits.
func validateBatch(b []byte, limits Limits) (Header, *Error) {
	size, err := checkFraming(b, limits)
	if err != nil {
		return Header{}, err
	}
	batch := b[:size]
	header := decodeHeader(batch)
	if header.Magic != Magic {
		return Header{}, newError(ErrKindInvalid, 0, MagicPosition,
			fmt.Sprintf("magic %d, only %d is supported", header.Magic, Magic))
	}
	computed := crc32.Checksum(batch[AttributesPosition:], castagnoli)
	if computed != header.CRC {
		return Header{}, newError(ErrKindCorrupt, 0, CRCPosition,
			fmt.Sprintf("crc 0x%08x stored, 0x%08x computed", header.CRC, computed))
	}
	if err := checkHeaderFields(header, limits); err != nil {
		return Header{}, err
	}
	if err := checkRecords(batch, header, limits); err != nil {
		return Header{}, err
	}
	return header, nil
}

// checkRecords walks the records of a batch whose header passed: as they
// are when uncompressed, decompressed first when limits say to open
// compressed batches. Errors inside compressed records point at the start
// of the records, the last position in b that means anything.
func checkRecords(batch []byte, header Header, limits Limits) *Error {
	if header.Compression() == CompressionNone {
		return walkRecords(batch, HeaderSize, header, limits)
	}
	if limits.MaxDecompressedBatchBytes == 0 {
		return nil
	}
	records, err := decompress(header.Compression(), batch[HeaderSize:], limits.MaxDecompressedBatchBytes)
	if err != nil {
		return err
	}
	if err := walkRecords(records, 0, header, limits); err != nil {
		if err.Position != MaxTimestampPosition {
			err.Position = HeaderSize
		}
		return err
	}
	return nil
}

// CheckFromProducer checks the rules a batch from a producer must meet
// beyond Validate's, those of Kafka's LogValidator for a batch from a
// client: no control batch (only the broker writes transaction markers),
// no idempotent batch with a negative base sequence, and no LogAppendTime
// (the broker's to set): invalid, the last with Kafka's INVALID_TIMESTAMP.
// The header must have passed Validate. The returned error, if any, is an
// *Error positioned as if from Validate on the batch alone.
func CheckFromProducer(header Header) error {
	switch {
	case header.IsControl():
		return newError(ErrKindInvalid, 0, AttributesPosition, "clients may not write control batches")
	case header.ProducerID >= 0 && header.BaseSequence < 0:
		return newError(ErrKindInvalid, 0, BaseSequencePosition,
			fmt.Sprintf("producer id %d with base sequence %d", header.ProducerID, header.BaseSequence))
	case header.IsLogAppendTime():
		return newError(ErrKindInvalid, 0, AttributesPosition,
			"producers may not set the LogAppendTime timestamp type").withCode(kafkaCodeInvalidTimestamp)
	}
	return nil
}

// checkFraming reads batchLength and returns the batch size once it is sane
// and b holds that many bytes. The order matters for what a log's recovery
// sees at a torn tail: a length that cannot be right is corruption, a
// plausible length with too few bytes is a truncation.
func checkFraming(b []byte, limits Limits) (int, *Error) {
	if len(b) < LogOverheadSize {
		return 0, newError(ErrKindTruncated, 0, len(b),
			fmt.Sprintf("%d bytes, too few for baseOffset and batchLength", len(b)))
	}
	batchLength := int32(binary.BigEndian.Uint32(b[BatchLengthPosition:]))
	if batchLength < MinBatchLength {
		return 0, newError(ErrKindCorrupt, 0, BatchLengthPosition,
			fmt.Sprintf("batchLength %d is below the minimum %d", batchLength, MinBatchLength))
	}
	size := LogOverheadSize + int(batchLength)
	if size > limits.MaxBatchBytes {
		return 0, newError(ErrKindTooLarge, 0, BatchLengthPosition,
			fmt.Sprintf("%d bytes, the limit is %d", size, limits.MaxBatchBytes))
	}
	if size > len(b) {
		return 0, newError(ErrKindTruncated, 0, len(b),
			fmt.Sprintf("batch of %d bytes, only %d present", size, len(b)))
	}
	return size, nil
}

// checkHeaderFields checks the header fields the CRC cannot vouch for: the
// producer computed the CRC over whatever it wrote, right or wrong.
func checkHeaderFields(header Header, limits Limits) *Error {
	if header.Compression() > CompressionZstd {
		return newError(ErrKindInvalid, 0, AttributesPosition,
			fmt.Sprintf("unknown compression codec %d", header.Compression()))
	}
	if header.LastOffsetDelta < 0 {
		return newError(ErrKindInvalid, 0, LastOffsetDeltaPosition,
			fmt.Sprintf("negative lastOffsetDelta %d", header.LastOffsetDelta))
	}
	// int64: lastOffsetDelta+1 overflows int32 at math.MaxInt32.
	offsetCount := int64(header.LastOffsetDelta) + 1
	recordCount := int64(header.RecordCount)
	if recordCount < 0 || recordCount > offsetCount {
		return newError(ErrKindInvalid, 0, RecordCountPosition,
			fmt.Sprintf("recordCount %d outside [0, lastOffsetDelta+1 = %d]", recordCount, offsetCount))
	}
	if limits.RequireDenseOffsets && recordCount != offsetCount {
		return newError(ErrKindInvalid, 0, RecordCountPosition,
			fmt.Sprintf("recordCount %d, lastOffsetDelta+1 is %d", recordCount, offsetCount))
	}
	return nil
}

func assertLimits(limits Limits) {
	if err := limits.Validate(); err != nil {
		panic(err)
	}
}
