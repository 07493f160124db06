package producer

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// Verdict is what a leader does with a produced batch.
type Verdict int

const (
	// Append: a new batch, in sequence; append it.
	Append Verdict = iota
	// Duplicate: the producer retried a batch the log already holds;
	// answer with the original's offsets and append nothing.
	Duplicate
	// Reject: answer ErrorCode and append nothing.
	Reject
)

func (v Verdict) String() string {
	return [...]string{"append", "duplicate", "reject"}[v]
}

// Result is Check's answer.
type Result struct {
	Verdict Verdict
	// ErrorCode is the Kafka error code of a Reject.
	ErrorCode int16
	// Original is, for a Duplicate, the batch already in the log.
	Original BatchMetadata
	// Reason says why, for traces and tests.
	Reason string
}

func (r Result) String() string {
	switch r.Verdict {
	case Duplicate:
		return fmt.Sprintf("duplicate of %s", r.Original)
	case Reject:
		return fmt.Sprintf("%s: %s", kerr.ErrorForCode(r.ErrorCode).Error(), r.Reason)
	}
	return "append"
}

func reject(err *kerr.Error, format string, args ...any) Result {
	return Result{Verdict: Reject, ErrorCode: err.Code, Reason: fmt.Sprintf(format, args...)}
}

// Check decides what a leader does with one batch a client produced, before
// appending it (Kafka's analyzeAndValidateProducerState with
// AppendOrigin.CLIENT). The rules, in the order Kafka applies them:
//
//  1. A batch without a producer id (-1) is not idempotent: Append.
//  2. A transactional or control batch is refused with INVALID_RECORD:
//     tide has no transaction coordinator, and tracking a transaction's
//     batches without its markers would leave a partition's last stable
//     offset stuck (Kafka accepts them; tide differs here).
//  3. An idempotent batch without a base sequence is refused with
//     INVALID_RECORD (Kafka's LogValidator): it could never be deduplicated.
//  4. The same producer epoch and exactly the sequence range of one of the
//     producer's last five batches: Duplicate, answered with that batch's
//     offsets. This is what makes a retry safe: the retried records are not
//     written a second time.
//  5. A producer epoch below the one the state holds is refused with
//     INVALID_PRODUCER_EPOCH: a zombie producer instance, fenced by a newer
//     one (Kafka answers this since 2.7, PRODUCER_FENCED before).
//  6. A new, larger epoch must start at sequence 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER: the first batches of the new epoch were
//     lost, and appending would hide the gap.
//  7. The same epoch must continue at the last sequence + 1 (0 after
//     MaxInt32), else OUT_OF_ORDER_SEQUENCE_NUMBER: a batch sent after one
//     that failed must not be appended past the hole.
//  8. A producer the state does not know (its batches were truncated or
//     never reached this log) may start at any sequence, as Kafka does since
//     2.5 (KIP-360); before that Kafka answered UNKNOWN_PRODUCER_ID to a
//     non-zero sequence. tide never answers UNKNOWN_PRODUCER_ID to a
//     produce.
func (s *State) Check(header record.Header) Result {
	return s.check(header, s.producers[header.ProducerID])
}

// check applies Check's rules against entry, which may be nil (an unknown
// producer) or the entry as earlier batches of the same request left it.
func (s *State) check(header record.Header, entry *Entry) Result {
	if !IsIdempotent(header) {
		return Result{Verdict: Append}
	}
	if header.IsTransactional() || header.IsControl() {
		return reject(kerr.InvalidRecord, "producer %d: transactional and control batches are not supported", header.ProducerID)
	}
	if header.BaseSequence < 0 {
		return reject(kerr.InvalidRecord, "producer %d: invalid base sequence %d", header.ProducerID, header.BaseSequence)
	}
	if original, ok := findDuplicate(s.producers[header.ProducerID], header); ok {
		return Result{Verdict: Duplicate, Original: original}
	}
	if entry == nil {
		return Result{Verdict: Append}
	}
	switch {
	case header.ProducerEpoch < entry.ProducerEpoch:
		return reject(kerr.InvalidProducerEpoch, "producer %d: epoch %d is below the last seen epoch %d", header.ProducerID, header.ProducerEpoch, entry.ProducerEpoch)
	case entry.ProducerEpoch == NoProducerEpoch:
		return Result{Verdict: Append}
	case header.ProducerEpoch > entry.ProducerEpoch && header.BaseSequence != 0:
		return reject(kerr.OutOfOrderSequenceNumber, "producer %d: new epoch %d starts at sequence %d, not 0", header.ProducerID, header.ProducerEpoch, header.BaseSequence)
	case header.ProducerEpoch == entry.ProducerEpoch && !inSequence(entry.LastSequence(), header.BaseSequence):
		return reject(kerr.OutOfOrderSequenceNumber, "producer %d: sequence %d does not follow %d", header.ProducerID, header.BaseSequence, entry.LastSequence())
	}
	return Result{Verdict: Append}
}

// findDuplicate looks for a retained batch with the batch's epoch and
// exact sequence range (Kafka's findDuplicateBatch). It looks in the state
// as it was before the request, as Kafka does.
func findDuplicate(entry *Entry, header record.Header) (BatchMetadata, bool) {
	if entry == nil || entry.ProducerEpoch != header.ProducerEpoch {
		return BatchMetadata{}, false
	}
	last := LastSequence(header)
	for _, batch := range entry.Batches {
		if batch.FirstSequence == header.BaseSequence && batch.LastSequence == last {
			return batch, true
		}
	}
	return BatchMetadata{}, false
}

// inSequence reports whether next follows last, with Kafka's wrap.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == maxInt32)
}

// CheckBatches checks the batches of one produce request in order, each
// against the state as the batches before it would leave it once appended
// at the offsets they get from next (the log end offset), and returns the
// first result that is not Append: a request is appended whole or not at
// all, and a duplicate anywhere in it answers the request with that
// duplicate's offsets, as Kafka does. The state is not changed; the caller
// calls Update for each batch it then appends.
func (s *State) CheckBatches(headers []record.Header, next record.Offset) Result {
	var updated map[int64]*Entry
	for _, header := range headers {
		header.BaseOffset = next
		next = header.NextOffset()
		if !IsIdempotent(header) {
			continue
		}
		entry := s.producers[header.ProducerID]
		if scratch, ok := updated[header.ProducerID]; ok {
			entry = scratch
		}
		result := s.check(header, entry)
		if result.Verdict != Append {
			return result
		}
		if updated == nil {
			updated = map[int64]*Entry{}
		}
		scratch := &Entry{ProducerID: header.ProducerID, ProducerEpoch: header.ProducerEpoch}
		if entry != nil {
			copied := entry.clone()
			scratch = &copied
		}
		scratch.addBatch(header.ProducerEpoch, BatchMetadata{
			FirstSequence: header.BaseSequence, LastSequence: LastSequence(header),
			FirstOffset: header.BaseOffset, LastOffset: header.LastOffset(),
		})
		updated[header.ProducerID] = scratch
	}
	return Result{Verdict: Append}
}
