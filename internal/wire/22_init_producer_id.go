package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-v4.
//
// A producer id and epoch for an idempotent producer (KIP-98), which kgo
// and the Java client (3.0+) ask for by default. The broker dedupes by
// (producer id, epoch, sequence) per partition.
//
//   - A transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
//     tide has no transaction coordinator, and the code is not retriable,
//     so a transactional producer fails at once instead of retrying
//     forever. An empty transactional id is INVALID_REQUEST, as in Kafka.
//   - v2 is flexible. v3+ (KIP-360) lets a producer that has an id ask for
//     its epoch to be bumped after an error it can recover from; an id
//     without an epoch, or an epoch without an id, is INVALID_REQUEST.
//     v4 only adds the PRODUCER_FENCED code to the answers.
//   - v5+ (KIP-890 transactions) is not served.

func init() { register(22, 0, 4, (*Handler).handleInitProducerID) }

func (h *Handler) handleInitProducerID(x *exchange) error {
	request := x.request.(*kmsg.InitProducerIDRequest)
	response := request.ResponseKind().(*kmsg.InitProducerIDResponse)
	response.ProducerID, response.ProducerEpoch = int64(NoProducerID), int16(NoProducerEpoch)
	// Below v3 kmsg leaves ProducerID and ProducerEpoch at -1: a fresh id.
	ask := InitProducerIDRequest{ProducerID: ProducerID(request.ProducerID), ProducerEpoch: ProducerEpoch(request.ProducerEpoch)}
	switch {
	case request.TransactionalID != nil && *request.TransactionalID == "":
		response.ErrorCode = kerr.InvalidRequest.Code
	case request.TransactionalID != nil:
		response.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case (ask.ProducerID == NoProducerID) != (ask.ProducerEpoch == NoProducerEpoch):
		response.ErrorCode = kerr.InvalidRequest.Code
	}
	if response.ErrorCode != 0 {
		x.respond(response)
		return nil
	}
	h.backend.InitProducerID(ask, func(answer InitProducerIDAnswer) {
		response.ErrorCode = answer.ErrorCode
		if answer.ErrorCode == 0 {
			response.ProducerID, response.ProducerEpoch = int64(answer.ProducerID), int16(answer.ProducerEpoch)
		}
		x.respond(response)
	})
	return nil
}
