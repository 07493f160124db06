// Package producer is one partition's idempotent producer state (KIP-98):
// for every producer id that has batches in the log, its producer epoch and
// the metadata of its last BatchesToRetain batches. The leader checks each
// produced batch against it before appending (Check), so that a retried
// batch is answered with the offset it already has instead of being written
// twice, and a batch that would leave a gap in the producer's sequence is
// refused; leader and followers update it after every append (Update).
//
// It is pure: no I/O, no clock, no goroutines. The state is a function of
// the log alone. It is never written to disk: a replica rebuilds it by
// feeding the headers of every batch in its log, in offset order, to
// Rebuild, when it is created from an existing log (a broker restart) and
// after a truncation that removed batches of a producer it knows
// (TruncateTo reports false). A truncation can remove batches that an entry no
// longer retains the predecessors of, so the state cannot be cut back in
// place; rebuilding from the remaining log is what Kafka's truncateAndReload
// does from its last snapshot, without the snapshot (see
// docs/replication.md for the cost).
//
// What it prevents: without it, a producer retrying a request whose answer
// was lost (a timeout, a leader change, a dropped connection) writes the
// same records twice (KIP-98's duplicate), and a batch sent after one that
// failed is appended past the hole (out of order).
package producer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidelog/tide/internal/record"
)

// BatchesToRetain is how many of a producer's latest batches the state
// keeps, Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has
// at most five requests in flight per partition
// (max.in.flight.requests.per.connection <= 5 with idempotence), so a retry
// is always of one of its last five batches.
const BatchesToRetain = 5

// Values the batch header carries for a producer that is not idempotent, as
// Kafka's RecordBatch.NO_PRODUCER_ID, NO_PRODUCER_EPOCH and NO_SEQUENCE.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// BatchMetadata is what the state keeps of one appended batch (Kafka's
// BatchMetadata): its sequence range and offset range, both inclusive.
type BatchMetadata struct {
	FirstSequence int32
	LastSequence  int32
	FirstOffset   record.Offset
	LastOffset    record.Offset
}

func (b BatchMetadata) String() string {
	return fmt.Sprintf("seq=%d..%d offsets=%d..%d", b.FirstSequence, b.LastSequence, b.FirstOffset, b.LastOffset)
}

// Entry is one producer's state (Kafka's ProducerStateEntry).
//
// Invariants: Batches is non-empty, holds at most BatchesToRetain batches,
// all of ProducerEpoch, oldest first, in increasing offset order.
type Entry struct {
	ProducerID    int64
	ProducerEpoch int16
	Batches       []BatchMetadata
}

// LastBatch is the producer's latest batch.
func (e Entry) LastBatch() BatchMetadata { return e.Batches[len(e.Batches)-1] }

// LastSequence is the sequence number of the producer's latest record.
func (e Entry) LastSequence() int32 { return e.LastBatch().LastSequence }

func (e Entry) String() string {
	return fmt.Sprintf("producer %d epoch %d: %v", e.ProducerID, e.ProducerEpoch, e.Batches)
}

// clone returns a deep copy, so an entry handed out or checked against is
// never shared with the state.
func (e Entry) clone() Entry {
	e.Batches = slices.Clone(e.Batches)
	return e
}

// addBatch records an appended batch. A new epoch starts the entry afresh:
// batches of an older epoch can no longer be retried (Kafka's addBatch).
func (e *Entry) addBatch(epoch int16, batch BatchMetadata) {
	if epoch != e.ProducerEpoch {
		e.ProducerEpoch = epoch
		e.Batches = e.Batches[:0]
	}
	e.Batches = append(e.Batches, batch)
	if len(e.Batches) > BatchesToRetain {
		e.Batches = slices.Delete(e.Batches, 0, len(e.Batches)-BatchesToRetain)
	}
}

// State is one partition's producer state (Kafka's ProducerStateManager,
// without snapshots, transactions or producer expiration). The zero value
// is not usable; call New. It is not safe for concurrent use.
type State struct {
	producers map[int64]*Entry
	// endOffset is the offset after the last batch fed to Update, or -1
	// before any: batches must come in offset order, as the log has them.
	endOffset record.Offset
}

// New returns the state of a log with no idempotent batches.
func New() *State {
	return &State{producers: map[int64]*Entry{}, endOffset: -1}
}

// IsIdempotent reports whether a batch comes from an idempotent producer
// and so is checked and tracked; other batches pass untouched.
func IsIdempotent(header record.Header) bool { return header.ProducerID > NoProducerID }

