package frontend

import (
	"slices"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// Reassign forwards one Reassign per partition to the active controller
// (AlterPartitionReassignments, KIP-455), in order; each is answered once
// this broker's image shows what the controller decided: the move in
// progress toward the target, or done; a cancellation, no move. A later
// change that overtakes it (another move, say) leaves the wait to its
// time limit, and the answer is the controller's all the same.
func (b *backend) Reassign(moves []controller.ReassignRequest, timeoutTicks int64, done func([]int16)) {
	requests := make([]quorum.Request, len(moves))
	visible := make([]func(*metadata.Image) bool, len(moves))
	for i, move := range moves {
		requests[i] = quorum.Request{Reassign: &move}
		visible[i] = func(img *metadata.Image) bool {
			state, ok := img.Partition(move.TopicPartition)
			switch {
			case !ok:
				return true
			case move.Replicas == nil:
				return !state.Reassigning()
			}
			return slices.Equal(state.Target(), move.Replicas)
		}
	}
	b.forwardEach(requests, visible, timeoutTicks, done)
}
