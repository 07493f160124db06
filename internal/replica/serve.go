package replica

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// HandleFetch serves a fetch from a follower, a consumer or a debugging
// tool.
func (r *Replica) HandleFetch(request FetchRequest) {
	response := r.serveFetch(request)
	response.ID = request.ID
	response.LeaderEpoch = r.state.LeaderEpoch
	response.LogStartOffset = r.log.start
	response.LogEndOffset = r.log.end
	r.ready.Answers = append(r.ready.Answers, Answer{Fetch: &response})
}

func (r *Replica) serveFetch(request FetchRequest) FetchResponse {
	if code := r.checkLeaderEpoch(request.CurrentLeaderEpoch); code != 0 {
		return FetchResponse{ErrorCode: code, HighWatermark: -1}
	}
	if request.ReplicaID == DebugReplicaID {
		return r.serveDebugFetch(request)
	}
	if r.role != Leader {
		return FetchResponse{ErrorCode: kerr.NotLeaderForPartition.Code, HighWatermark: -1}
	}
	if request.ReplicaID == ConsumerReplicaID {
		return r.serveConsumerFetch(request)
	}
	return r.serveFollowerFetch(request)
}

// serveConsumerFetch reads committed records: up to the high watermark,
// which a new leader does not show until it is safe to (rule kafka-2334).
func (r *Replica) serveConsumerFetch(request FetchRequest) FetchResponse {
	highWatermark, servable := r.servableHighWatermark()
	if !servable {
		return FetchResponse{ErrorCode: kerr.OffsetNotAvailable.Code, HighWatermark: -1}
	}
	r.highestServedHighWatermark = max(r.highestServedHighWatermark, highWatermark)
	if request.FetchOffset < r.log.start || request.FetchOffset > r.log.end {
		return FetchResponse{ErrorCode: kerr.OffsetOutOfRange.Code, HighWatermark: highWatermark}
	}
	return FetchResponse{
		HighWatermark: highWatermark, ReadFrom: request.FetchOffset,
		ReadUpTo: max(highWatermark, request.FetchOffset), MaxBytes: request.MaxBytes,
	}
}

// serveDebugFetch answers a debugging tool (DebugReplicaID) from a leader
// or a follower with this replica's own high watermark, so that an operator
// can see how far each replica has the log. Kafka's ReplicaManager served
// DEBUGGING_CONSUMER_ID from any replica until follower fetching (KIP-392)
// made consumer ids leader-only unless they name a rack; tide keeps the
// older rule, which is what the id was for.
//
// Records are read only up to this replica's high watermark, the isolation
// Kafka has always given a debugging fetch (it reads committed data only,
// like a consumer), never up to the log end: a follower's tail above its high
// watermark may diverge from the leader's and be truncated, and a
// debugging reader must not be handed records that may never have been
// committed. Everything below a replica's high watermark is committed: the
// leader's is the smallest log end over the ISR, a follower's is one its
// leader sent, capped at its own log end.
//
// The high watermark is the raw one, not withheld as a new leader's is
// from consumers (rule kafka-2334): a debugging reader is looking at the
// replica's state, and nothing served here counts as served to clients.
// No state changes: the answer is a read of this replica.
func (r *Replica) serveDebugFetch(request FetchRequest) FetchResponse {
	if r.role == Offline {
		return FetchResponse{ErrorCode: kerr.NotLeaderForPartition.Code, HighWatermark: -1}
	}
	if request.FetchOffset < r.log.start || request.FetchOffset > r.log.end {
		return FetchResponse{ErrorCode: kerr.OffsetOutOfRange.Code, HighWatermark: r.highWatermark}
	}
	if r.highWatermark > r.log.end {
		// The read below would reach past the log.
		r.violate(fmt.Sprintf("high watermark %d above the log end offset %d", r.highWatermark, r.log.end))
	}
	return FetchResponse{
		HighWatermark: r.highWatermark, ReadFrom: request.FetchOffset,
		ReadUpTo: min(max(r.highWatermark, request.FetchOffset), r.log.end), MaxBytes: request.MaxBytes,
	}
}

