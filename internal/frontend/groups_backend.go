package frontend

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// GroupCoordinator is the leader of the group's __consumer_offsets
// partition in this broker's image. While the topic does not exist the
// answer is COORDINATOR_NOT_AVAILABLE, and the broker asks the controller
// to create it (createOffsetsTopic), as Kafka's brokers do on the first
// FindCoordinator. A broker past its session lease does not name itself
// (rule coordinator-lease): the controller may have moved the partition,
// and the client would take the stale coordinator's answers.
func (b *backend) GroupCoordinator(groupID string) (metadata.BrokerID, int16) {
	node := b.node()
	if node == nil {
		return metadata.NoBroker, kerr.CoordinatorNotAvailable.Code
	}
	topic, ok := node.Image().Topic(wire.OffsetsTopic)
	if !ok {
		b.createOffsetsTopic()
		return metadata.NoBroker, kerr.CoordinatorNotAvailable.Code
	}
	partition := group.PartitionFor(groupID, int32(len(topic.Partitions)))
	for _, state := range topic.Partitions {
		if state.Partition != partition || state.Leader == metadata.NoBroker {
			continue
		}
		if state.Leader == b.config.ID && b.frontEnd().groupConfig().Rules.On(rules.CoordinatorLease) && !b.lifecycle.HoldsSessionLease() {
			return metadata.NoBroker, kerr.CoordinatorNotAvailable.Code
		}
		return state.Leader, 0
	}
	return metadata.NoBroker, kerr.CoordinatorNotAvailable.Code
}

// GroupPartition is Kafka's partitionFor over the topic's partition count.
func (b *backend) GroupPartition(groupID string) int32 {
	count := b.frontEnd().offsetsPartitionCount()
	if count == 0 {
		return wire.NoGroupPartition
	}
	return group.PartitionFor(groupID, int32(count))
}

// Group hands the request to the coordinator of the group's partition, if
// this broker hosts it; otherwise NOT_COORDINATOR.
func (b *backend) Group(groupID string, client wire.GroupClient, request kmsg.Request, done func(kmsg.Response, int16)) {
	partition := b.GroupPartition(groupID)
	if partition == wire.NoGroupPartition {
		done(nil, kerr.NotCoordinator.Code)
		return
	}
	b.frontEnd().handleGroup(partition, client, request, done)
}

// ListGroups asks every hosted coordinator, in partition order.
func (b *backend) ListGroups(request *kmsg.ListGroupsRequest, done func([]*kmsg.ListGroupsResponse)) {
	fe := b.frontEnd()
	hosted := fe.hostedCoordinators()
	answers := make([]*kmsg.ListGroupsResponse, len(hosted))
	awaited := len(hosted) + 1
	arrive := func() {
		if awaited--; awaited == 0 {
			done(answers)
		}
	}
	for i, coordinator := range hosted {
		fe.handleGroup(coordinator.partition, wire.GroupClient{}, request, func(response kmsg.Response, code int16) {
			listed, ok := response.(*kmsg.ListGroupsResponse)
			if !ok {
				listed = request.ResponseKind().(*kmsg.ListGroupsResponse)
				listed.ErrorCode = max(code, kerr.UnknownServerError.Code)
			}
			answers[i] = listed
			arrive()
		})
	}
	arrive()
}

// createOffsetsTopic asks the controller for __consumer_offsets, once at a
// time: offsets.topic.num.partitions partitions, offsets.topic.replication.factor
// replicas (at most the brokers registered, so a smaller cluster still gets
// its groups), compacted, as Kafka creates it. Its answer is awaited by no
// one: FindCoordinator keeps answering COORDINATOR_NOT_AVAILABLE until the
// topic is in this broker's image.
func (b *backend) createOffsetsTopic() {
	if b.groups.creating {
		return
	}
	node := b.node()
	partitions := b.config.OffsetsTopicPartitions
	if partitions <= 0 {
		partitions = DefaultOffsetsTopicPartitions
	}
	replicationFactor := b.config.OffsetsTopicReplicationFactor
	if replicationFactor <= 0 {
		replicationFactor = DefaultOffsetsTopicReplicationFactor
	}
	replicationFactor = max(1, min(replicationFactor, len(node.Image().Brokers())))
	b.groups.creating = true
	create := controller.CreateTopicRequest{Name: wire.OffsetsTopic, Partitions: partitions, ReplicationFactor: replicationFactor,
		Config:  metadata.TopicConfig{ReplicationFactor: replicationFactor},
		Configs: map[string]string{"cleanup.policy": "compact"}}
	b.callController(quorum.Request{CreateTopic: &create}, defaultCallTimeoutTicks, func(quorum.Answer) {
		b.groups.creating = false
	})
}
