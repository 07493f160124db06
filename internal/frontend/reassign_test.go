package frontend

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// Each move goes to the controller as a Reassign of its own, in order, a
// cancellation's nil target kept; a refusal is answered as the controller
// gave it, and a success waits for this broker's metadata to show the
// move (here it never does: the answer comes at the time limit).
func TestReassignForwardsEachMove(t *testing.T) {
	fe := newTestFrontEnd(t)
	b := (*backend)(fe)
	moves := []controller.ReassignRequest{
		{TopicPartition: metadata.TopicPartition{Topic: "orders"}, Replicas: []metadata.BrokerID{2, 3}},
		{TopicPartition: metadata.TopicPartition{Topic: "orders", Partition: 1}},
	}
	var codes []int16
	b.Reassign(moves, 30, func(answer []int16) { codes = answer })
	var sent []quorum.Request
	for _, outgoing := range fe.Flush().Controller {
		if outgoing.Request.Reassign != nil {
			sent = append(sent, outgoing.Request)
		}
	}
	if len(sent) != 2 || !reflect.DeepEqual(*sent[0].Reassign, moves[0]) || sent[1].Reassign.Replicas != nil {
		t.Fatalf("forwarded %v", sent)
	}
	fe.HandleControllerAnswer(quorum.Answer{ID: sent[1].ID, ErrorCode: kerr.NoReassignmentInProgress.Code})
	fe.HandleControllerAnswer(quorum.Answer{ID: sent[0].ID})
	if codes != nil {
		t.Fatalf("answered %v before this broker's metadata showed the move", codes)
	}
	for range defaultCallTimeoutTicks + 1 {
		fe.Tick()
	}
	if !reflect.DeepEqual(codes, []int16{0, kerr.NoReassignmentInProgress.Code}) {
		t.Fatalf("codes %v", codes)
	}
}
