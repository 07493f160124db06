package replica

import (
	"fmt"
	"strings"

	"github.com/tidelog/tide/internal/record"
)

// LogOpKind is what a LogOp does to the log.
type LogOpKind int

const (
	// Truncate removes every batch from Offset on (commitlog TruncateTo).
	Truncate LogOpKind = iota
	// TruncateFully restarts the log empty at Offset, forgetting its epoch
	// cache (commitlog TruncateFullyAndStartAt): what a follower does when
	// the leader's log start offset is past its log end offset.
	TruncateFully
	// AssignEpoch records that Epoch begins at the log end offset
	// (commitlog AssignEpochStartOffset): a new leader does it before any
	// write, KAFKA-7415.
	AssignEpoch
	// Append appends Batches, whose offsets and leader epochs are already
	// in their headers (the leader stamped them, or they came from the
	// leader), so they are appended as they are (commitlog Append), and
	// the log checks once more that they continue it.
	Append
)

// LogOp is one operation on the replica's log.
type LogOp struct {
	Kind    LogOpKind
	Offset  record.Offset
	Epoch   record.LeaderEpoch
	Batches []byte
	// Headers are an Append's batches' headers as the replica validated
	// them in full at its gateway (record.ValidateAll of a producer's
	// request or a fetch response) and then stamped: the log takes them
	// with commitlog.AppendValidated, which checks they are the bytes' own
	// and does not read every byte a second time.
	Headers []record.Header
}

func (op LogOp) String() string {
	switch op.Kind {
	case Truncate:
		return fmt.Sprintf("truncate to %d", op.Offset)
	case TruncateFully:
		return fmt.Sprintf("truncate fully, start at %d", op.Offset)
	case AssignEpoch:
		return fmt.Sprintf("assign epoch %d", op.Epoch)
	}
	return fmt.Sprintf("append %d bytes", len(op.Batches))
}

// Ready is the work a replica hands out, in the order it must be carried
// out. Whoever drives the replica (the broker, the simulator, a test) must
// carry out one Ready completely, field by field in the order below, before
// it calls any other method of the replica: the replica's view of its log
// already includes every storage operation it has handed out.
type Ready struct {
	// Log operations are carried out FIRST, in order. A follower's
	// truncation happens before anything it appends after it and before
	// the fetch that describes the log after it is sent; a new leader's
	// epoch is assigned before its first append.
	Log []LogOp
	// Sync asks for the log to be synced AFTER the log operations, and the durable end
	// offset to be reported with Synced once it is. Nothing in this Ready
	// waits for the sync: the replica itself holds back what depends on
	// durability (acks=all answers, a follower's next fetch) until Synced
	// reports it ("committed means durable").
	Sync bool
	// RebuildProducerState says a truncation above removed batches the
	// idempotent producer state described. AFTER the log operations, the
	// caller reads the headers of the batches the log still holds and hands
	// them to RebuildProducerState BEFORE it gives this replica any other
	// input: until then the replica cannot tell a retry of a truncated batch
	// from a duplicate, and panics if asked to.
	RebuildProducerState bool
	// HighWatermark, when set, is the new high watermark to record in the
	// log (commitlog SetHighWatermark), AFTER the storage operations above.
	HighWatermark *record.Offset
	// LogStartOffset, when set, is the new log start offset (commitlog
	// AdvanceLogStartOffset), moved AFTER the high watermark above: it never
	// passes the high watermark (rule log-start-below-high-watermark), and
	// the log deletes the segments wholly below it.
	LogStartOffset *record.Offset
	// Messages go to other brokers AFTER the storage operations above: a
	// fetch request's offset describes the log after them.
	Messages []Message
	// Answers go to whoever sent the requests, AFTER the storage operations
	// above: a fetch answer's read range refers to the log after them.
	Answers []Answer
	// Proposals go to the controller (AlterPartition). The replica keeps at
	// most one in flight per partition.
	Proposals []ISRChange
	// Violations are invariant breaks seen while some rule is switched off
	// (rules.Rules), recorded so a scenario can show the failure. With
	// every rule on, a broken invariant panics instead.
	Violations []string
}

// Empty reports whether the Ready holds no work.
func (r Ready) Empty() bool {
	return len(r.Log) == 0 && !r.Sync && !r.RebuildProducerState &&
		r.HighWatermark == nil && r.LogStartOffset == nil && len(r.Messages) == 0 && len(r.Answers) == 0 && len(r.Proposals) == 0 && len(r.Violations) == 0
}

// String describes the Ready for traces and tests.
func (r Ready) String() string {
	var parts []string
	for _, op := range r.Log {
		parts = append(parts, op.String())
	}
	if r.Sync {
		parts = append(parts, "sync")
	}
	if r.RebuildProducerState {
		parts = append(parts, "rebuild producer state")
	}
	if r.HighWatermark != nil {
		parts = append(parts, fmt.Sprintf("high watermark %d", *r.HighWatermark))
	}
	if r.LogStartOffset != nil {
		parts = append(parts, fmt.Sprintf("log start %d", *r.LogStartOffset))
	}
	parts = append(parts, fmt.Sprintf("%d messages, %d answers, %d proposals", len(r.Messages), len(r.Answers), len(r.Proposals)))
	return strings.Join(parts, "; ")
}