// LastSequence returns the sequence number of the batch's last record, with
// Kafka's wrap from MaxInt32 to 0 (DefaultRecordBatch.incrementSequence).
func LastSequence(header record.Header) int32 {
	if header.BaseSequence == NoSequence {
		return NoSequence
	}
	return incrementSequence(header.BaseSequence, header.LastOffsetDelta)
}

func incrementSequence(sequence, increment int32) int32 {
	if sequence > maxInt32-increment {
		return increment - (maxInt32 - sequence) - 1
	}
	return sequence + increment
}

const maxInt32 = int32(^uint32(0) >> 1)

// Update records a batch appended to the log, by the leader after Check
// said Append, or by a follower that appended it from the leader. The
// header must carry the offsets the batch was appended at. A follower does
// not check sequences (Kafka's AppendOrigin.REPLICATION): the leader did,
// and the log is the truth every replica must agree with.
//
// Batches must come in offset order; a batch at or below one already fed
// means the caller forgot to rebuild after a truncation, which would keep
// the state of records no longer in the log, and panics.
func (s *State) Update(header record.Header) {
	if header.BaseOffset < s.endOffset {
		panic(fmt.Sprintf("producer: batch at %d fed after one ending at %d: rebuild the state after a truncation", header.BaseOffset, s.endOffset))
	}
	s.endOffset = header.NextOffset()
	if !IsIdempotent(header) {
		return
	}
	entry, ok := s.producers[header.ProducerID]
	if !ok {
		entry = &Entry{ProducerID: header.ProducerID, ProducerEpoch: header.ProducerEpoch}
		s.producers[header.ProducerID] = entry
	}
	entry.addBatch(header.ProducerEpoch, BatchMetadata{
		FirstSequence: header.BaseSequence, LastSequence: LastSequence(header),
		FirstOffset: header.BaseOffset, LastOffset: header.LastOffset(),
	})
}

// Rebuild returns the state of a log whose batch headers, in offset order,
// are headers: what a replica calls when it is created from a log that is
// already on disk and after a truncation. Headers come from the disk, so
// their order is checked here and a disorder is an error, not a panic.
func Rebuild(headers []record.Header) (*State, error) {
	state := New()
	for i, header := range headers {
		if i > 0 && header.BaseOffset < headers[i-1].NextOffset() {
			return nil, fmt.Errorf("producer: rebuild: batch at %d follows one ending at %d", header.BaseOffset, headers[i-1].NextOffset())
		}
		state.Update(header)
	}
	return state, nil
}

// TruncateTo cuts the state back to a log truncated to offset (the log
// keeps [log start, offset)) and reports whether it could do so exactly.
// It can when every producer's latest batch lies below offset: then all
// their batches do, and nothing changes. Otherwise the truncation removes
// batches of a producer whose earlier batches the entry may no longer
// retain, and only the log can say what its state was: the caller must
// replace this state with Rebuild of the remaining log before it checks or
// updates anything, or a retry of a batch the truncation removed would be
// answered as a duplicate, acknowledging records that are gone.
func (s *State) TruncateTo(offset record.Offset) (exact bool) {
	for _, entry := range s.producers {
		if entry.LastBatch().LastOffset >= offset {
			return false
		}
	}
	s.endOffset = min(s.endOffset, offset)
	return true
}

// TruncateFully forgets every producer: the log was emptied and restarts
// at a new log start offset (a follower behind the leader's log start).
func (s *State) TruncateFully() {
	s.producers = map[int64]*Entry{}
	s.endOffset = -1
}

// Entry returns a copy of one producer's entry.
func (s *State) Entry(producerID int64) (Entry, bool) {
	entry, ok := s.producers[producerID]
	if !ok {
		return Entry{}, false
	}
	return entry.clone(), true
}

// Entries returns a copy of every entry, by producer id.
func (s *State) Entries() []Entry {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	entries := make([]Entry, len(ids))
	for i, id := range ids {
		entries[i] = s.producers[id].clone()
	}
	return entries
}

// Len is the number of producers the state knows.
func (s *State) Len() int { return len(s.producers) }

// Describe lists every producer's entry, one a line by producer id, for
// datadriven tests and debugging.
func (s *State) Describe() string {
	if len(s.producers) == 0 {
		return "no producers\n"
	}
	var out strings.Builder
	for _, entry := range s.Entries() {
		fmt.Fprintf(&out, "producer %d epoch %d:", entry.ProducerID, entry.ProducerEpoch)
		for _, batch := range entry.Batches {
			fmt.Fprintf(&out, " [%s]", batch)
		}
		out.WriteString("\n")
	}
	return out.String()
}
