package replica

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// DeleteRecordsHighWatermark is DeleteRecords' offset meaning "the current
// high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark record.Offset = -1

// DeleteRecordsRequest asks a partition's leader to move its log start
// offset up to Offset (Kafka's DeleteRecords, API 21).
type DeleteRecordsRequest struct {
	ID     uint64
	Offset record.Offset
}

// DeleteRecordsAnswer answers it with the partition's new low watermark.
type DeleteRecordsAnswer struct {
	ID           uint64
	ErrorCode    int16
	LowWatermark record.Offset
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
// fetch responses. The answer's low watermark is the leader's new log
// start offset: tide answers at once, where Kafka waits until every
// replica's log start offset has reached it.
func (r *Replica) HandleDeleteRecords(request DeleteRecordsRequest) {
	answer := DeleteRecordsAnswer{ID: request.ID, LowWatermark: -1}
	offset := request.Offset
	if offset == DeleteRecordsHighWatermark {
		offset = r.highWatermark
	}
	switch {
	case r.role != Leader:
		answer.ErrorCode = kerr.NotLeaderForPartition.Code
	case offset < 0 || offset > r.highWatermark:
		answer.ErrorCode = kerr.OffsetOutOfRange.Code
	default:
		r.maybeAdvanceLogStart(offset)
		answer.LowWatermark = r.log.start
	}
	r.ready.Answers = append(r.ready.Answers, Answer{DeleteRecords: &answer})
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
