package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func initProducerID(t *testing.T, n *Node) (InitProducerIDAnswer, Outbox) {
	t.Helper()
	n.HandleClient(ClientRequest{Client: 5, InitProducerID: &InitProducerIDRequest{ID: 1}})
	outbox := n.TakeOutbox()
	if len(outbox.Clients) != 1 || outbox.Clients[0].InitProducerID == nil {
		t.Fatalf("InitProducerId answered %+v", outbox.Clients)
	}
	return *outbox.Clients[0].InitProducerID, outbox
}

// A broker gives out ids only from blocks the controller handed it, asks
// for the next block before the current one runs out, and makes producers
// retry while it has none.
func TestProducerIDsComeFromControllerBlocks(t *testing.T) {
	n := newTestNode(t, 1)
	answer, outbox := initProducerID(t, n)
	if answer.ErrorCode != kerr.CoordinatorLoadInProgress.Code || !outbox.AllocateProducerIDs {
		t.Fatalf("without a block: %+v, allocate=%t", answer, outbox.AllocateProducerIDs)
	}
	if _, outbox := initProducerID(t, n); outbox.AllocateProducerIDs {
		t.Fatal("asked for a second block while the first request is outstanding")
	}
	n.HandleAllocateProducerIDsResponse(1000, 10, 0)
	for want := int64(1000); want < 1009; want++ {
		answer, outbox := initProducerID(t, n)
		if answer.ErrorCode != 0 || answer.ProducerID != want || answer.ProducerEpoch != 0 {
			t.Fatalf("answer %+v, want producer id %d", answer, want)
		}
		if outbox.AllocateProducerIDs != (want == 1008) {
			t.Fatalf("after giving out %d: allocate=%t, want it only at 90%% of the block", want, outbox.AllocateProducerIDs)
		}
	}
	n.HandleAllocateProducerIDsResponse(5000, 10, 0)
	n.HandleAllocateProducerIDsResponse(7000, 10, 0) // a late answer to a retry: unused
	for _, want := range []int64{1009, 5000, 5001} {
		if answer, _ := initProducerID(t, n); answer.ProducerID != want {
			t.Fatalf("got producer id %d, want %d", answer.ProducerID, want)
		}
	}
}

// A broker asks for its first block of producer ids at its first tick, not
// at its first InitProducerId: the first idempotent producer then gets an
// id at once instead of COORDINATOR_LOAD_IN_PROGRESS and a back-off
// (franz-go's first idempotent write took 1.5 s). An unanswered request is
// asked again after ProposalRetryTicks, and a broker holding a block asks
// no more.
func TestProducerIDsAskedForAtStart(t *testing.T) {
	n := newTestNode(t, 1)
	n.Tick()
	if !n.TakeOutbox().AllocateProducerIDs {
		t.Fatal("no block asked for at the first tick")
	}
	for range n.config.ProposalRetryTicks - 1 {
		n.Tick()
		if n.TakeOutbox().AllocateProducerIDs {
			t.Fatal("asked again before the retry interval")
		}
	}
	n.Tick()
	if !n.TakeOutbox().AllocateProducerIDs {
		t.Fatal("an unanswered request was not asked again")
	}
	n.HandleAllocateProducerIDsResponse(1000, 10, 0)
	for range 2 * n.config.ProposalRetryTicks {
		n.Tick()
		if n.TakeOutbox().AllocateProducerIDs {
			t.Fatal("asked for another block while holding a fresh one")
		}
	}
	if answer, _ := initProducerID(t, n); answer.ErrorCode != 0 || answer.ProducerID != 1000 {
		t.Fatalf("the first producer got %+v, want producer id 1000 at once", answer)
	}
}
