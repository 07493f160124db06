package quorum

import (
	"github.com/tidelog/tide/internal/codec"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// kindReassign is a Reassign request (one partition of
// AlterPartitionReassignments, KIP-455); its answer is a code.
const kindReassign byte = 64

// encodeReassign writes the partition and its target, a nil target (a
// cancellation) told apart from an empty one.
func encodeReassign(e *codec.Encoder, r *controller.ReassignRequest) {
	e.String(r.Topic)
	e.Varint(int64(r.Partition))
	metadata.AppendBrokers(e, r.Replicas)
}

func decodeReassign(d *codec.Decoder) *controller.ReassignRequest {
	r := &controller.ReassignRequest{TopicPartition: metadata.TopicPartition{Topic: d.String(maxWireName), Partition: d.Int32()}}
	r.Replicas = metadata.ReadBrokers(d)
	return r
}

// decideReassign runs controller.Reassign with the node's rules: all on,
// but in the simulator showing what rule reassignment-completes-in-isr
// prevents.
func (q *Quorum) decideReassign(img *metadata.Image, request *controller.ReassignRequest, answer *Answer) ([]metadata.Record, error) {
	records, code, err := controller.Reassign(img, *request, q.config.Rules)
	answer.ErrorCode = code
	return records, err
}
