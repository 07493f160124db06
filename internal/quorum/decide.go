package quorum

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// activate makes this node the active controller of the current term. It
// has applied every entry of earlier terms, so its image is the whole
// committed log; brokers get a full session from now, as Kafka's
// controller gives them on activation, since it cannot know when they last
// heartbeated to the previous controller.
func (q *Quorum) activate() {
	q.active, q.activeTerm = true, q.term
	q.topicIDsAssigned = false
	q.nextRebalance = q.now + q.config.LeaderRebalanceTicks
	q.speculative = q.image.Clone()
	q.proposed, q.appliedProposal = 0, 0
	q.lastHeartbeat = map[metadata.BrokerID]int64{}
	for _, broker := range q.image.Brokers() {
		q.lastHeartbeat[broker.ID] = q.now
	}
}

// deactivate drops what only the active controller had: its uncommitted
// view (a new leader may never commit it) and its waiting answers, which
// fail with NOT_CONTROLLER so their senders retry with the new one.
func (q *Quorum) deactivate() {
	q.active, q.speculative = false, nil
	for _, w := range q.waiting {
		q.out = append(q.out, q.notController(w.request))
	}
	q.waiting = nil
	for _, poll := range q.polls {
		q.out = append(q.out, q.notController(poll.request))
	}
	q.polls = nil
}

func (q *Quorum) notController(request Request) Answer {
	return Answer{ID: request.ID, To: request.From, ControllerEpoch: q.term, Leader: q.leader, ErrorCode: kerr.NotController.Code}
}

// HandleRequest handles a broker's request. Only the active controller
// decides; any other node answers NOT_CONTROLLER with the leader it knows.
// An error is a bug in a decision (it would break an image invariant): the
// node must stop.
func (q *Quorum) HandleRequest(request Request) error {
	if !q.active {
		q.out = append(q.out, q.notController(request))
		return nil
	}
	if request.FetchMetadata != nil {
		q.holdPoll(request)
		return nil
	}
	answer := Answer{ID: request.ID, To: request.From, ControllerEpoch: q.activeTerm, Leader: q.config.ID}
	if request.Heartbeat != nil {
		q.noteHeartbeat(request.From, request.Heartbeat.Epoch)
	}
	if len(q.waiting) >= q.config.MaxWaitingAnswers {
		answer.ErrorCode = kerr.RequestTimedOut.Code
		q.out = append(q.out, answer)
		return nil
	}
	records, err := q.decide(request, &answer)
	if err != nil {
		return fmt.Errorf("quorum: deciding %s: %w", request, err)
	}
	if len(records) > 0 && !q.propose(records) {
		answer = Answer{ID: request.ID, To: request.From, ControllerEpoch: q.activeTerm, Leader: q.config.ID,
			ErrorCode: kerr.RequestTimedOut.Code}
		q.out = append(q.out, answer)
		return nil
	}
	// Even with no records of its own, the answer may rest on proposals
	// not yet committed (a retried registration gets the epoch of one in
	// flight): it waits for everything proposed so far.
	q.waiting = append(q.waiting, waitingAnswer{proposal: q.proposed, request: request, answer: answer})
	q.releaseWaiting()
	return nil
}

