package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// InitProducerIDRequest is Kafka's InitProducerId without a transactional
// id: an idempotent producer asks for its producer id and epoch.
type InitProducerIDRequest struct {
	// ID is chosen by the client and echoed in the answer.
	ID uint64
}

// InitProducerIDAnswer answers it. COORDINATOR_LOAD_IN_PROGRESS (retriable)
// means the broker is waiting for a block of ids from the controller.
type InitProducerIDAnswer struct {
	ID            uint64
	ErrorCode     int16
	ProducerID    int64
	ProducerEpoch int16
}

// producerIDBlock is a block [first, end) of producer ids, of which
// [next, end) are not yet given out.
type producerIDBlock struct {
	first, next, end int64
}

func (b producerIDBlock) remaining() int64 { return b.end - b.next }

// producerIDs is the broker's share of producer ids (Kafka's
// RPCProducerIdManager, KIP-730): the block the controller handed it, and
// the next one, asked for before the first runs out so producers rarely
// wait. Ids come only from blocks the controller committed to the metadata
// log, so no two producers ever get the same id, across broker and
// controller restarts alike; the ids of a block a broker never finished are
// simply never used.
type producerIDs struct {
	current   producerIDBlock
	following producerIDBlock
	// requestedTick is when the outstanding AllocateProducerIds was sent,
	// or -1 when none is.
	requestedTick int64
}

// prefetchPercent is how much of a block is given out before the next is
// asked for, as Kafka's RPCProducerIdManager does at 90%.
const prefetchPercent = 90

// HandleInitProducerID gives an idempotent producer the next id of the
// broker's block, with epoch 0: a new id, never one given before, so its
// sequence numbers start afresh on every partition.
func (n *Node) HandleInitProducerID(client ClientID, request InitProducerIDRequest) {
	answer := InitProducerIDAnswer{ID: request.ID, ProducerID: -1, ProducerEpoch: -1}
	ids := &n.producerIDs
	if ids.current.remaining() == 0 && ids.following.remaining() > 0 {
		ids.current, ids.following = ids.following, producerIDBlock{}
	}
	if ids.current.remaining() == 0 {
		answer.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	} else {
		answer.ProducerID, answer.ProducerEpoch = ids.current.next, 0
		ids.current.next++
	}
	n.maybeRequestProducerIDs()
	n.outbox.Clients = append(n.outbox.Clients, ClientAnswer{Client: client, InitProducerID: &answer})
}

// maybeRequestProducerIDs asks the controller for the next block when the
// current one is nearly used and no next one is held or asked for, or when
// the last request went unanswered for ProposalRetryTicks (it or its answer
// was lost).
func (n *Node) maybeRequestProducerIDs() {
	ids := &n.producerIDs
	if ids.following.remaining() > 0 {
		return
	}
	size := ids.current.end - ids.current.first
	if ids.current.remaining()*100 > size*(100-prefetchPercent) {
		return
	}
	if ids.requestedTick >= 0 && n.now-ids.requestedTick < n.config.ProposalRetryTicks {
		return
	}
	ids.requestedTick = n.now
	n.outbox.AllocateProducerIDs = true
}

// HandleAllocateProducerIDsResponse takes the controller's answer: a block
// [first, first+length) committed to the metadata log for this broker. An
// answer to an earlier, retried request may bring a block the broker no
// longer needs; its ids are left unused, never given out twice.
func (n *Node) HandleAllocateProducerIDsResponse(first, length int64, errorCode int16) {
	ids := &n.producerIDs
	ids.requestedTick = -1
	if errorCode != 0 || length <= 0 {
		return
	}
	block := producerIDBlock{first: first, next: first, end: first + length}
	switch {
	case ids.current.remaining() == 0:
		ids.current = block
	case ids.following.remaining() == 0 && first >= ids.current.end:
		ids.following = block
	}
}
