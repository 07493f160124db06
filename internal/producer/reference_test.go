package producer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// reference is the naive model the state is checked against: it keeps the
// header of every batch in the log and answers each check by looking at a
// producer's whole history.
type reference struct {
	log []record.Header
}

func (r *reference) end() record.Offset {
	if len(r.log) == 0 {
		return 0
	}
	return r.log[len(r.log)-1].NextOffset()
}

// retained is the producer's epoch and the batches the state should keep:
// the last five of the run of batches since its epoch last changed.
func (r *reference) retained(producerID int64) (int16, []record.Header, bool) {
	var history []record.Header
	for _, header := range r.log {
		if header.ProducerID == producerID {
			history = append(history, header)
		}
	}
	if len(history) == 0 {
		return 0, nil, false
	}
	epoch := history[len(history)-1].ProducerEpoch
	start := len(history)
	for start > 0 && history[start-1].ProducerEpoch == epoch {
		start--
	}
	run := history[start:]
	return epoch, run[max(0, len(run)-BatchesToRetain):], true
}

// checkWithin checks header against this log, looking for duplicates in
// the log before (a prefix of it, or itself).
func (r *reference) checkWithin(header record.Header, before *reference) Result {
	switch {
	case header.ProducerID < 0:
		return Result{Verdict: Append}
	case header.IsTransactional() || header.IsControl() || header.BaseSequence < 0:
		return Result{Verdict: Reject, ErrorCode: kerr.InvalidRecord.Code}
	}
	if result, ok := before.duplicate(header); ok {
		return result
	}
	epoch, batches, known := r.retained(header.ProducerID)
	if !known {
		return Result{Verdict: Append}
	}
	lastSequence := int64(LastSequence(batches[len(batches)-1]))
	follows := int64(header.BaseSequence) == (lastSequence+1)%(math.MaxInt32+1)
	switch {
	case header.ProducerEpoch < epoch:
		return Result{Verdict: Reject, ErrorCode: kerr.InvalidProducerEpoch.Code}
	case epoch == NoProducerEpoch:
		return Result{Verdict: Append}
	case header.ProducerEpoch > epoch && header.BaseSequence != 0:
		return Result{Verdict: Reject, ErrorCode: kerr.OutOfOrderSequenceNumber.Code}
	case header.ProducerEpoch == epoch && !follows:
		return Result{Verdict: Reject, ErrorCode: kerr.OutOfOrderSequenceNumber.Code}
	}
	return Result{Verdict: Append}
}

// duplicate finds a retained batch with the header's epoch and range.
func (r *reference) duplicate(header record.Header) (Result, bool) {
	epoch, batches, known := r.retained(header.ProducerID)
	if !known {
		return Result{}, false
	}
	last := int64(header.BaseSequence) + int64(header.LastOffsetDelta)
	if last > math.MaxInt32 {
		last -= math.MaxInt32 + 1
	}
	for _, b := range batches {
		if header.ProducerEpoch == epoch && b.BaseSequence == header.BaseSequence && int64(LastSequence(b)) == last {
			return Result{Verdict: Duplicate, Original: BatchMetadata{FirstSequence: b.BaseSequence, LastSequence: LastSequence(b), FirstOffset: b.BaseOffset, LastOffset: b.LastOffset()}}, true
		}
	}
	return Result{}, false
}

// checkBatches checks a request's batches one by one against a copy of the
// log that holds the earlier ones; a duplicate is looked for only in the
// log as it was before the request, as Kafka does.
func (r *reference) checkBatches(headers []record.Header) Result {
	scratch := &reference{log: append([]record.Header(nil), r.log...)}
	for _, header := range headers {
		header.BaseOffset = scratch.end()
		result := scratch.checkWithin(header, r)
		if result.Verdict != Append {
			return result
		}
		scratch.log = append(scratch.log, header)
	}
	return Result{Verdict: Append}
}

// client is one simulated producer instance: its id, epoch, next sequence
// and every batch it sent, for retries.
type client struct {
	id       int64
	epoch    int16
	sequence int32
	sent     []record.Header
}

