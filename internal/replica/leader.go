package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/producer"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// leaderState is what a replica keeps while it leads.
type leaderState struct {
	// epochStartOffset is the log end offset when this epoch began (Kafka's
	// leader-epoch start offset). Everything committed in earlier epochs
	// lies below it.
	epochStartOffset record.Offset
	followers        map[metadata.BrokerID]*followerProgress
	// pending is the ISR change proposed to the controller and not yet
	// answered; at most one is in flight (KIP-497).
	pending     *ISRChange
	pendingTick int64
	waiting     []pendingProduce
	// deletes are the DeleteRecords requests waiting for the low
	// watermark to reach their offset.
	deletes []pendingDelete
}

// followerProgress is what the leader knows of one follower in this epoch.
type followerProgress struct {
	// logEndOffset is the fetch offset of the follower's last accepted
	// fetch in this epoch, -1 until it fetches: what it holds is unknown.
	logEndOffset record.Offset
	// lastCaughtUpTick is the last time the follower had everything the
	// leader had (Kafka's lastCaughtUpTimeMs).
	lastCaughtUpTick int64
	lastFetchTick    int64
	// lastFetchLeaderEnd is the leader's log end offset at the follower's
	// previous fetch.
	lastFetchLeaderEnd record.Offset
	brokerEpoch        metadata.BrokerEpoch
	// logStartOffset is the follower's log start offset as of its last
	// accepted fetch in this epoch, -1 until then.
	logStartOffset record.Offset
}

// newFollowerProgress is a follower of which nothing is known yet in this
// epoch.
func newFollowerProgress() *followerProgress {
	return &followerProgress{logEndOffset: -1, lastFetchLeaderEnd: -1, brokerEpoch: metadata.NoBrokerEpoch, logStartOffset: -1}
}

// pendingProduce is a produce request waiting for its batches to commit
// (acks=all) or to be durable on the leader (acks=1 with flush=always).
type pendingProduce struct {
	id           uint64
	acks         int16
	baseOffset   record.Offset
	nextOffset   record.Offset
	deadlineTick int64
	// logAppendTimeMs is the time its batches were stamped with on a
	// LogAppendTime topic, or -1.
	logAppendTimeMs int64
}

// becomeLeader starts a new leader epoch. The epoch is recorded at the log
// end offset before any write (KAFKA-7415), and everything the leader knew
// of its followers is forgotten until each fetches in the new epoch: a
// follower's position from an older epoch says nothing about a log that may
// since have been truncated.
func (r *Replica) becomeLeader() {
	r.abandonLeadership()
	r.role = Leader
	r.follower = followerState{}
	epoch := r.state.LeaderEpoch
	if epoch > r.log.epochs.LatestEpoch() || r.log.epochs.Len() == 0 {
		r.ready.Log = append(r.ready.Log, LogOp{Kind: AssignEpoch, Epoch: epoch})
		r.log.epochs.Assign(epoch, r.log.end)
	}
	r.leader = leaderState{epochStartOffset: r.log.end, followers: map[metadata.BrokerID]*followerProgress{}}
	for _, id := range r.state.Replicas {
		if id == r.config.Broker {
			continue
		}
		progress := newFollowerProgress()
		if r.state.InISR(id) {
			progress.lastCaughtUpTick = r.now
		}
		r.leader.followers[id] = progress
	}
	r.maybeAdvanceHighWatermark()
}

// leaderStateChanged applies a new ISR (or assignment) in the same epoch.
func (r *Replica) leaderStateChanged() {
	if r.leader.pending != nil && r.state.PartitionEpoch > r.leader.pending.PartitionEpoch {
		r.leader.pending = nil
	}
	for _, id := range r.state.Replicas {
		if _, ok := r.leader.followers[id]; !ok && id != r.config.Broker {
			r.leader.followers[id] = newFollowerProgress()
		}
	}
	for id := range r.leader.followers {
		// A replica a reassignment took out: its fetches, until it hears
		// of it, are a non-replica's (refused), and it is never proposed
		// for the ISR again.
		if !r.state.IsReplica(id) {
			delete(r.leader.followers, id)
		}
	}
	r.maybeAdvanceHighWatermark()
	r.answerLeaderAcks()
}

// abandonLeadership answers every waiting produce request: this replica no
// longer leads the epoch they were appended in.
func (r *Replica) abandonLeadership() {
	if r.role != Leader {
		return
	}
	for _, waiting := range r.leader.waiting {
		r.answerProduce(waiting.id, kerr.NotLeaderForPartition.Code, -1)
	}
	for _, waiting := range r.leader.deletes {
		r.answerDelete(waiting.id, kerr.NotLeaderForPartition.Code, -1)
	}
	r.leader = leaderState{}
}