// decide runs the request's decision against the speculative image and
// fills the answer's fields that the decision gives.
func (q *Quorum) decide(request Request, answer *Answer) ([]metadata.Record, error) {
	img := q.speculative
	switch {
	case request.Register != nil:
		records, epoch, code, err := controller.RegisterBroker(img, request.From, request.Register.Incarnation,
			request.Register.Endpoint, request.Register.PreviousEpoch, img.Offset()+1)
		answer.ErrorCode, answer.Register = code, &RegisterAnswer{Epoch: epoch}
		if code == 0 {
			q.lastHeartbeat[request.From] = q.now
		}
		return records, err
	case request.Heartbeat != nil:
		heartbeat := request.Heartbeat
		// Its epoch is the offset of its registration: a broker that has
		// applied it has caught up enough to be unfenced (KRaft).
		caughtUp := heartbeat.AppliedOffset >= int64(heartbeat.Epoch)
		records, code, err := controller.Heartbeat(img, request.From, heartbeat.Epoch, heartbeat.WantShutdown, caughtUp)
		answer.ErrorCode, answer.Heartbeat = code, &HeartbeatAnswer{}
		return records, err
	case request.AlterPartition != nil:
		alter := *request.AlterPartition
		alter.BrokerID = request.From
		records, response, err := controller.AlterPartition(img, alter)
		answer.AlterPartition = &response
		return records, err
	case request.CreateTopic != nil:
		records, code, err := controller.CreateTopic(img, *request.CreateTopic, q.config.Random)
		answer.ErrorCode = code
		return records, err
	case request.CreatePartitions != nil:
		records, code, err := controller.CreatePartitions(img, *request.CreatePartitions)
		answer.ErrorCode = code
		return records, err
	case request.DeleteTopic != nil:
		records, code, err := controller.DeleteTopic(img, request.DeleteTopic.Name, request.DeleteTopic.ID)
		answer.ErrorCode = code
		return records, err
	case request.ElectPreferred != nil:
		partitions := request.ElectPreferred.Partitions
		if len(partitions) == 0 {
			for _, state := range img.Partitions() {
				partitions = append(partitions, state.TopicPartition)
			}
		}
		records, response, err := controller.ElectPreferred(img, partitions)
		answer.ElectPreferred = &response
		return records, err
	case request.AlterConfigs != nil:
		records, code, message, err := controller.AlterConfigs(img, *request.AlterConfigs, q.config.Rules)
		answer.ErrorCode, answer.AlterConfigs = code, &AlterConfigsAnswer{Message: message}
		if code == 0 {
			answer.AlterConfigs.Configs = configsAfter(img, request.AlterConfigs.Resource, records)
		}
		return records, err
	case request.Reassign != nil:
		return q.decideReassign(img, request.Reassign, answer)
	case request.AllocateProducerIDs != nil:
		records, block, code, err := controller.AllocateProducerIDs(img, request.From, request.AllocateProducerIDs.BrokerEpoch)
		answer.ErrorCode, answer.ProducerIDs = code, &block
		return records, err
	}
	answer.ErrorCode = kerr.InvalidRequest.Code
	return nil, nil
}

// noteHeartbeat keeps the session of a broker heartbeating with its
// current epoch, even when the request itself is refused for load.
func (q *Quorum) noteHeartbeat(id metadata.BrokerID, epoch metadata.BrokerEpoch) {
	if state, ok := q.speculative.Broker(id); ok && state.Epoch == epoch {
		q.lastHeartbeat[id] = q.now
	}
}

// fenceExpired fences the brokers whose session expired.
func (q *Quorum) fenceExpired() {
	records, err := controller.FenceExpired(q.speculative, q.lastHeartbeat, q.now, q.config.SessionTimeoutTicks)
	if err != nil {
		panic(fmt.Sprintf("quorum: fencing: %v", err))
	}
	if len(records) > 0 {
		q.propose(records)
	}
}

// assignMissingTopicIDs runs the upgrade step of a metadata log written
// before topic ids: the active controller proposes ids for the topics that
// have none (controller.AssignMissingTopicIDs), a bounded batch per tick.
// Deciding against the speculative image, which holds what is proposed,
// it never proposes an id twice; a proposal raft drops is decided again at
// the next tick.
func (q *Quorum) assignMissingTopicIDs() {
	if q.topicIDsAssigned {
		return
	}
	records, err := controller.AssignMissingTopicIDs(q.speculative, q.config.Random)
	if err != nil {
		panic(fmt.Sprintf("quorum: assigning topic ids: %v", err))
	}
	if len(records) > 0 {
		q.propose(records)
		return
	}
	// Topics created from now on come with their id: nothing to look for
	// until the next activation.
	q.topicIDsAssigned = true
}

