package broker

import (
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/producer"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// destination is who gets the answers a request produced: a client, or the
// broker that sent a peer message. Answers that no request produced (acks
// completed by a fetch, timeouts) carry their own routing: produce answers
// go to the client that produced, which the node remembers.
type destination struct {
	client   ClientID
	isClient bool
	broker   metadata.BrokerID
}

func (n *Node) process(tp metadata.TopicPartition, p *partition) {
	n.processFor(tp, p, destination{broker: metadata.NoBroker})
}

// processFor carries out the replica's Ready, in the order it prescribes,
// until it has none: log operations, high watermark, then messages,
// answers and proposals, and marks the log dirty if it asks for a sync
// (TakeSyncs hands out its job); after a truncation that asks for it, the producer
// state is rebuilt from the log before anything else. A log that fails
// takes the partition offline: a failed write or sync is never retried
// (docs/storage.md).
func (n *Node) processFor(tp metadata.TopicPartition, p *partition, to destination) {
	for p.replica.HasReady() {
		ready := p.replica.Ready()
		if n.observer != nil {
			n.observer(tp, ready)
		}
		if err := n.applyLog(p, ready); err != nil {
			n.fail(tp, err)
			return
		}
		if end, expected := p.log.LogEndOffset(), p.replica.LogEndOffset(); end != expected {
			panic(fmt.Sprintf("broker %d %s: log ends at %d, the replica believes %d", n.config.ID, tp, end, expected))
		}
		if ready.RebuildProducerState {
			if err := n.rebuildProducerState(p); err != nil {
				n.fail(tp, err)
				return
			}
		}
		for _, message := range ready.Messages {
			// The image names the topic this replica belongs to: a topic
			// deleted here takes its replicas with it.
			id, _ := n.image.TopicID(tp.Topic)
			n.outbox.Peers = append(n.outbox.Peers, Outbound{To: message.To, Message: PeerMessage{
				Partition: tp, TopicID: id, Fetch: message.Fetch, OffsetsForLeaderEpoch: message.OffsetsForLeaderEpoch,
			}})
		}
		for _, answer := range ready.Answers {
			if err := n.route(tp, p, answer, to); err != nil {
				n.fail(tp, err)
				return
			}
		}
		n.outbox.Proposals = append(n.outbox.Proposals, ready.Proposals...)
		if ready.Sync || p.log.PendingBytes() > 0 {
			// A job of the pass's TakeSyncs syncs it; and writes the
			// appended bytes, which only a job writes (also with
			// flush=never, whose replicas ask for no sync).
			n.unsynced[tp] = true
		}
	}
}

// applyLog carries out the log operations and the high watermark.
func (n *Node) applyLog(p *partition, ready replica.Ready) error {
	for _, op := range ready.Log {
		var err error
		switch op.Kind {
		case replica.Truncate:
			err = truncate(p, op.Offset)
		case replica.TruncateFully:
			err = p.log.TruncateFullyAndStartAt(op.Offset)
		case replica.AssignEpoch:
			err = p.log.AssignEpochStartOffset(op.Epoch)
		case replica.Append:
			_, err = p.log.AppendValidated(op.Batches, op.Headers)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if ready.HighWatermark != nil {
		if err := p.log.SetHighWatermark(*ready.HighWatermark); err != nil {
			return fmt.Errorf("high watermark: %w", err)
		}
	}
	if ready.LogStartOffset != nil {
		if err := p.log.AdvanceLogStartOffset(*ready.LogStartOffset); err != nil {
			return fmt.Errorf("log start: %w", err)
		}
	}
	return nil
}

// ErrTruncationInsideBatch is a truncation whose offset falls inside a
// batch: the log can only cut between batches (a batch is one CRC), so it
// ended below where the replica believes it ends. A leader answers a
// diverging epoch with an offset that ends one of its own batches, which a
// follower sharing its history also has; an offset inside one of the
// follower's batches means the two logs share no history at all (a
// follower of another incarnation of the topic, before topic ids). The
// partition goes offline on this broker, and the broker serves on.
var ErrTruncationInsideBatch = errors.New("broker: truncation inside a batch")

// truncate carries out a replica's truncation.
func truncate(p *partition, offset record.Offset) error {
	end, err := p.log.TruncateTo(offset)
	if err != nil {
		return err
	}
	if end < offset {
		return fmt.Errorf("%w: truncated to %d, the log ends at %d", ErrTruncationInsideBatch, offset, end)
	}
	return nil
}

// rebuildProducerState hands the replica the producer batches its log holds
// after a truncation, before anything else reaches the replica.
func (n *Node) rebuildProducerState(p *partition) error {
	headers, err := p.log.ReadHeaders(producer.IsIdempotent)
	if err != nil {
		return fmt.Errorf("read producer batches: %w", err)
	}
	return p.replica.RebuildProducerState(headers)
}

// route sends an answer where it belongs, reading a fetch answer's records
// from the log.
func (n *Node) route(tp metadata.TopicPartition, p *partition, answer replica.Answer, to destination) error {
	var chunks []commitlog.Chunk
	// A read of no bytes (a fetch whose budget the partitions before it
	// used up) reads nothing, not even a first batch.
	if answer.Fetch != nil && answer.Fetch.ErrorCode == 0 && answer.Fetch.DivergingEpoch == nil && answer.Fetch.ReadUpTo > answer.Fetch.ReadFrom &&
		answer.Fetch.MaxBytes > 0 {
		result, err := p.log.Read(answer.Fetch.ReadFrom, answer.Fetch.MaxBytes, answer.Fetch.ReadUpTo)
		if err != nil {
			return fmt.Errorf("read for fetch: %w", err)
		}
		// Only a result wholly in files goes out without a copy: bytes not
		// yet written are in memory (commitlog.Chunk). Below the high
		// watermark none are, but sendfile must never see a memory chunk.
		if n.config.ZeroCopyReads && to.isClient && result.NextOffset <= p.replica.HighWatermark() && len(result.Chunks) > 0 && result.InFiles() {
			chunks = result.Chunks
		} else if answer.Fetch.Records, err = result.AppendTo(nil); err != nil {
			return fmt.Errorf("read for fetch: %w", err)
		}
	}
	if answer.ListOffsets != nil && answer.ListOffsets.Lookup {
		if err := lookUpTimestamp(p.log, answer.ListOffsets); err != nil {
			return fmt.Errorf("list offsets by timestamp: %w", err)
		}
	}
	switch {
	case answer.Produce != nil:
		key := producerKey{tp, answer.Produce.ID}
		producer, ok := n.producers[key]
		if !ok {
			return fmt.Errorf("a produce answer for unknown request %d", answer.Produce.ID)
		}
		delete(n.producers, key)
		produced := *answer.Produce
		produced.ID = producer.id
		n.outbox.Clients = append(n.outbox.Clients, ClientAnswer{Client: producer.client, Partition: tp, Produce: &produced})
	case to.isClient:
		n.outbox.Clients = append(n.outbox.Clients, ClientAnswer{Client: to.client, Partition: tp, Fetch: answer.Fetch, FetchChunks: chunks,
			ListOffsets: answer.ListOffsets, OffsetsForLeaderEpoch: answer.OffsetsForLeaderEpoch, DeleteRecords: answer.DeleteRecords})
	case to.broker != metadata.NoBroker:
		n.outbox.Peers = append(n.outbox.Peers, Outbound{To: to.broker, Message: PeerMessage{
			Partition: tp, FetchResponse: answer.Fetch, OffsetsForLeaderEpochAnswer: answer.OffsetsForLeaderEpoch,
		}})
	}
	return nil
}

// lookUpTimestamp carries out a ListOffsets lookup the replica handed out:
// the record with the largest timestamp, or the first at or after the
// timestamp, below the answer's bound; offset and timestamp -1 when there
// is none (Kafka's UNKNOWN_OFFSET, which the Java consumer's
// offsetsForTimes turns into null).
func lookUpTimestamp(log *commitlog.Log, answer *replica.ListOffsetsAnswer) error {
	var found commitlog.TimestampOffset
	var ok bool
	var err error
	if answer.LookupTimestamp == replica.MaxTimestamp {
		found, ok, err = log.MaxTimestampOffset(answer.LookupUpTo)
	} else {
		found, ok, err = log.OffsetForTimestamp(answer.LookupTimestamp, answer.LookupUpTo)
	}
	if err != nil {
		return err
	}
	answer.Offset, answer.TimestampMs = -1, -1
	if ok {
		answer.Offset, answer.TimestampMs, answer.LeaderEpoch = found.Offset, found.TimestampMs, found.LeaderEpoch
	}
	return nil
}

// fail takes a partition offline after its log failed.
func (n *Node) fail(tp metadata.TopicPartition, err error) {
	n.failed[tp] = err
	if p, ok := n.partitions[tp]; ok {
		p.log.Close()
		delete(n.partitions, tp)
		n.sorted = nil
	}
}
