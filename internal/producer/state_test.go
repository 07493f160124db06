package producer

import (
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// batch is the header of an idempotent batch of count records.
func batch(producerID int64, epoch int16, sequence int32, count int32) record.Header {
	return record.Header{
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: sequence,
		LastOffsetDelta: count - 1, RecordCount: count, Magic: record.Magic,
	}
}

// appendAt records header as appended at offset and returns the next one.
func appendAt(s *State, header record.Header, offset record.Offset) record.Offset {
	header.BaseOffset = offset
	s.Update(header)
	return header.NextOffset()
}

func wantVerdict(t *testing.T, got Result, verdict Verdict, code int16) {
	t.Helper()
	if got.Verdict != verdict || got.ErrorCode != code {
		t.Fatalf("got %s, want %s with code %d", got, verdict, code)
	}
}

func TestNonIdempotentBatchesPassUntouched(t *testing.T) {
	s := New()
	plain := batch(NoProducerID, NoProducerEpoch, NoSequence, 3)
	wantVerdict(t, s.Check(plain), Append, 0)
	appendAt(s, plain, 0)
	wantVerdict(t, s.Check(plain), Append, 0)
	if s.Len() != 0 {
		t.Fatalf("a plain batch created producer state: %v", s.Entries())
	}
}

func TestInSequenceBatchesAppend(t *testing.T) {
	s := New()
	next := record.Offset(0)
	for sequence := int32(0); sequence < 20; sequence += 2 {
		header := batch(7, 0, sequence, 2)
		wantVerdict(t, s.Check(header), Append, 0)
		next = appendAt(s, header, next)
	}
	entry, _ := s.Entry(7)
	if len(entry.Batches) != BatchesToRetain || entry.LastSequence() != 19 {
		t.Fatalf("entry %s: want the last %d batches, ending at sequence 19", entry, BatchesToRetain)
	}
}

func TestDuplicateOfEachRetainedBatchGetsItsOffsets(t *testing.T) {
	s := New()
	next := record.Offset(100)
	for sequence := int32(0); sequence < 7; sequence++ {
		next = appendAt(s, batch(1, 3, sequence, 1), next)
	}
	// Sequences 2..6 are retained, at offsets 102..106.
	for sequence := int32(2); sequence < 7; sequence++ {
		got := s.Check(batch(1, 3, sequence, 1))
		wantVerdict(t, got, Duplicate, 0)
		if got.Original.FirstOffset != 100+record.Offset(sequence) {
			t.Fatalf("duplicate of sequence %d answered offset %d", sequence, got.Original.FirstOffset)
		}
	}
	// Sequence 1 fell out of the window: it is no longer known as a
	// duplicate, and is out of order.
	wantVerdict(t, s.Check(batch(1, 3, 1, 1)), Reject, kerr.OutOfOrderSequenceNumber.Code)
}

func TestDuplicateNeedsTheExactSequenceRange(t *testing.T) {
	s := New()
	appendAt(s, batch(1, 0, 0, 3), 0)
	// Sequences 0..1 overlap the batch 0..2 but are not it.
	wantVerdict(t, s.Check(batch(1, 0, 0, 2)), Reject, kerr.OutOfOrderSequenceNumber.Code)
	// The same range in another epoch is not a duplicate either.
	wantVerdict(t, s.Check(batch(1, 1, 0, 3)), Append, 0)
}

func TestSequenceGapIsOutOfOrder(t *testing.T) {
	s := New()
	appendAt(s, batch(1, 0, 0, 1), 0)
	wantVerdict(t, s.Check(batch(1, 0, 2, 1)), Reject, kerr.OutOfOrderSequenceNumber.Code)
	wantVerdict(t, s.Check(batch(1, 0, 1, 1)), Append, 0)
}

func TestSequenceWrapsAtMaxInt32(t *testing.T) {
	s := New()
	next := appendAt(s, batch(1, 0, math.MaxInt32-1, 2), 0)
	wantVerdict(t, s.Check(batch(1, 0, 1, 1)), Reject, kerr.OutOfOrderSequenceNumber.Code)
	wantVerdict(t, s.Check(batch(1, 0, 0, 1)), Append, 0)
	// A batch that itself wraps ends at the right sequence.
	s = New()
	appendAt(s, batch(1, 0, math.MaxInt32-1, 4), next)
	if entry, _ := s.Entry(1); entry.LastSequence() != 1 {
		t.Fatalf("batch of 4 from MaxInt32-1 ends at %d, want 1", entry.LastSequence())
	}
	wantVerdict(t, s.Check(batch(1, 0, 2, 1)), Append, 0)
}

func TestOlderEpochIsInvalid(t *testing.T) {
	s := New()
	appendAt(s, batch(1, 5, 0, 1), 0)
	wantVerdict(t, s.Check(batch(1, 4, 1, 1)), Reject, kerr.InvalidProducerEpoch.Code)
	wantVerdict(t, s.Check(batch(1, 4, 0, 1)), Reject, kerr.InvalidProducerEpoch.Code)
}

func TestNewEpochMustStartAtZero(t *testing.T) {
	s := New()
	appendAt(s, batch(1, 0, 0, 5), 0)
	wantVerdict(t, s.Check(batch(1, 1, 5, 1)), Reject, kerr.OutOfOrderSequenceNumber.Code)
	wantVerdict(t, s.Check(batch(1, 1, 0, 1)), Append, 0)
	appendAt(s, batch(1, 1, 0, 1), 5)
	entry, _ := s.Entry(1)
	if entry.ProducerEpoch != 1 || len(entry.Batches) != 1 {
		t.Fatalf("a new epoch kept the old epoch's batches: %s", entry)
	}
	// The old epoch's batches can no longer be retried.
	wantVerdict(t, s.Check(batch(1, 0, 0, 5)), Reject, kerr.InvalidProducerEpoch.Code)
}

func TestUnknownProducerMayStartAnywhere(t *testing.T) {
	s := New()
	wantVerdict(t, s.Check(batch(9, 2, 42, 1)), Append, 0)
	appendAt(s, batch(9, 2, 42, 1), 0)
	wantVerdict(t, s.Check(batch(9, 2, 43, 1)), Append, 0)
}

func TestInvalidBatchesAreRefused(t *testing.T) {
	s := New()
	wantVerdict(t, s.Check(batch(1, 0, NoSequence, 1)), Reject, kerr.InvalidRecord.Code)
	transactional := batch(1, 0, 0, 1)
	transactional.Attributes = 0x10
	wantVerdict(t, s.Check(transactional), Reject, kerr.InvalidRecord.Code)
}

func TestCheckBatchesSeesEarlierBatchesOfTheRequest(t *testing.T) {
	s := New()
	request := []record.Header{batch(1, 0, 0, 2), batch(2, 0, 0, 1), batch(1, 0, 2, 1)}
	wantVerdict(t, s.CheckBatches(request, 0), Append, 0)
	gap := []record.Header{batch(1, 0, 0, 2), batch(1, 0, 3, 1)}
	wantVerdict(t, s.CheckBatches(gap, 0), Reject, kerr.OutOfOrderSequenceNumber.Code)
	if s.Len() != 0 {
		t.Fatal("CheckBatches changed the state")
	}
	next := appendAt(s, batch(1, 0, 0, 2), 10)
	retry := []record.Header{batch(1, 0, 2, 1), batch(1, 0, 0, 2)}
	got := s.CheckBatches(retry, next)
	wantVerdict(t, got, Duplicate, 0)
	if got.Original.FirstOffset != 10 {
		t.Fatalf("duplicate answered %s", got.Original)
	}
}

func TestTruncateToIsExactOnlyBelowEveryProducer(t *testing.T) {
	s := New()
	next := appendAt(s, batch(1, 0, 0, 2), 0)         // offsets 0..1
	appendAt(s, batch(NoProducerID, -1, -1, 3), next) // 2..4
	if !s.TruncateTo(3) {
		t.Fatal("truncating plain records above every producer batch needs no rebuild")
	}
	appendAt(s, batch(2, 0, 0, 1), 3) // the log continues at 3
	if s.TruncateTo(3) {
		t.Fatal("truncating away producer 2's batch must ask for a rebuild")
	}
}

func TestRebuildMatchesIncrementalUpdates(t *testing.T) {
	var headers []record.Header
	s := New()
	next := record.Offset(0)
	for i := int32(0); i < 12; i++ {
		header := batch(int64(i%3), int16(i/6), i/3, 1)
		header.BaseOffset = next
		headers = append(headers, header)
		next = appendAt(s, header, next)
	}
	rebuilt, err := Rebuild(headers)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rebuilt.Entries(), s.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt %v, want %v", got, want)
	}
	headers[3], headers[4] = headers[4], headers[3]
	if _, err := Rebuild(headers); err == nil {
		t.Fatal("Rebuild accepted headers out of offset order")
	}
}

func TestUpdateOutOfOrderPanics(t *testing.T) {
	s := New()
	appendAt(s, batch(1, 0, 0, 2), 10)
	defer func() {
		if recover() == nil {
			t.Fatal("feeding a batch below the last one did not panic")
		}
	}()
	appendAt(s, batch(1, 0, 2, 1), 11)
}
