package replica

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// DeleteRecordsHighWatermark is DeleteRecords' offset meaning "the current
// high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark record.Offset = -1

// DeleteRecordsRequest asks a partition's leader to move its log start
// offset up to Offset (Kafka's DeleteRecords, API 21), and to answer once
// every live replica has followed, or REQUEST_TIMED_OUT after
// TimeoutTicks.
type DeleteRecordsRequest struct {
	ID           uint64
	Offset       record.Offset
	TimeoutTicks int64
}

// DeleteRecordsAnswer answers it with the partition's new low watermark.
type DeleteRecordsAnswer struct {
	ID           uint64
	ErrorCode    int16
	LowWatermark record.Offset
}

// pendingDelete is a DeleteRecords request whose offset the leader's log
// start has reached and its followers' not yet.
type pendingDelete struct {
	id           uint64
	offset       record.Offset
	deadlineTick int64
}

// AdvanceLogStartOffset moves this replica's log start offset up to offset,
// leader or follower: what retention decided for its log
// (commitlog.RetentionOffset). It never moves it past the high watermark
// (rule log-start-below-high-watermark, maybeAdvanceLogStart).
func (r *Replica) AdvanceLogStartOffset(offset record.Offset) {
	r.maybeAdvanceLogStart(offset)
}

// HandleDeleteRecords moves the leader's log start offset to the offset
// asked for (the high watermark for DeleteRecordsHighWatermark), as Kafka's
// Partition.deleteRecordsOnLeader does: only a leader answers
// (NOT_LEADER_OR_FOLLOWER), and an offset below zero or above the high
// watermark is OFFSET_OUT_OF_RANGE, since only committed records may be
// deleted. Followers follow from the log start offset in the leader's
// fetch responses, and the answer waits for them as Kafka's
// DelayedDeleteRecords does: it comes once the low watermark (lowWatermark)
// reaches the offset, so that a client told the records are gone never
// reads them from a follower it fails over to. Past the request's timeout
// it is REQUEST_TIMED_OUT, the leader's log start moved all the same.
func (r *Replica) HandleDeleteRecords(request DeleteRecordsRequest) {
	offset := request.Offset
	if offset == DeleteRecordsHighWatermark {
		offset = r.highWatermark
	}
	switch {
	case r.role != Leader:
		r.answerDelete(request.ID, kerr.NotLeaderForPartition.Code, -1)
		return
	case offset < 0 || offset > r.highWatermark:
		r.answerDelete(request.ID, kerr.OffsetOutOfRange.Code, -1)
		return
	}
	r.maybeAdvanceLogStart(offset)
	r.leader.deletes = append(r.leader.deletes, pendingDelete{id: request.ID, offset: offset, deadlineTick: r.now + request.TimeoutTicks})
	r.answerDeletes()
}

// lowWatermark is the smallest log start offset among the leader and its
// followers on live brokers (registered and not fenced), Kafka's
// Partition.lowWatermarkIfLeader: below it some replica that may serve
// again still holds records. A follower that has not fetched in this
// epoch counts as -1, unknown.
func (r *Replica) lowWatermark() record.Offset {
	low := r.log.start
	for id, progress := range r.leader.followers {
		if broker, ok := r.brokers[id]; !ok || broker.Fenced {
			continue
		}
		low = min(low, progress.logStartOffset)
	}
	return low
}

// answerDeletes answers the waiting DeleteRecords requests the low
// watermark has reached, and those past their deadline.
func (r *Replica) answerDeletes() {
	if len(r.leader.deletes) == 0 {
		return
	}
	low := r.lowWatermark()
	kept := r.leader.deletes[:0]
	for _, waiting := range r.leader.deletes {
		switch {
		case low >= waiting.offset:
			r.answerDelete(waiting.id, 0, low)
		case r.now >= waiting.deadlineTick:
			r.answerDelete(waiting.id, kerr.RequestTimedOut.Code, -1)
		default:
			kept = append(kept, waiting)
		}
	}
	r.leader.deletes = kept
}

func (r *Replica) answerDelete(id uint64, code int16, low record.Offset) {
	r.ready.Answers = append(r.ready.Answers, Answer{DeleteRecords: &DeleteRecordsAnswer{ID: id, ErrorCode: code, LowWatermark: low}})
}

// maybeAdvanceLogStart moves the log start offset up to offset, capped at
// the high watermark, and hands the move out (Ready.LogStartOffset).
//
// Rule log-start-below-high-watermark: the log start never passes the high
// watermark, so that neither retention nor a follower following its leader
// ever deletes a record that is not committed, which a new leader elected
// from the ISR might still hold and serve (simulator invariant 8), and the
// log start never passes the log end of a replica that is behind.
func (r *Replica) maybeAdvanceLogStart(offset record.Offset) bool {
	offset = min(offset, r.highWatermark)
	if offset <= r.log.start {
		return false
	}
	r.log.start = offset
	r.log.epochs.TruncateFromStart(offset)
	value := offset
	r.ready.LogStartOffset = &value
	return true
}