// serveFollowerFetch serves a follower: it checks the follower's
// incarnation and its log's divergence, records how far it has the log,
// and may advance the high watermark or propose the follower for the ISR.
func (r *Replica) serveFollowerFetch(request FetchRequest) FetchResponse {
	progress, ok := r.leader.followers[request.ReplicaID]
	if !ok {
		// Not in the assignment: (replica, epoch) is not known yet, as
		// during a reassignment.
		return FetchResponse{ErrorCode: kerr.UnknownLeaderEpoch.Code, HighWatermark: -1}
	}
	if broker, known := r.brokers[request.ReplicaID]; known && request.ReplicaEpoch != metadata.NoBrokerEpoch && request.ReplicaEpoch < broker.Epoch {
		// A fetch from before the follower restarted (KIP-903): it says
		// nothing about the log the follower has now.
		return FetchResponse{ErrorCode: kerr.NotLeaderForPartition.Code, HighWatermark: -1}
	}
	if diverging, code := r.divergence(request); code != 0 || diverging != nil {
		// No fetch state update for a diverging fetch (KAFKA-13141).
		return FetchResponse{ErrorCode: code, HighWatermark: r.highWatermark, DivergingEpoch: diverging}
	}
	if request.FetchOffset < r.log.start || request.FetchOffset > r.log.end {
		return FetchResponse{ErrorCode: kerr.OffsetOutOfRange.Code, HighWatermark: r.highWatermark}
	}
	r.updateFollowerProgress(request, progress)
	r.assertHighWatermarkCovered()
	r.maybeAdvanceHighWatermark()
	r.maybeExpandISR(request.ReplicaID, progress)
	r.answerDeletes()
	return FetchResponse{
		HighWatermark: r.highWatermark, ReadFrom: request.FetchOffset,
		ReadUpTo: r.log.end, MaxBytes: request.MaxBytes,
	}
}

// divergence is rule kafka-1211 (epoch truncation) on the leader's side:
// when the follower's last fetched epoch ended earlier in the leader's log
// than the follower's log does, or the leader never had that epoch, the
// answer is where the follower's log diverges instead of records (Kafka 2.7's
// diverging epoch, after KIP-101 and KIP-279).
func (r *Replica) divergence(request FetchRequest) (*EpochEndOffset, int16) {
	if request.LastFetchedEpoch == record.NoLeaderEpoch || !r.config.Rules.On(rules.EpochTruncation) {
		return nil, 0
	}
	epoch, end := r.log.epochs.EndOffsetFor(request.LastFetchedEpoch, r.log.end)
	if epoch == record.NoLeaderEpoch || end < 0 {
		return nil, kerr.OffsetOutOfRange.Code
	}
	if request.FetchOffset < r.log.start {
		return nil, kerr.OffsetOutOfRange.Code
	}
	if epoch < request.LastFetchedEpoch || end < request.FetchOffset {
		return &EpochEndOffset{Epoch: epoch, EndOffset: end}, 0
	}
	return nil, 0
}

// updateFollowerProgress records an accepted fetch: the follower holds
// everything below its fetch offset. It counts as caught up when it reached
// the leader's log end offset now, or the one at its previous fetch
// (KAFKA-4485: a steady trickle of produces must not keep a fast follower
// out of sync).
func (r *Replica) updateFollowerProgress(request FetchRequest, progress *followerProgress) {
	switch {
	case request.FetchOffset >= r.log.end:
		progress.lastCaughtUpTick = max(progress.lastCaughtUpTick, r.now)
	case progress.lastFetchLeaderEnd >= 0 && request.FetchOffset >= progress.lastFetchLeaderEnd:
		progress.lastCaughtUpTick = max(progress.lastCaughtUpTick, progress.lastFetchTick)
	}
	progress.lastFetchLeaderEnd = max(progress.lastFetchLeaderEnd, r.log.end)
	progress.lastFetchTick = r.now
	progress.logEndOffset = request.FetchOffset
	progress.brokerEpoch = request.ReplicaEpoch
	progress.logStartOffset = request.LogStartOffset
}

// maybeExpandISR proposes adding a follower that has caught up. Rule
// kafka-7128 (epoch-safe ISR join): besides reaching the leader's high
// watermark, the follower must reach the start offset of the leader's epoch,
// because a new leader's high watermark can lag what was committed before;
// a follower that has only the lagging prefix could be elected and lose
// committed records. A fenced or shutting-down broker, or a fetch from an
// older incarnation, never joins (KIP-841, KIP-903).
func (r *Replica) maybeExpandISR(id metadata.BrokerID, progress *followerProgress) {
	if r.leader.pending != nil || r.state.InISR(id) {
		return
	}
	if progress.logEndOffset < r.highWatermark {
		return
	}
	if r.config.Rules.On(rules.EpochSafeISRJoin) && progress.logEndOffset < r.leader.epochStartOffset {
		return
	}
	broker, ok := r.brokers[id]
	if !ok || !broker.EligibleForISR(progress.brokerEpoch) {
		return
	}
	r.proposeISR(append(append([]metadata.BrokerID(nil), r.state.ISR...), id))
	r.maybeAdvanceHighWatermark()
}