// nextBatch draws what the client sends next: mostly its next batch in
// order, sometimes a retry, a gap, an epoch bump, a zombie's old epoch.
func (c *client) nextBatch(random *rand.Rand) record.Header {
	count := int32(1 + random.IntN(3))
	switch roll := random.IntN(100); {
	case roll < 25 && len(c.sent) > 0:
		return c.sent[len(c.sent)-1-random.IntN(min(len(c.sent), 8))]
	case roll < 32:
		c.epoch++
		c.sequence = 0
		if random.IntN(4) == 0 {
			c.sequence = int32(random.IntN(5))
		}
	case roll < 36:
		header := batch(c.id, c.epoch-int16(1+random.IntN(2)), int32(random.IntN(10)), count)
		return header
	case roll < 40:
		c.sequence = incrementSequence(c.sequence, int32(1+random.IntN(3)))
	case roll < 42:
		c.sequence = math.MaxInt32 - int32(random.IntN(4))
	}
	header := batch(c.id, c.epoch, c.sequence, count)
	c.sequence = incrementSequence(c.sequence, count)
	c.sent = append(c.sent, header)
	return header
}

// runAgainstReference drives the state and the reference through steps
// random requests and truncations and fails at the first disagreement.
// It returns how often each outcome came up, by its String.
func runAgainstReference(t *testing.T, seed uint64, steps int) map[string]int {
	seen := map[string]int{}
	random := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	clients := []*client{{id: 0}, {id: 1, epoch: 3}, {id: 2, sequence: math.MaxInt32 - 6}}
	state, model := New(), &reference{}
	for step := 0; step < steps; step++ {
		if random.IntN(30) == 0 && len(model.log) > 0 {
			state = truncateBoth(t, state, model, random.IntN(len(model.log)))
			continue
		}
		var request []record.Header
		for n := 1 + random.IntN(3)/2; n > 0; n-- {
			if random.IntN(10) == 0 {
				request = append(request, batch(NoProducerID, NoProducerEpoch, NoSequence, 2))
				continue
			}
			request = append(request, clients[random.IntN(len(clients))].nextBatch(random))
		}
		got, want := state.CheckBatches(request, model.end()), model.checkBatches(request)
		got.Reason = ""
		seen[outcome(got)]++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d step %d: request %s: state says %s, reference %s\nstate %v", seed, step, describe(request), got, want, state.Entries())
		}
		if got.Verdict != Append {
			continue
		}
		for _, header := range request {
			header.BaseOffset = model.end()
			model.log = append(model.log, header)
			state.Update(header)
		}
	}
	rebuilt, err := Rebuild(model.log)
	if err != nil || !reflect.DeepEqual(rebuilt.Entries(), state.Entries()) {
		t.Fatalf("seed %d: rebuilt state %v (%v) differs from the updated one %v", seed, rebuilt.Entries(), err, state.Entries())
	}
	return seen
}

func outcome(result Result) string {
	if result.Verdict == Reject {
		return kerr.ErrorForCode(result.ErrorCode).Error()
	}
	return result.Verdict.String()
}

// truncateBoth truncates the model's log to keep batches, and the state as
// a replica would: in place when TruncateTo can, else by rebuilding.
func truncateBoth(t *testing.T, state *State, model *reference, keep int) *State {
	offset := model.log[keep].BaseOffset
	model.log = model.log[:keep]
	if state.TruncateTo(offset) {
		rebuilt, _ := Rebuild(model.log)
		if !reflect.DeepEqual(rebuilt.Entries(), state.Entries()) {
			t.Fatalf("TruncateTo(%d) said exact, but the state %v differs from the log's %v", offset, state.Entries(), rebuilt.Entries())
		}
		return state
	}
	rebuilt, err := Rebuild(model.log)
	if err != nil {
		t.Fatal(err)
	}
	return rebuilt
}

func describe(headers []record.Header) string {
	text := ""
	for _, h := range headers {
		text += fmt.Sprintf("[pid=%d epoch=%d seq=%d+%d] ", h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastOffsetDelta)
	}
	return text
}

func TestStateMatchesReference(t *testing.T) {
	total := map[string]int{}
	for seed := uint64(0); seed < 300; seed++ {
		for name, count := range runAgainstReference(t, seed, 400) {
			total[name] += count
		}
	}
	// The random requests must reach every rule, or agreeing proves little.
	for _, result := range []Result{{Verdict: Append}, {Verdict: Duplicate}, {Verdict: Reject, ErrorCode: kerr.OutOfOrderSequenceNumber.Code}, {Verdict: Reject, ErrorCode: kerr.InvalidProducerEpoch.Code}} {
		if total[outcome(result)] < 100 {
			t.Errorf("only %d random requests came out %s: %v", total[outcome(result)], outcome(result), total)
		}
	}
	t.Logf("outcomes: %v", total)
}

func FuzzStateMatchesReference(f *testing.F) {
	for _, seed := range []uint64{1, 7, 42} {
		f.Add(seed, uint16(200))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		runAgainstReference(t, seed, int(steps%2000))
	})
}