// checkLeaderEpoch is KIP-320's receiver-side check, rule kafka-6880 (fenced
// fetch): a request from an older epoch gets FENCED_LEADER_EPOCH, one from a
// newer epoch UNKNOWN_LEADER_EPOCH, and only the current epoch is served, so
// a zombie that missed leader changes can never fetch on as if nothing had
// happened. NoLeaderEpoch skips the check (old clients).
func (r *Replica) checkLeaderEpoch(requested record.LeaderEpoch) int16 {
	if requested == record.NoLeaderEpoch || !r.config.Rules.On(rules.FencedFetch) {
		return 0
	}
	switch {
	case requested < r.state.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case requested > r.state.LeaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// HandleProduce appends a producer's batches as leader. Batches from
// idempotent producers are checked against the producer state first
// (internal/producer): a retry of batches already in the log is answered
// with their offsets and not appended again, and a batch out of sequence or
// from a fenced producer epoch is refused with its Kafka error code; either
// way nothing of the request is appended.
func (r *Replica) HandleProduce(request ProduceRequest) {
	if r.role != Leader {
		r.answerProduce(request.ID, kerr.NotLeaderForPartition.Code, -1)
		return
	}
	headers, err := validateProduced(request.Batches, r.config.producerLimits())
	if err != nil {
		r.refuseProduce(request.ID, err)
		return
	}
	if r.config.Compacted {
		if keyless := keylessRecords(request.Batches, headers, r.config.producerLimits()); len(keyless) > 0 {
			r.refuseKeyless(request.ID, keyless)
			return
		}
	}
	if request.Acks == AcksAll && len(r.state.ISR) < r.config.MinInsyncReplicas {
		r.answerProduce(request.ID, kerr.NotEnoughReplicas.Code, -1)
		return
	}
	if request.Acks != AcksNone && len(r.leader.waiting) >= r.config.MaxPendingProduces {
		r.answerProduce(request.ID, kerr.RequestTimedOut.Code, -1)
		return
	}
	var base, next record.Offset
	check := r.producerState().CheckBatches(headers, r.log.end)
	switch check.Verdict {
	case producer.Reject:
		r.answerProduce(request.ID, check.ErrorCode, -1)
		return
	case producer.Duplicate:
		// A retry of batches the log holds: answer with their offsets,
		// under the same conditions as the first time (Kafka's
		// DelayedProduce waits for the original's last offset), so a retry
		// is not acknowledged before the original is committed.
		base, next = check.Original.FirstOffset, check.Original.LastOffset+1
	default:
		batches := request.Batches
		if r.config.Recompress {
			if batches, headers, err = recompressBatches(batches, headers, r.config.Codec, r.config.producerLimits()); err != nil {
				r.refuseProduce(request.ID, err)
				return
			}
		}
		base = r.log.end
		r.stampBatches(batches, headers, request.AppendTimeMs)
		r.appendBatches(batches, headers)
		next = r.log.end
	}
	if request.Acks == AcksNone {
		return
	}
	appendTimeMs := int64(-1)
	if r.config.LogAppendTime && check.Verdict != producer.Duplicate {
		appendTimeMs = request.AppendTimeMs
	}
	r.leader.waiting = append(r.leader.waiting, pendingProduce{
		id: request.ID, acks: request.Acks, baseOffset: base, nextOffset: next,
		deadlineTick: r.now + request.TimeoutTicks, logAppendTimeMs: appendTimeMs,
	})
	r.maybeAdvanceHighWatermark()
	r.answerLeaderAcks()
}

// validateProduced checks a producer's batches whole, where they enter
// (STYLE rule 6): record.ValidateAll with the producer limits, compressed
// batches opened, then Kafka's client-only rules (record.CheckFromProducer)
// and tide's own: no transactional batch, since tide has no transactions
// yet. Kafka answers a transactional batch sent without a transactional id
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (KafkaApis.handleProduceRequest),
// and wire refuses every transactional id, so that is the answer here.
// Nothing after this check looks inside a batch again.
func validateProduced(batches []byte, limits record.Limits) ([]record.Header, error) {
	headers, err := record.ValidateAll(batches, limits)
	if err != nil {
		return nil, err
	}
	for _, header := range headers {
		if err := record.CheckFromProducer(header); err != nil {
			return nil, err
		}
		if header.IsTransactional() {
			return nil, errTransactionalBatch
		}
	}
	return headers, nil
}

// errTransactionalBatch refuses a transactional batch: see validateProduced.
var errTransactionalBatch = errors.New("replica: a transactional batch without a transactional id")

// refuseProduce answers a produce whose batches failed validateProduced,
// with the Kafka code for err, and for a record at fault the record error
// and message Produce v8+ carries (Kafka's RecordValidationException).
func (r *Replica) refuseProduce(id uint64, err error) {
	answer := ProduceAnswer{ID: id, ErrorCode: kerr.CorruptMessage.Code, BaseOffset: -1, LogStartOffset: r.log.start}
	var batchError *record.Error
	switch {
	case errors.Is(err, errTransactionalBatch):
		answer.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case errors.As(err, &batchError):
		answer.ErrorCode = batchError.KafkaCode()
		if batchError.RecordIndex != record.NoRecordIndex {
			answer.RecordErrors = []RecordError{{BatchIndex: int32(batchError.RecordIndex), Message: batchError.Reason}}
			answer.ErrorMessage = "a record of the batch was refused: " + batchError.Reason
		}
	}
	r.ready.Answers = append(r.ready.Answers, Answer{Produce: &answer})
}

// stampBatches writes offsets from the log end offset and the leader epoch
// into the batch headers, in place; the CRC does not cover them. On a
// LogAppendTime topic it also sets each batch's timestamp type and max
// timestamp to appendTimeMs and recomputes its CRC (the records are
// untouched), as Kafka's leader does.
func (r *Replica) stampBatches(batches []byte, headers []record.Header, appendTimeMs int64) {
	next, position := r.log.end, 0
	for i := range headers {
		batch := batches[position : position+headers[i].Size()]
		if r.config.LogAppendTime {
			record.SetLogAppendTime(batch, appendTimeMs)
			headers[i].MaxTimestampMs = appendTimeMs
			headers[i].Attributes = int16(binary.BigEndian.Uint16(batch[record.AttributesPosition:]))
			headers[i].CRC = binary.BigEndian.Uint32(batch[record.CRCPosition:])
		}
		record.SetBaseOffset(batch, next)
		record.SetPartitionLeaderEpoch(batch, r.state.LeaderEpoch)
		headers[i].BaseOffset = next
		headers[i].PartitionLeaderEpoch = r.state.LeaderEpoch
		next = headers[i].NextOffset()
		position += headers[i].Size()
	}
}

// answerLeaderAcks answers the produce requests whose condition now holds.
// acks=all is answered only once the high watermark has passed the batches:
// every ISR member has them (durably, with flush=always). If the ISR shrank
// below min.insync.replicas meanwhile, the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's DelayedProduce does.
func (r *Replica) answerLeaderAcks() {
	kept := r.leader.waiting[:0]
	for _, waiting := range r.leader.waiting {
		switch {
		case waiting.acks == AcksLeader && r.countableEnd() >= waiting.nextOffset:
			r.answerProduced(waiting, 0)
		case waiting.acks == AcksAll && r.highWatermark >= waiting.nextOffset:
			code := int16(0)
			if len(r.state.ISR) < r.config.MinInsyncReplicas {
				code = kerr.NotEnoughReplicasAfterAppend.Code
			}
			r.answerProduced(waiting, code)
		default:
			kept = append(kept, waiting)
		}
	}
	r.leader.waiting = kept
}

// expireProduces answers REQUEST_TIMED_OUT to requests past their deadline.
func (r *Replica) expireProduces() {
	kept := r.leader.waiting[:0]
	for _, waiting := range r.leader.waiting {
		if r.now >= waiting.deadlineTick {
			r.answerProduce(waiting.id, kerr.RequestTimedOut.Code, -1)
			continue
		}
		kept = append(kept, waiting)
	}
	r.leader.waiting = kept
}

// answerProduced answers a produce whose batches were appended, with the
// time they were stamped with on a LogAppendTime topic.
func (r *Replica) answerProduced(waiting pendingProduce, code int16) {
	r.answerProduce(waiting.id, code, waiting.baseOffset)
	if answer := r.ready.Answers[len(r.ready.Answers)-1].Produce; waiting.logAppendTimeMs >= 0 {
		answer.LogAppendTime, answer.LogAppendTimeMs = true, waiting.logAppendTimeMs
	}
}

func (r *Replica) answerProduce(id uint64, code int16, base record.Offset) {
	r.ready.Answers = append(r.ready.Answers, Answer{Produce: &ProduceAnswer{
		ID: id, ErrorCode: code, BaseOffset: base, LogStartOffset: r.log.start,
	}})
}

// maximalISR is the ISR the high watermark waits for: the committed ISR plus
// a member whose addition is pending, since the controller may accept it
// (Kafka's maximal ISR, KIP-497). A pending removal does not count until
// committed, since the controller may reject it.
func (r *Replica) maximalISR() []metadata.BrokerID {
	isr := slices.Clone(r.state.ISR)
	if r.leader.pending != nil {
		for _, member := range r.leader.pending.NewISR {
			if !containsBroker(isr, member.ID) {
				isr = append(isr, member.ID)
			}
		}
	}
	return isr
}

// maybeAdvanceHighWatermark moves the high watermark to the smallest log end
// offset over the maximal ISR. It never moves back on a leader, and does not
// move while the ISR is smaller than min.insync.replicas (KAFKA-15583): data
// that only a too-small ISR holds is not committed. A follower that has not
// fetched in this epoch holds it still.
func (r *Replica) maybeAdvanceHighWatermark() {
	if r.role != Leader || len(r.state.ISR) < r.config.MinInsyncReplicas {
		return
	}
	candidate := r.countableEnd()
	for _, id := range r.maximalISR() {
		if id == r.config.Broker {
			continue
		}
		progress, ok := r.leader.followers[id]
		if !ok || progress.logEndOffset < 0 {
			return
		}
		candidate = min(candidate, progress.logEndOffset)
	}
	if candidate <= r.highWatermark {
		return
	}
	r.setHighWatermark(candidate)
	r.assertHighWatermarkCovered()
	r.noteServedHighWatermark()
	r.answerLeaderAcks()
}

// assertHighWatermarkCovered checks that every ISR member the leader has
// heard from in this epoch holds everything below the high watermark: a
// member that holds less would be elected without committed records.
//
// A member fetching as a newer incarnation than the leader's metadata
// knows is left out: it restarted, perhaps with its data disk replaced,
// and registering without vouching for its log took it out of the ISR at
// the controller (KIP-903, KIP-966). The leader, cut off, may not have
// heard yet; until it does, that member's offsets hold the high watermark
// where it is, which is safe.
func (r *Replica) assertHighWatermarkCovered() {
	for _, id := range r.state.ISR {
		progress, ok := r.leader.followers[id]
		if broker, known := r.brokers[id]; ok && known && progress.brokerEpoch != metadata.NoBrokerEpoch && progress.brokerEpoch > broker.Epoch {
			continue
		}
		if ok && progress.logEndOffset >= 0 && progress.logEndOffset < r.highWatermark {
			r.violate(fmt.Sprintf("high watermark %d above the log end offset %d of ISR member %d", r.highWatermark, progress.logEndOffset, id))
		}
	}
	if r.countableEnd() < r.highWatermark && r.state.InISR(r.config.Broker) {
		r.violate(fmt.Sprintf("high watermark %d above the leader's own log end %d", r.highWatermark, r.countableEnd()))
	}
}

// noteServedHighWatermark remembers the high watermark this leader makes
// visible, once it is safe to serve (see servableHighWatermark).
func (r *Replica) noteServedHighWatermark() {
	if hw, ok := r.servableHighWatermark(); ok {
		r.highestServedHighWatermark = max(r.highestServedHighWatermark, hw)
	}
}

// servableHighWatermark is the high watermark a leader may show clients.
// Rule kafka-2334 (monotonic high watermark, KIP-207): a new leader's high
// watermark may lag the one the previous leader served; until it reaches the
// start offset of its own epoch, showing it could make a consumer see the
// latest offset go backwards, so none is shown.
func (r *Replica) servableHighWatermark() (record.Offset, bool) {
	if r.config.Rules.On(rules.MonotonicHighWatermark) && r.highWatermark < r.leader.epochStartOffset {
		return 0, false
	}
	return r.highWatermark, true
}

// maybeShrinkISR proposes removing the followers that have not caught up
// within the lag time. Shrinking is always safe for the log; it only needs
// the controller's compare-and-set.
func (r *Replica) maybeShrinkISR() {
	if r.leader.pending != nil {
		return
	}
	var keep []metadata.BrokerID
	for _, id := range r.state.ISR {
		if id == r.config.Broker || r.followerCaughtUp(id) {
			keep = append(keep, id)
		}
	}
	if len(keep) < len(r.state.ISR) {
		r.proposeISR(keep)
	}
}

// followerCaughtUp is Kafka's isCaughtUp: the follower has the leader's log
// end offset, or had it within the lag time.
func (r *Replica) followerCaughtUp(id metadata.BrokerID) bool {
	progress, ok := r.leader.followers[id]
	if !ok {
		return false
	}
	if progress.logEndOffset >= 0 && progress.logEndOffset == r.log.end {
		return true
	}
	return r.now-progress.lastCaughtUpTick <= r.config.ReplicaLagTicks
}

// proposeISR hands out an AlterPartition proposal for isr.
func (r *Replica) proposeISR(isr []metadata.BrokerID) {
	change := ISRChange{
		Partition: r.config.Partition, Leader: r.config.Broker,
		LeaderEpoch: r.state.LeaderEpoch, PartitionEpoch: r.state.PartitionEpoch,
	}
	for _, id := range isr {
		epoch := metadata.NoBrokerEpoch
		if broker, ok := r.brokers[id]; ok {
			epoch = broker.Epoch
		}
		if progress, ok := r.leader.followers[id]; ok && progress.brokerEpoch != metadata.NoBrokerEpoch {
			epoch = progress.brokerEpoch
		}
		change.NewISR = append(change.NewISR, ISRMember{ID: id, Epoch: epoch})
	}
	r.leader.pending, r.leader.pendingTick = &change, r.now
	r.ready.Proposals = append(r.ready.Proposals, change)
}

// maybeRetryProposal resends a proposal that got no answer in time. It stays
// pending: the controller may have applied it and the answer been lost, so
// the high watermark keeps waiting for any member it adds until the outcome
// is known. Forgetting it instead could let the high watermark pass a member
// that the controller then puts in the ISR without the committed records.
func (r *Replica) maybeRetryProposal() {
	if r.leader.pending != nil && r.now-r.leader.pendingTick >= r.config.ProposalRetryTicks {
		r.leader.pendingTick = r.now
		r.ready.Proposals = append(r.ready.Proposals, *r.leader.pending)
	}
}

// ControllerMoved tells the replica that controller requests now go to
// another controller. A proposal still waiting for its answer went to the
// old one, which may never answer (it crashed, or its link is dead), so
// it is resent at the next tick instead of a whole ProposalRetryTicks
// after it was sent: an ISR expansion or shrink otherwise waits out the
// timer after every controller change. It stays pending, exactly as for a
// retry by the timer (maybeRetryProposal says why).
func (r *Replica) ControllerMoved() {
	if r.role == Leader && r.leader.pending != nil {
		r.leader.pendingTick = r.now - r.config.ProposalRetryTicks
	}
}

// HandleAlterPartitionResponse takes the controller's answer to the pending
// proposal. On success its state is applied like any metadata (it may also
// arrive through the metadata log first; the partition epoch orders them).
// An error that means the controller did not apply it clears the proposal.
// INVALID_UPDATE_VERSION and FENCED_LEADER_EPOCH say only that the state
// moved on, perhaps by this very proposal, whose answer was lost: the
// proposal stays pending until newer partition state arrives, as Kafka's
// leader waits for metadata.
func (r *Replica) HandleAlterPartitionResponse(response AlterPartitionResponse) {
	if r.role != Leader {
		return
	}
	if r.leader.pending == nil || !sameProposal(response.Request, *r.leader.pending) {
		// An answer to an earlier proposal: its state, if any, is applied
		// by partition epoch like any metadata, and settles nothing else.
		if response.ErrorCode == 0 && response.State != nil {
			r.ApplyPartitionState(*response.State)
		}
		return
	}
	switch response.ErrorCode {
	case 0:
		r.leader.pending = nil
		if response.State != nil {
			r.ApplyPartitionState(*response.State)
		}
	case kerr.InvalidUpdateVersion.Code, kerr.FencedLeaderEpoch.Code, kerr.NotController.Code:
		return
	default:
		r.leader.pending = nil
	}
	r.maybeAdvanceHighWatermark()
}

// String describes the leader's view of its followers, for debugging.
func (s *leaderState) String() string {
	ids := make([]metadata.BrokerID, 0, len(s.followers))
	for id := range s.followers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	text := fmt.Sprintf("epoch-start=%d", s.epochStartOffset)
	for _, id := range ids {
		text += fmt.Sprintf(" %d:leo=%d", id, s.followers[id].logEndOffset)
	}
	return text
}
