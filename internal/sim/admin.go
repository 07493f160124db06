package sim

import (
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// adminState is the simulator's admin client: it sends its requests to
// the active controller (or, with none, to nobody: it asks again later)
// and keeps the answers.
type adminState struct {
	nextID  uint64
	answers map[uint64]quorum.Answer
}

// adminRequest sends a request to the active controller and returns its
// id, or 0 when no controller is active.
func (w *world) adminRequest(request quorum.Request) uint64 {
	c := w.activeController()
	if c == nil {
		return 0
	}
	w.admin.nextID++
	request.ID, request.From = w.admin.nextID, adminID
	var err error
	w.withRaft(func() { err = c.q.HandleRequest(request) })
	if err != nil {
		panic(err)
	}
	w.carryOut(c)
	return request.ID
}

func (w *world) adminAnswered(answer quorum.Answer) {
	if w.admin.answers == nil {
		w.admin.answers = map[uint64]quorum.Answer{}
	}
	w.admin.answers[answer.ID] = answer
}

// adminAnswer takes the answer to a request, if it came.
func (w *world) adminAnswer(id uint64) (quorum.Answer, bool) {
	answer, ok := w.admin.answers[id]
	delete(w.admin.answers, id)
	return answer, ok
}

// topicCreator creates the workload's topic: it asks until the controller
// has created it (it needs enough unfenced brokers for its replication
// factor, and an active controller).
type topicCreator struct {
	pending uint64
	askedAt int64
	created bool
}

func (w *world) createTopicStep(t *topicCreator) bool {
	if t.created {
		return true
	}
	if t.pending != 0 {
		if answer, ok := w.adminAnswer(t.pending); ok {
			t.pending = 0
			t.created = answer.ErrorCode == 0
			return t.created
		}
		if w.now-t.askedAt < controllerRequestTicks {
			return false
		}
	}
	t.askedAt = w.now
	t.pending = w.adminRequest(quorum.Request{CreateTopic: &controller.CreateTopicRequest{
		Name: "events", Partitions: w.shape.partitions, ReplicationFactor: w.shape.replicationFactor,
		Config: metadata.TopicConfig{MinInsyncReplicas: w.shape.minInsyncReplicas},
	}})
	return false
}

// electPreferred asks the active controller for a preferred leader
// election over every partition, without waiting for the answer.
func (w *world) electPreferred() uint64 {
	return w.adminRequest(quorum.Request{ElectPreferred: &quorum.ElectPreferredRequest{}})
}

// partitions lists every partition of the newest committed metadata.
func (w *world) partitions() []metadata.TopicPartition {
	var list []metadata.TopicPartition
	for _, state := range w.metadataImage().Partitions() {
		list = append(list, state.TopicPartition)
	}
	return list
}
