package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments: v0-v1 (KIP-455; v1 KIP-860).
//
// Each partition moves to the replicas named, or with null replicas has
// its move cancelled. The controller decides each partition on its own
// (controller.Reassign): the target replicas are added first, join the ISR
// as followers catching up, and only then are the others taken out (rule
// reassignment-completes-in-isr), so an answer of NONE means the move has
// begun (or is done, when it adds nothing); ListPartitionReassignments
// shows it in progress. The Backend answers once this broker's metadata
// shows the move.
//
//   - Codes, as Kafka's controller gives them: UNKNOWN_TOPIC_OR_PARTITION,
//     NO_REASSIGNMENT_IN_PROGRESS for a cancellation with none,
//     INVALID_REPLICA_ASSIGNMENT for an empty target, a broker named twice
//     or not registered, or a cancellation that would leave no ISR.
//   - Unlike Kafka, a target of another size than the topic's replication
//     factor is refused: INVALID_REPLICA_ASSIGNMENT, or with v1's
//     AllowReplicationFactorChange false INVALID_REPLICATION_FACTOR, which
//     is Kafka's answer then (docs/compatibility.md).
//   - Entries are carried out in request order, each its own decision: a
//     partition named twice is moved twice, the second target replacing
//     the first, as a later request's would.
//   - The top-level error is NONE: tide has no authorization to refuse.
//     Every version is flexible; the response echoes v1's
//     AllowReplicationFactorChange.

func init() { register(45, 0, 1, (*Handler).handleAlterPartitionReassignments) }

func (h *Handler) handleAlterPartitionReassignments(x *exchange) error {
	request := x.request.(*kmsg.AlterPartitionAssignmentsRequest)
	count := 0
	for _, topic := range request.Topics {
		count += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), count); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	response.AllowReplicationFactorChange = request.AllowReplicationFactorChange
	var forward []controller.ReassignRequest
	var positions [][2]int // topic and partition index of each forwarded entry
	for i, topic := range request.Topics {
		entry := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		entry.Topic = topic.Topic
		for j, partition := range topic.Partitions {
			answer := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			answer.Partition = partition.Partition
			move := reassignRequest(topic.Topic, partition)
			if code := h.refuseReplicationFactorChange(request, move); code != 0 {
				answer.ErrorCode = code
				answer.ErrorMessage = kmsg.StringPtr("the target changes the replication factor, which the request does not allow")
			} else {
				forward = append(forward, move)
				positions = append(positions, [2]int{i, j})
			}
			entry.Partitions = append(entry.Partitions, answer)
		}
		response.Topics = append(response.Topics, entry)
	}
	if len(forward) == 0 {
		x.respond(response)
		return nil
	}
	h.backend.Reassign(forward, h.config.ticks(request.TimeoutMillis), func(codes []int16) {
		if len(codes) != len(forward) {
			panic(fmt.Sprintf("wire: a Backend answered %d codes to %d reassignments", len(codes), len(forward)))
		}
		for k, code := range codes {
			answer := &response.Topics[positions[k][0]].Partitions[positions[k][1]]
			answer.ErrorCode = code
			if code != 0 {
				answer.ErrorMessage = kmsg.StringPtr(reassignMessage(forward[k], code))
			}
		}
		x.respond(response)
	})
	return nil
}

// reassignRequest translates one partition; null replicas (a
// cancellation) stay nil, told apart from an empty target.
func reassignRequest(topic string, partition kmsg.AlterPartitionAssignmentsRequestTopicPartition) controller.ReassignRequest {
	move := controller.ReassignRequest{TopicPartition: metadata.TopicPartition{Topic: topic, Partition: partition.Partition}}
	if partition.Replicas != nil {
		move.Replicas = make([]metadata.BrokerID, len(partition.Replicas))
		for i, id := range partition.Replicas {
			move.Replicas[i] = metadata.BrokerID(id)
		}
	}
	return move
}

// refuseReplicationFactorChange is v1's check (KIP-860): with
// AllowReplicationFactorChange false, a target of another size than the
// topic's replication factor is INVALID_REPLICATION_FACTOR. Any other
// size change the controller refuses itself.
func (h *Handler) refuseReplicationFactorChange(request *kmsg.AlterPartitionAssignmentsRequest, move controller.ReassignRequest) int16 {
	if request.Version < 1 || request.AllowReplicationFactorChange || move.Replicas == nil {
		return 0
	}
	topic, ok := h.backend.Topic(move.Topic)
	if ok && len(move.Replicas) != topic.Config.ReplicationFactor {
		return kerr.InvalidReplicationFactor.Code
	}
	return 0
}

// reassignMessage explains a refusal.
func reassignMessage(move controller.ReassignRequest, code int16) string {
	switch code {
	case kerr.InvalidReplicaAssignment.Code:
		if move.Replicas == nil {
			return fmt.Sprintf("cancelling the reassignment of %s would leave it no in-sync replica", move.TopicPartition)
		}
		return fmt.Sprintf("the target %v of %s must be the topic's replication factor of distinct registered brokers",
			move.Replicas, move.TopicPartition)
	case kerr.NoReassignmentInProgress.Code:
		return fmt.Sprintf("%s is not being reassigned", move.TopicPartition)
	}
	return controller.CodeName(code)
}
