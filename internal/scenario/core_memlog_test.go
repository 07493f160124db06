package scenario

import (
	"bytes"
	"fmt"
	"github.com/tidelog/tide/internal/replica"

	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/record"
)

// memLog is an in-memory partition log that carries out a replica's log
// operations the way commitlog does, and loses what was not synced when its
// broker crashes.
type memLog struct {
	batches []memBatch
	start   record.Offset
	durable record.Offset
	hw      record.Offset
	epochs  leaderepoch.Cache
}

type memBatch struct {
	header record.Header
	bytes  []byte
}

func (l *memLog) end() record.Offset {
	if len(l.batches) == 0 {
		return l.start
	}
	return l.batches[len(l.batches)-1].header.NextOffset()
}

func (l *memLog) state() replica.LogState {
	return replica.LogState{LogStartOffset: l.start, LogEndOffset: l.end(), DurableEndOffset: l.durable, HighWatermark: l.hw, Epochs: l.epochs.Entries()}
}

// apply carries out one log operation, checking it as commitlog would.
func (l *memLog) apply(op replica.LogOp) error {
	switch op.Kind {
	case replica.Truncate:
		keep := len(l.batches)
		for keep > 0 && l.batches[keep-1].header.LastOffset() >= op.Offset {
			keep--
		}
		l.batches = l.batches[:keep]
		l.epochs.TruncateFromEnd(l.end())
		l.durable = min(l.durable, l.end())
		l.hw = min(l.hw, l.end())
	case replica.TruncateFully:
		l.batches, l.start, l.durable, l.hw = nil, op.Offset, op.Offset, op.Offset
		l.epochs = leaderepoch.Cache{}
	case replica.AssignEpoch:
		l.epochs.Assign(op.Epoch, l.end())
	case replica.Append:
		it := record.NewIterator(op.Batches, record.Limits{MaxBatchBytes: 1 << 30})
		for it.Next() {
			header := it.Header()
			if header.BaseOffset != l.end() {
				return fmt.Errorf("append at %d to a log ending at %d", header.BaseOffset, l.end())
			}
			if header.PartitionLeaderEpoch < l.epochs.LatestEpoch() {
				return fmt.Errorf("append in epoch %d to a log at epoch %d", header.PartitionLeaderEpoch, l.epochs.LatestEpoch())
			}
			if header.PartitionLeaderEpoch != l.epochs.LatestEpoch() {
				l.epochs.Assign(header.PartitionLeaderEpoch, header.BaseOffset)
			}
			l.batches = append(l.batches, memBatch{header: header, bytes: bytes.Clone(it.Batch())})
		}
		return it.Err()
	}
	return nil
}

// read returns whole batches from the one holding from, ending at or below
// upTo, at most maxBytes unless the first alone is larger.
func (l *memLog) read(from, upTo record.Offset, maxBytes int64) []byte {
	var out []byte
	for _, batch := range l.batches {
		if batch.header.LastOffset() < from {
			continue
		}
		if batch.header.NextOffset() > upTo || (len(out) > 0 && int64(len(out)+len(batch.bytes)) > maxBytes) {
			break
		}
		out = append(out, batch.bytes...)
	}
	return out
}

// crash loses everything that was not synced.
func (l *memLog) crash() {
	keep := len(l.batches)
	for keep > 0 && l.batches[keep-1].header.NextOffset() > l.durable {
		keep--
	}
	l.batches = l.batches[:keep]
	l.epochs.TruncateFromEnd(l.end() + 1)
	l.hw = min(l.hw, l.end())
}

// batchAt returns the batch holding offset.
func (l *memLog) batchAt(offset record.Offset) (memBatch, bool) {
	for _, batch := range l.batches {
		if batch.header.BaseOffset <= offset && offset <= batch.header.LastOffset() {
			return batch, true
		}
	}
	return memBatch{}, false
}