// HandleListOffsets answers the latest or earliest offset, or hands out a
// lookup by timestamp. A consumer's latest offset is the high watermark; a
// follower's or a debugging tool's is the log end offset, since they are
// bound by no isolation level, as in Kafka. A debugging tool
// (DebugReplicaID) is answered by a follower too, with the follower's own
// offsets, as Kafka answers DEBUGGING_REPLICA_ID from any replica: how far
// each replica has the log. The earliest local offset (-4) is the log start
// offset and the latest tiered one (-5) offset -1 with epoch -1: tide has
// no tiered storage. A timestamp at or above zero, or MaxTimestamp (-3),
// is a lookup in the log up to the same bound as the latest offset
// (ListOffsetsAnswer.Lookup), which the caller carries out.
func (r *Replica) HandleListOffsets(request ListOffsetsRequest) {
	answer := ListOffsetsAnswer{ID: request.ID, Offset: -1, LeaderEpoch: r.state.LeaderEpoch, TimestampMs: -1}
	debugFollower := request.ReplicaID == DebugReplicaID && r.role == Follower
	switch {
	case r.checkLeaderEpoch(request.CurrentLeaderEpoch) != 0:
		answer.ErrorCode = r.checkLeaderEpoch(request.CurrentLeaderEpoch)
	case r.role != Leader && !debugFollower:
		answer.ErrorCode = kerr.NotLeaderForPartition.Code
	case request.Timestamp == EarliestTimestamp || request.Timestamp == EarliestLocalTimestamp:
		answer.Offset = r.log.start
	case request.Timestamp == LatestTieredTimestamp:
		answer.LeaderEpoch = record.NoLeaderEpoch
	case request.Timestamp < MaxTimestamp:
		answer.ErrorCode = kerr.InvalidRequest.Code
	default:
		upTo, code := r.listOffsetsLimit(request)
		switch {
		case code != 0:
			answer.ErrorCode = code
		case request.Timestamp == LatestTimestamp:
			answer.Offset = upTo
		default:
			answer.Lookup, answer.LookupTimestamp, answer.LookupUpTo = true, request.Timestamp, upTo
		}
	}
	r.ready.Answers = append(r.ready.Answers, Answer{ListOffsets: &answer})
}

// listOffsetsLimit is the last fetchable offset for a ListOffsets: the log
// end offset for a follower or a debugging tool, the high watermark for a
// consumer, which it must not see go backwards (OFFSET_NOT_AVAILABLE while
// a new leader's high watermark has not reached its epoch's start,
// KIP-207).
func (r *Replica) listOffsetsLimit(request ListOffsetsRequest) (record.Offset, int16) {
	if request.ReplicaID != ConsumerReplicaID {
		return r.log.end, 0
	}
	highWatermark, servable := r.servableHighWatermark()
	if !servable {
		return 0, kerr.OffsetNotAvailable.Code
	}
	r.highestServedHighWatermark = max(r.highestServedHighWatermark, highWatermark)
	return highWatermark, 0
}

// HandleOffsetsForLeaderEpoch answers where an epoch ended in the leader's
// log (KIP-101, KIP-279), for followers and for consumers validating their
// position after a leader change (KIP-320).
func (r *Replica) HandleOffsetsForLeaderEpoch(request OffsetsForLeaderEpochRequest) {
	answer := OffsetsForLeaderEpochAnswer{ID: request.ID, LeaderEpoch: record.NoLeaderEpoch, EndOffset: -1}
	switch {
	case r.checkLeaderEpoch(request.CurrentLeaderEpoch) != 0:
		answer.ErrorCode = r.checkLeaderEpoch(request.CurrentLeaderEpoch)
	case r.role != Leader:
		answer.ErrorCode = kerr.NotLeaderForPartition.Code
	default:
		answer.LeaderEpoch, answer.EndOffset = r.log.epochs.EndOffsetFor(request.LeaderEpoch, r.log.end)
	}
	r.ready.Answers = append(r.ready.Answers, Answer{OffsetsForLeaderEpoch: &answer})
}
