package replica

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/producer"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// followerState is what a replica keeps while it follows.
type followerState struct {
	leader metadata.BrokerID
	// inFlight is the fetch sent and not yet answered.
	inFlight     *FetchRequest
	inFlightTick int64
	// retryTick is when the follower may fetch again after an error.
	retryTick int64
	// reconciling is set while the follower asks the leader, with
	// OffsetsForLeaderEpoch, where its log diverges (KIP-101, KIP-279); it
	// fetches no records until it has truncated what diverges.
	reconciling     bool
	inFlightOffsets *OffsetsForLeaderEpochRequest
	// fenced is set when the leader answered FENCED_LEADER_EPOCH to this
	// epoch: this replica is the stale one, and it waits for newer
	// partition state instead of fetching on.
	fenced bool
	// leaderHighWatermark is the high watermark the leader's last fetch
	// answer in this epoch carried; known says one has come. Read only by
	// FetcherLag.
	leaderHighWatermark      record.Offset
	leaderHighWatermarkKnown bool
}

// SetBrokerEpoch sets this broker's own epoch (its incarnation), which every
// fetch carries so a leader can tell fetches from before a restart apart.
func (r *Replica) SetBrokerEpoch(epoch metadata.BrokerEpoch) { r.brokerEpoch = epoch }

// becomeFollower starts following the leader of a new epoch. Rule kafka-1211
// (epoch truncation): the follower never truncates to its own high
// watermark, which may lag the leader's, but finds where its log diverges by
// leader epoch, on every epoch change, also when the leader stays the same
// broker (KAFKA-7164). With fenced fetches (rule kafka-6880) every fetch
// carries the epoch of the follower's last batch and the leader answers with
// the divergence point; without them the follower asks with
// OffsetsForLeaderEpoch before it fetches, as Kafka did from 0.11 to 2.6.
func (r *Replica) becomeFollower() {
	r.abandonLeadership()
	r.role = Follower
	r.follower = followerState{leader: r.state.Leader}
	switch {
	case !r.config.Rules.On(rules.EpochTruncation):
		// Before KIP-101: truncate to the high watermark and fetch from
		// there. The high watermark can lag the leader's, so this can cut
		// committed records (KAFKA-1211).
		r.truncate(max(r.highWatermark, r.log.start))
	case !r.config.Rules.On(rules.FencedFetch) && r.log.epochs.Len() > 0:
		r.follower.reconciling = true
	}
	r.maybeFetch()
}

// maybeFetch sends the next fetch (or, while reconciling, the next
// OffsetsForLeaderEpoch) if none is in flight and the follower may. With
// flush=always the follower first waits until what it appended is durable
// (rule unsynced-ack): its fetch offset tells the leader it has the data, and
// the leader counts it toward the high watermark.
func (r *Replica) maybeFetch() {
	f := &r.follower
	if r.role != Follower || f.inFlight != nil || f.inFlightOffsets != nil || f.fenced || r.now < f.retryTick || r.state.Leader == metadata.NoBroker {
		return
	}
	if r.config.FlushAlways && r.config.Rules.On(rules.CommittedMeansDurable) && r.log.durable < r.log.end {
		return
	}
	// Request ids never repeat in a replica's life, whatever its roles:
	// an answer to an old request must never be taken for the current one.
	r.nextRequestID++
	fenced := r.config.Rules.On(rules.FencedFetch)
	currentEpoch := record.NoLeaderEpoch
	if fenced {
		currentEpoch = r.state.LeaderEpoch
	}
	if f.reconciling && r.log.epochs.Len() == 0 {
		f.reconciling = false
	}
	if f.reconciling {
		request := &OffsetsForLeaderEpochRequest{ID: r.nextRequestID, ReplicaID: r.config.Broker, CurrentLeaderEpoch: currentEpoch, LeaderEpoch: r.log.epochs.LatestEpoch()}
		f.inFlightOffsets, f.inFlightTick = request, r.now
		sent := *request
		r.ready.Messages = append(r.ready.Messages, Message{To: f.leader, Partition: r.config.Partition, OffsetsForLeaderEpoch: &sent})
		return
	}
	request := &FetchRequest{
		ID: r.nextRequestID, ReplicaID: r.config.Broker, ReplicaEpoch: r.brokerEpoch,
		CurrentLeaderEpoch: currentEpoch, FetchOffset: r.log.end,
		LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: int64(r.config.MaxBatchBytes),
		LogStartOffset: r.log.start,
	}
	if fenced && r.config.Rules.On(rules.EpochTruncation) {
		request.LastFetchedEpoch = r.log.epochs.LatestEpoch()
	}
	f.inFlight, f.inFlightTick = request, r.now
	sent := *request
	r.ready.Messages = append(r.ready.Messages, Message{To: f.leader, Partition: r.config.Partition, Fetch: &sent})
}

