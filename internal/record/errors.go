package record

import (
	"errors"
	"fmt"
)

// ErrorKind says what is wrong with a batch, and so what the caller does next.
type ErrorKind int8

const (
	// ErrKindTruncated: the buffer ends before the batch does. In a log this
	// is a torn tail left by a crash mid-write: recovery truncates the log
	// at Error.BatchPosition. In a fetch response it is the partial last
	// batch that a byte limit cut off, which the fetcher drops.
	ErrKindTruncated ErrorKind = iota + 1
	// ErrKindCorrupt: the bytes changed after the producer wrote them: the
	// CRC does not match, or a length is impossible.
	ErrKindCorrupt
	// ErrKindInvalid: the bytes are intact but not an acceptable batch: bad
	// magic, unknown codec, inconsistent offsets, malformed records.
	ErrKindInvalid
	// ErrKindTooLarge: the batch is bigger than Limits.MaxBatchBytes.
	ErrKindTooLarge
)

// Sentinels for errors.Is. Every *Error matches exactly one of them, the one
// for its Kind.
var (
	ErrTruncated = errors.New("record: truncated batch")
	ErrCorrupt   = errors.New("record: corrupt batch")
	ErrInvalid   = errors.New("record: invalid batch")
	ErrTooLarge  = errors.New("record: batch too large")
)

// Kafka error codes, from org.apache.kafka.common.protocol.Errors.
const (
	kafkaCodeCorruptMessage   int16 = 2
	kafkaCodeMessageTooLarge  int16 = 10
	kafkaCodeInvalidTimestamp int16 = 32
	kafkaCodeInvalidRecord    int16 = 87
)

// NoRecordIndex is Error.RecordIndex when the batch as a whole failed, not
// one of its records.
const NoRecordIndex = -1

// String names the kind as it appears in error messages.
func (k ErrorKind) String() string {
	switch k {
	case ErrKindTruncated:
		return "truncated"
	case ErrKindCorrupt:
		return "corrupt"
	case ErrKindInvalid:
		return "invalid"
	case ErrKindTooLarge:
		return "too large"
	}
	return fmt.Sprintf("ErrorKind(%d)", int8(k))
}

func (k ErrorKind) sentinel() error {
	switch k {
	case ErrKindTruncated:
		return ErrTruncated
	case ErrKindCorrupt:
		return ErrCorrupt
	case ErrKindInvalid:
		return ErrInvalid
	case ErrKindTooLarge:
		return ErrTooLarge
	}
	panic(fmt.Sprintf("record: unknown error kind %d", int8(k)))
}

// Error describes why a batch was rejected. Positions are byte offsets into
// the buffer given to Validate, ValidateAll or NewIterator.
type Error struct {
	Kind ErrorKind
	// BatchPosition is where the rejected batch starts. Every batch before
	// it passed validation; a log recovering from a crash truncates here.
	BatchPosition int
	// Position is where the check failed: the field, or the record, that
	// is wrong. Position >= BatchPosition.
	Position int
	// Reason is a short human description, for logs and error messages.
	Reason string
	// RecordIndex is the index in its batch of the record that failed
	// (Kafka's batch_index in a Produce v8+ record error), or NoRecordIndex
	// when the batch as a whole failed.
	RecordIndex int
	// code, when not zero, is the Kafka error code, where the kind's
	// default is not Kafka's answer (INVALID_TIMESTAMP).
	code int16
}

func newError(kind ErrorKind, batchPosition, position int, reason string) *Error {
	return &Error{Kind: kind, BatchPosition: batchPosition, Position: position, Reason: reason, RecordIndex: NoRecordIndex}
}

// newRecordError is newError for the failure of record index of the batch.
func newRecordError(kind ErrorKind, batchPosition, position, index int, reason string) *Error {
	return &Error{Kind: kind, BatchPosition: batchPosition, Position: position, Reason: reason, RecordIndex: index}
}

// withCode sets the Kafka code e answers with, for the checks whose Kafka
// answer is not their kind's default.
func (e *Error) withCode(code int16) *Error {
	e.code = code
	return e
}

// Error formats the kind, positions and reason.
func (e *Error) Error() string {
	return fmt.Sprintf("record: %s batch at byte %d: %s (at byte %d)",
		e.Kind, e.BatchPosition, e.Reason, e.Position)
}

// Unwrap returns the sentinel for e.Kind, so errors.Is(err, ErrCorrupt) works.
func (e *Error) Unwrap() error { return e.Kind.sentinel() }

// KafkaCode is the error code a produce response carries for this error.
// A truncated batch in a request means the client sent fewer bytes than the
// batch declares, which Kafka reports as CORRUPT_MESSAGE.
func (e *Error) KafkaCode() int16 {
	if e.code != 0 {
		return e.code
	}
	switch e.Kind {
	case ErrKindTooLarge:
		return kafkaCodeMessageTooLarge
	case ErrKindInvalid:
		return kafkaCodeInvalidRecord
	}
	return kafkaCodeCorruptMessage
}

// withBase shifts e's positions by base, for errors found in a sub-slice.
func (e *Error) withBase(base int) *Error {
	e.BatchPosition += base
	e.Position += base
	return e
}
