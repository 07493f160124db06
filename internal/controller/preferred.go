package controller

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ElectLeadersResponse answers ElectPreferred: a top-level code, and one
// result per partition asked for, in request order.
type ElectLeadersResponse struct {
	ErrorCode int16
	Results   []ElectionResult
}

// ElectionResult is one partition's answer to ElectPreferred.
type ElectionResult struct {
	metadata.TopicPartition
	ErrorCode int16
}

// ElectPreferred runs Kafka's ElectLeaders with election type PREFERRED: for
// each partition, hand leadership back to the first replica of its
// assignment, the preferred leader, so that leadership spreads over the
// brokers again after failovers moved it.
//
// The preferred replica is elected only if it is in the ISR and eligible
// (registered, unfenced, not shutting down): it then holds every committed
// record. Never electing outside the ISR is what makes this admin call safe;
// a preferred election that promoted a lagging replica would truncate
// committed records on the others. Per partition: NONE with a
// PartitionChange (leader epoch + 1, partition epoch + 1, ISR and ELR
// unchanged); ELECTION_NOT_NEEDED if it already leads;
// PREFERRED_LEADER_NOT_AVAILABLE if it is not an eligible ISR member;
// UNKNOWN_TOPIC_OR_PARTITION; REASSIGNMENT_IN_PROGRESS for a partition
// being reassigned (reassign.go), which tide skips. More than MaxPartitionsPerRequest partitions
// is INVALID_REQUEST for the whole request.
func ElectPreferred(img *metadata.Image, partitions []metadata.TopicPartition) ([]metadata.Record, ElectLeadersResponse, error) {
	if len(partitions) > MaxPartitionsPerRequest {
		return nil, ElectLeadersResponse{ErrorCode: kerr.InvalidRequest.Code}, nil
	}
	d := newDecision(img)
	response := ElectLeadersResponse{Results: make([]ElectionResult, 0, len(partitions))}
	for _, tp := range partitions {
		code, err := d.electPreferred(tp)
		if err != nil {
			return nil, ElectLeadersResponse{}, err
		}
		response.Results = append(response.Results, ElectionResult{TopicPartition: tp, ErrorCode: code})
	}
	return d.records, response, nil
}

func (d *decision) electPreferred(tp metadata.TopicPartition) (int16, error) {
	partition, ok := d.image.Partition(tp)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, nil
	}
	if partition.Reassigning() {
		// Leadership moves when the reassignment completes (or is
		// cancelled); an election now would be churn for clients, and
		// the preferred replica may be one still being added.
		return kerr.ReassignmentInProgress.Code, nil
	}
	preferred := partition.Replicas[0]
	if partition.Leader == preferred {
		return kerr.ElectionNotNeeded.Code, nil
	}
	if !partition.InISR(preferred) || !d.image.Active(preferred) {
		return kerr.PreferredLeaderNotAvailable.Code, nil
	}
	change := metadata.PartitionChange{
		TopicPartition:      tp,
		Leader:              preferred,
		ISR:                 partition.ISR,
		ELR:                 partition.ELR,
		LeaderEpoch:         partition.LeaderEpoch + 1,
		PartitionEpoch:      partition.PartitionEpoch + 1,
		LeaderRecoveryState: partition.LeaderRecoveryState,
	}
	if err := d.append(change); err != nil {
		return 0, err
	}
	return 0, nil
}
