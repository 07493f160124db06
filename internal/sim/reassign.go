package sim

import (
	"math/rand/v2"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// The reassignment fault (KIP-455): under the workload's load and every
// other fault, the admin client moves a partition of the workload topic to
// other brokers (often off its leader), replaces a move in progress, or
// cancels one, with AlterPartitionReassignments to a random broker, and
// lists the moves with ListPartitionReassignments. The invariants hold
// through the move because of rule reassignment-completes-in-isr; with it
// off the controller completes the move at once, the new replicas taken
// for in sync, and the checker finds the failure (a high watermark that
// goes back, an acknowledged write lost).

// reassignStream seeds the reassignment fault's draws (with the seed): its
// rate and each move come from a stream of their own, so that a seed runs
// as it did before the fault existed until its first move.
const reassignStream = 0x72656173736967

// reassignState is the fault's own state.
type reassignState struct {
	random *rand.Rand
	// pending are the moves the controller accepted, until the metadata
	// shows them finished or superseded.
	pending []pendingMove
}

type pendingMove struct {
	tp     metadata.TopicPartition
	target []metadata.BrokerID
}

// drawReassign draws the fault's rate: half the seeds move partitions.
func (s *shape) drawReassign(random *rand.Rand) {
	if random.IntN(2) == 0 {
		s.reassignRate = 0.0005 + random.Float64()*0.003
	}
}

// maybeReassign draws whether a move happens this tick, and follows the
// moves in progress.
func (w *world) maybeReassign() {
	w.followMoves()
	r := w.reassign.random
	if r.Float64() >= w.shape.reassignRate || w.now < w.options.FaultsFrom {
		return
	}
	partitions := w.workloadPartitions()
	if len(partitions) == 0 {
		return
	}
	state := partitions[r.IntN(len(partitions))]
	var target []metadata.BrokerID
	switch {
	case state.Reassigning() && r.IntN(2) == 0:
		// Cancel: target stays nil.
	case r.IntN(10) == 0:
		target = w.drawTarget(r, len(state.Replicas)+1) // refused: tide keeps the replication factor
	default:
		target = w.drawTarget(r, len(state.Target()))
	}
	w.stats.reassignments++
	w.trace("reassign %s from %v to %v", state.TopicPartition, state.Replicas, target)
	w.sendReassign(r, state.TopicPartition, target)
}

// drawTarget draws size distinct brokers, in a random order (the first
// the preferred leader), or nil when there are not enough.
func (w *world) drawTarget(r *rand.Rand, size int) []metadata.BrokerID {
	if size > len(w.brokers) {
		return nil
	}
	ids := make([]metadata.BrokerID, len(w.brokers))
	for i := range ids {
		ids[i] = metadata.BrokerID(i + 1)
	}
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids[:size]
}

// sendReassign asks a random broker to move a partition (nil target:
// cancel its move), then asks another for the moves in progress.
func (w *world) sendReassign(r *rand.Rand, tp metadata.TopicPartition, target []metadata.BrokerID) {
	request := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	request.Version, request.TimeoutMillis = int16(w.now%2), 5_000
	topic := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	topic.Topic = tp.Topic
	entry := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	entry.Partition = tp.Partition
	if target != nil {
		entry.Replicas = make([]int32, len(target))
		for i, id := range target {
			entry.Replicas[i] = int32(id)
		}
	}
	topic.Partitions = append(topic.Partitions, entry)
	request.Topics = append(request.Topics, topic)
	to := metadata.BrokerID(1 + r.IntN(len(w.brokers)))
	w.client(adminClient).send(to, request, func(response kmsg.Response, ok bool) {
		answer, decoded := response.(*kmsg.AlterPartitionAssignmentsResponse)
		if !ok || !decoded || len(answer.Topics) != 1 || len(answer.Topics[0].Partitions) != 1 {
			return
		}
		code := answer.Topics[0].Partitions[0].ErrorCode
		w.trace("reassign %s to %v answered %s", tp, target, controller.CodeName(code))
		if code == 0 && target != nil {
			w.stats.reassignmentsStarted++
			w.reassign.pending = append(w.reassign.pending, pendingMove{tp: tp, target: target})
		}
	})
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	if w.now%2 == 0 {
		named := kmsg.NewListPartitionReassignmentsRequestTopic()
		named.Topic, named.Partitions = tp.Topic, []int32{tp.Partition}
		list.Topics = append(list.Topics, named)
	}
	w.client(adminClient).send(metadata.BrokerID(1+r.IntN(len(w.brokers))), list, func(kmsg.Response, bool) {})
}

// followMoves counts the accepted moves the committed metadata shows
// finished: the partition on its target and no longer moving. A move
// replaced by another, or cancelled, is dropped uncounted.
func (w *world) followMoves() {
	if len(w.reassign.pending) == 0 {
		return
	}
	image := w.metadataImage()
	kept := w.reassign.pending[:0]
	for _, move := range w.reassign.pending {
		state, ok := image.Partition(move.tp)
		switch {
		case ok && !state.Reassigning() && slices.Equal(state.Replicas, move.target):
			w.stats.reassignmentsFinished++
			w.trace("%s finished moving to %v", move.tp, move.target)
		case ok && state.Reassigning() && slices.Equal(state.Target(), move.target):
			kept = append(kept, move)
		case ok && !state.Reassigning() && w.now%100 != 0:
			// Not yet shown in progress (the answer may come before the
			// image here has it): look again, and give up in time.
			kept = append(kept, move)
		}
	}
	w.reassign.pending = kept
}

// Reassignments returns the reassignment fault's counts: moves asked for,
// accepted by the controller, and finished.
func (s Stats) Reassignments() (requested, started, finished int) {
	return s.reassignments, s.reassignmentsStarted, s.reassignmentsFinished
}