// HandleOffsetsForLeaderEpochResponse applies the leader's answer to a
// reconciling follower: truncate what diverges, and ask again while the
// answer names an epoch this follower does not know (KIP-279).
func (r *Replica) HandleOffsetsForLeaderEpochResponse(answer OffsetsForLeaderEpochAnswer) {
	f := &r.follower
	if r.role != Follower || f.inFlightOffsets == nil || answer.ID != f.inFlightOffsets.ID {
		return
	}
	f.inFlightOffsets = nil
	switch {
	case answer.ErrorCode == kerr.FencedLeaderEpoch.Code:
		f.fenced = true
	case answer.ErrorCode != 0:
		f.retryTick = r.now + r.config.FetchRetryTicks
	case answer.EndOffset < 0:
		// The leader knows no epoch at or below ours: nothing in common.
		r.truncate(r.log.start)
		f.reconciling = false
	default:
		f.reconciling = !r.truncateDivergence(EpochEndOffset{Epoch: answer.LeaderEpoch, EndOffset: answer.EndOffset})
	}
	r.maybeFetch()
}

// maybeRetryFetch resends a fetch whose response is overdue: the request or
// the response was lost. A late response to the old request is discarded.
func (r *Replica) maybeRetryFetch() {
	f := &r.follower
	timeout := r.config.FetchTimeoutTicks
	if timeout == 0 {
		timeout = r.config.FetchRetryTicks
	}
	if (f.inFlight != nil || f.inFlightOffsets != nil) && r.now-f.inFlightTick >= timeout {
		f.inFlight, f.inFlightOffsets = nil, nil
	}
	r.maybeFetch()
}

// HandleFetchResponse applies the leader's answer to this follower's fetch.
func (r *Replica) HandleFetchResponse(response FetchResponse) {
	f := &r.follower
	if r.role != Follower || f.inFlight == nil || response.ID != f.inFlight.ID {
		return // an answer to a fetch this replica no longer waits for
	}
	request := *f.inFlight
	f.inFlight = nil
	if request.FetchOffset != r.log.end {
		// The log moved since (a new epoch clears the in-flight fetch
		// instead): the answer is stale.
		r.maybeFetch()
		return
	}
	switch response.ErrorCode {
	case 0:
		r.applyFetchedData(response)
	case kerr.OffsetOutOfRange.Code:
		r.handleOutOfRange(response)
	case kerr.FencedLeaderEpoch.Code:
		// The leader has a newer epoch than this replica: wait for it to
		// arrive through the metadata log (KIP-320).
		f.fenced = true
	default:
		f.retryTick = r.now + r.config.FetchRetryTicks
	}
	r.maybeFetch()
}

// applyFetchedData truncates on a diverging epoch, or else appends the
// records and takes the leader's high watermark. A diverging epoch is
// applied before, and instead of, any record or high watermark in the same
// response (KAFKA-14704): applying them first could make the follower's
// divergent tail look committed.
func (r *Replica) applyFetchedData(response FetchResponse) {
	if response.DivergingEpoch != nil {
		r.truncateDivergence(*response.DivergingEpoch)
		return
	}
	if len(response.Records) > 0 {
		headers, err := record.ValidateAll(response.Records, record.Limits{MaxBatchBytes: r.config.MaxBatchBytes})
		if err != nil || len(headers) == 0 || headers[0].BaseOffset != r.log.end || r.epochRegresses(headers) {
			r.follower.retryTick = r.now + r.config.FetchRetryTicks
			return
		}
		r.appendBatches(response.Records, headers)
	}
	if response.HighWatermark >= 0 {
		r.setHighWatermark(max(min(response.HighWatermark, r.log.end), r.log.start))
		r.follower.leaderHighWatermark, r.follower.leaderHighWatermarkKnown = response.HighWatermark, true
	}
	// Rule follower-follows-log-start: a follower moves its log start up to
	// the leader's (Kafka's ReplicaFetcherThread, after the append), so
	// that records retention or DeleteRecords removed on the leader go here
	// too and a later election does not bring them back; capped at its own
	// high watermark (maybeAdvanceLogStart).
	if response.LogStartOffset >= 0 {
		r.maybeAdvanceLogStart(response.LogStartOffset)
	}
}

