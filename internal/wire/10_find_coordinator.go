package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// FindCoordinator: v0-v6.
//
// Where a consumer group's coordinator is: the leader of the
// __consumer_offsets partition the group id hashes to (Kafka's
// partitionFor, Java's String.hashCode), as this broker's metadata has it
// (Backend.GroupCoordinator). No client computes the placement; every one
// asks here, then sends its group requests to the broker answered.
//
//   - v0 names a group; v1-v3 add KeyType (0 GROUP, 1 TRANSACTION) and an
//     ErrorMessage; v3 is flexible; v4+ batches keys (KIP-699), each with
//     its own entry and code (ErrorMessage left null, as Kafka leaves it);
//     v5 only adds TRANSACTION_ABORTABLE to the codes (KIP-890); v6 adds
//     KeyType 2, SHARE (KIP-932).
//   - The first request creates __consumer_offsets (Backend.GroupCoordinator)
//     and is answered COORDINATOR_NOT_AVAILABLE, as every request is
//     until it exists and the partition has a leader; clients retry.
//   - Whether the coordinator has loaded its groups is not checked here:
//     the group requests themselves answer COORDINATOR_LOAD_IN_PROGRESS or
//     NOT_COORDINATOR, as in Kafka.
//   - TRANSACTION keys are answered COORDINATOR_NOT_AVAILABLE: tide has no
//     transaction coordinator yet (InitProducerId refuses transactional
//     ids). SHARE keys, and any other key type, are INVALID_REQUEST: tide
//     has no share groups.
//   - An error answers "no node": node -1, host "", port -1.

func init() { register(10, 0, 6, (*Handler).handleFindCoordinator) }

// The coordinator key types (Kafka's CoordinatorType).
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

func (h *Handler) handleFindCoordinator(x *exchange) error {
	request := x.request.(*kmsg.FindCoordinatorRequest)
	response := request.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if request.Version < 4 {
		node, code := h.findCoordinator(request.CoordinatorKey, request.CoordinatorType)
		response.ErrorCode, response.NodeID, response.Host, response.Port = code, int32(node.ID), node.Host, node.Port
		if code != 0 {
			message := kerr.ErrorForCode(code).Error()
			response.ErrorMessage = &message
		}
		x.respond(response)
		return nil
	}
	if err := h.checkCounts(len(request.CoordinatorKeys), len(request.CoordinatorKeys)); err != nil {
		return err
	}
	for _, key := range request.CoordinatorKeys {
		node, code := h.findCoordinator(key, request.CoordinatorType)
		entry := kmsg.NewFindCoordinatorResponseCoordinator()
		entry.Key, entry.ErrorCode, entry.NodeID, entry.Host, entry.Port = key, code, int32(node.ID), node.Host, node.Port
		response.Coordinators = append(response.Coordinators, entry)
	}
	x.respond(response)
	return nil
}

// noNode is the node of an answer with an error.
var noNode = Broker{ID: metadata.NoBroker, Host: "", Port: -1}

// findCoordinator answers one key: its coordinator's endpoint, or noNode
// and a code.
func (h *Handler) findCoordinator(key string, keyType int8) (Broker, int16) {
	switch keyType {
	case coordinatorGroup:
	case coordinatorTransaction:
		return noNode, kerr.CoordinatorNotAvailable.Code
	default:
		return noNode, kerr.InvalidRequest.Code
	}
	id, code := h.backend.GroupCoordinator(key)
	if code != 0 {
		return noNode, code
	}
	for _, broker := range h.backend.Cluster().Brokers {
		if broker.ID == id {
			return broker, 0
		}
	}
	// The leader is not a broker clients can reach (fenced, or its address
	// unknown): as Kafka answers a leader not alive on the listener.
	return noNode, kerr.CoordinatorNotAvailable.Code
}