// rebalanceLeaders runs controller.Rebalance every LeaderRebalanceTicks
// against the speculative image, which holds every election proposed
// before, so none is proposed twice. While a decision leaves eligible
// partitions for another (it is bounded), the next runs at the next tick,
// as KRaft's controller reschedules at once; a proposal raft drops waits
// for the next interval.
func (q *Quorum) rebalanceLeaders() {
	if q.config.LeaderRebalanceTicks == 0 || q.now < q.nextRebalance {
		return
	}
	records, more, err := controller.Rebalance(q.speculative, q.config.LeaderImbalancePercentage)
	if err != nil {
		panic(fmt.Sprintf("quorum: rebalancing leaders: %v", err))
	}
	q.nextRebalance = q.now + q.config.LeaderRebalanceTicks
	if len(records) > 0 && q.propose(records) && more {
		q.nextRebalance = q.now + 1
	}
}

// propose appends records to the log as one entry, and to the speculative
// image. It reports false when raft drops the proposal (too large, or the
// leader is stepping down): nothing was decided then.
func (q *Quorum) propose(records []metadata.Record) bool {
	data := encodeProposal(proposal{controller: q.config.ID, term: q.activeTerm, sequence: q.proposed + 1, records: records})
	if len(data) > q.config.MaxEntryBytes {
		return false
	}
	if err := q.raw.Propose(data); err != nil {
		return false
	}
	q.proposed++
	for _, record := range records {
		entry := metadata.Entry{Offset: q.speculative.Offset() + 1, Record: record}
		if _, err := q.speculative.Apply(entry); err != nil {
			// The decision applied them to a copy of this very image.
			panic(fmt.Sprintf("quorum: a decided record does not apply: %v", err))
		}
	}
	return true
}

// releaseWaiting sends the answers whose proposals have been applied, in
// the order they were decided.
func (q *Quorum) releaseWaiting() {
	if !q.active {
		return
	}
	if q.appliedProposal == q.proposed && q.speculative.Offset() != q.image.Offset() {
		panic(fmt.Sprintf("quorum: every proposal applied, but the speculative image is at %d and the image at %d",
			q.speculative.Offset(), q.image.Offset()))
	}
	released := 0
	for _, w := range q.waiting {
		if w.proposal > q.appliedProposal {
			break
		}
		if w.answer.Heartbeat != nil && w.answer.ErrorCode == 0 {
			q.fillHeartbeat(w.request.From, w.request.Heartbeat, w.answer.Heartbeat)
		}
		q.out = append(q.out, w.answer)
		released++
	}
	q.waiting = q.waiting[released:]
}

// fillHeartbeat gives a heartbeat answer the committed metadata after the
// broker's applied offset: the entries, or a snapshot of the image when the
// broker is behind what the history keeps.
func (q *Quorum) fillHeartbeat(id metadata.BrokerID, request *HeartbeatRequest, answer *HeartbeatAnswer) {
	if state, ok := q.image.Broker(id); ok {
		answer.Fenced, answer.ShuttingDown = state.Fenced, state.ShuttingDown
	}
	from := request.AppliedOffset + 1
	if from > q.image.Offset() {
		return
	}
	if len(q.history) == 0 || from < q.history[0].Offset {
		answer.Snapshot = metadata.EncodeImage(nil, q.image)
		return
	}
	entries := q.history[from-q.history[0].Offset:]
	if request.MaxEntries > 0 && len(entries) > request.MaxEntries {
		entries = entries[:request.MaxEntries]
	}
	answer.Entries = append([]metadata.Entry(nil), entries...)
}

// configsAfter is a resource's configs once records apply to img.
func configsAfter(img *metadata.Image, resource metadata.ConfigResource, records []metadata.Record) map[string]string {
	configs := img.BrokerDefaultConfigs()
	if resource.Type == metadata.ConfigTopic {
		configs = img.TopicConfigs(resource.Name)
	}
	if configs == nil {
		configs = map[string]string{}
	}
	for _, record := range records {
		if change, ok := record.(metadata.ConfigRecord); ok && change.Resource == resource {
			if change.Delete {
				delete(configs, change.Key)
			} else {
				configs[change.Key] = change.Value
			}
		}
	}
	return configs
}