// epochRegresses reports batches whose leader epoch is below the latest the
// log has: a leader never sends those to a follower that reconciled.
func (r *Replica) epochRegresses(headers []record.Header) bool {
	latest := r.log.epochs.LatestEpoch()
	for _, header := range headers {
		if header.PartitionLeaderEpoch < latest || header.PartitionLeaderEpoch < 0 {
			return true
		}
		latest = header.PartitionLeaderEpoch
	}
	return false
}

// truncateDivergence truncates the suffix where this follower's log
// diverges from the leader's (Kafka's getOffsetTruncationState). When the
// follower knows the epoch the leader named, it keeps the shorter of the two
// ends of that epoch. When it does not (KIP-279), it truncates to the end of
// its own largest epoch below it, and asks again with that epoch, until both
// name an epoch both know. It reports whether the reconciliation is
// complete.
func (r *Replica) truncateDivergence(diverging EpochEndOffset) bool {
	localEpoch, localEnd := r.log.epochs.EndOffsetFor(diverging.Epoch, r.log.end)
	var to record.Offset
	complete := true
	switch {
	case localEpoch == record.NoLeaderEpoch:
		to = min(diverging.EndOffset, r.log.end)
	case localEpoch != diverging.Epoch:
		to, complete = min(localEnd, r.log.end), false
	default:
		to = min(localEnd, diverging.EndOffset, r.log.end)
	}
	r.truncate(max(to, r.log.start))
	return complete
}

// handleOutOfRange is Kafka's fetchOffsetAndTruncate (never fatal since
// KAFKA-7414): behind the leader's log start, restart at it; ahead of the
// leader's log end (an unclean election, or pre-epoch truncation), truncate
// to it.
func (r *Replica) handleOutOfRange(response FetchResponse) {
	switch {
	case response.LogEndOffset >= 0 && response.LogEndOffset < r.log.end:
		r.truncate(max(response.LogEndOffset, r.log.start))
	case response.LogStartOffset > r.log.end:
		r.truncateFully(response.LogStartOffset)
	default:
		r.follower.retryTick = r.now + r.config.FetchRetryTicks
	}
}

// truncateFully empties the log and restarts it at start.
func (r *Replica) truncateFully(start record.Offset) {
	r.ready.Log = append(r.ready.Log, LogOp{Kind: TruncateFully, Offset: start})
	r.log.start, r.log.end, r.log.durable = start, start, start
	// The log is empty: no producer has a batch in it any more, and none
	// needs rebuilding.
	r.log.producers = producer.New()
	r.log.epochs = r.log.epochs.Clone()
	r.log.epochs.TruncateFromEnd(0)
	r.setHighWatermark(start)
}

// FetcherLag is how far this follower's log end offset is behind the
// high watermark of its leader's last fetch answer (Kafka's
// FetcherLagMetrics ConsumerLag: the answer's high watermark less the
// follower's next fetch offset, never below 0), and false when the
// replica does not follow or has had no answer in this epoch. A Kafka
// fetch answer carries the leader's high watermark, not its log end, so
// a follower in the ISR reads 0 while the leader's uncommitted tail waits
// for it. It is read by the metrics and the console and decides nothing.
func (r *Replica) FetcherLag() (int64, bool) {
	if r.role != Follower || !r.follower.leaderHighWatermarkKnown {
		return 0, false
	}
	return max(int64(r.follower.leaderHighWatermark-r.log.end), 0), true
}

// describeFollower is for debugging.
func (s *followerState) String() string {
	return fmt.Sprintf("leader=%d in-flight=%t fenced=%t", s.leader, s.inFlight != nil, s.fenced)
}
