package quorum

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// Request is what a broker (or an admin client, through a broker) asks the
// controller: exactly one of the payloads is set. The shapes follow Kafka's
// BrokerRegistration, BrokerHeartbeat, AlterPartition, CreateTopics,
// DeleteTopics and ElectLeaders.
type Request struct {
	// ID is chosen by the sender and echoed in the answer.
	ID uint64
	// From is the broker that sent it.
	From metadata.BrokerID

	Register       *RegisterRequest
	Heartbeat      *HeartbeatRequest
	AlterPartition *controller.AlterPartitionRequest
	CreateTopic    *controller.CreateTopicRequest
	DeleteTopic    *DeleteTopicRequest
	ElectPreferred *ElectPreferredRequest
	// AllocateProducerIDs asks for a block of producer ids (KIP-730).
	AllocateProducerIDs *AllocateProducerIDsRequest
	// CreatePartitions grows a topic (KIP-195).
	CreatePartitions *controller.CreatePartitionsRequest
	// AlterConfigs changes one resource's configs (AlterConfigs and
	// IncrementalAlterConfigs, controller.AlterConfigs).
	AlterConfigs *controller.AlterConfigsRequest
	// Reassign moves one partition to a new assignment, or cancels its
	// move (KIP-455, controller.Reassign).
	Reassign *controller.ReassignRequest
	// FetchMetadata is a long poll for the committed metadata after the
	// broker's applied offset (KRaft brokers fetch the metadata log).
	FetchMetadata *FetchMetadataRequest
}

// FetchMetadataRequest asks for the committed metadata after AppliedOffset,
// as a KRaft broker's fetch of the metadata log does: the active controller
// holds it until there is something newer or MaxWaitTicks pass, then
// answers it with a HeartbeatAnswer (entries, or a snapshot, and the
// broker's state). It keeps no session alive: heartbeats do that.
type FetchMetadataRequest struct {
	Epoch metadata.BrokerEpoch
	// AppliedOffset is the last metadata offset the broker applied.
	AppliedOffset int64
	// MaxEntries bounds the metadata entries the answer carries.
	MaxEntries int
	// MaxWaitTicks bounds how long the controller holds the request; it is
	// cut to the controller's MaxMetadataWaitTicks.
	MaxWaitTicks int64
}

// AllocateProducerIDsRequest asks for a block of producer ids for the
// broker's incarnation (Kafka's AllocateProducerIdsRequest).
type AllocateProducerIDsRequest struct {
	BrokerEpoch metadata.BrokerEpoch
}

// RegisterRequest registers an incarnation of a broker (Kafka's
// BrokerRegistrationRequest).
type RegisterRequest struct {
	// Incarnation names this process start; a restarted process brings a
	// new one and gets a new broker epoch.
	Incarnation string
	// PreviousEpoch is the epoch of the incarnation whose log this one
	// vouches for after a clean shutdown (KIP-966), or NoBrokerEpoch.
	PreviousEpoch metadata.BrokerEpoch
	// Endpoint is the host:port of the broker's Kafka listener as clients
	// reach it, or empty.
	Endpoint string
}

// HeartbeatRequest keeps a broker's session alive, reports how far it has
// applied the metadata log, and asks for what follows (Kafka's
// BrokerHeartbeatRequest, with the metadata fetch folded in).
type HeartbeatRequest struct {
	Epoch metadata.BrokerEpoch
	// AppliedOffset is the last metadata offset the broker applied.
	AppliedOffset int64
	WantShutdown  bool
	// MaxEntries bounds the metadata entries the answer carries.
	MaxEntries int
}

// DeleteTopicRequest deletes a topic, by name, or by id with an empty Name
// (DeleteTopics v6+, KIP-516); with both, the id must be the named topic's.
type DeleteTopicRequest struct {
	Name string
	ID   metadata.TopicID
}

// ElectPreferredRequest elects each partition's preferred replica where it
// is in the ISR; no partitions means all of them.
type ElectPreferredRequest struct {
	Partitions []metadata.TopicPartition
}

// Answer answers a Request, or tells its sender this node is not the active
// controller (ErrorCode NOT_CONTROLLER, with a hint in Leader).
type Answer struct {
	ID uint64
	To metadata.BrokerID
	// ControllerEpoch is the raft term of the controller that answered. A
	// broker ignores answers from an older epoch than one it has seen: they
	// come from a controller that has since lost its leadership.
	ControllerEpoch uint64
	// Leader is the active controller as this node knows it, or NoBroker.
	Leader    metadata.BrokerID
	ErrorCode int16

	Register       *RegisterAnswer
	Heartbeat      *HeartbeatAnswer
	AlterPartition *controller.AlterPartitionResponse
	ElectPreferred *controller.ElectLeadersResponse
	ProducerIDs    *controller.ProducerIDBlock
	AlterConfigs   *AlterConfigsAnswer
}

// AlterConfigsAnswer carries the message of a refused config change, or
// the resource's configs once the change is decided, for the broker to
// wait until its image shows them.
type AlterConfigsAnswer struct {
	Message string
	Configs map[string]string
}

// RegisterAnswer carries the new incarnation's broker epoch.
type RegisterAnswer struct {
	Epoch metadata.BrokerEpoch
}

// HeartbeatAnswer answers a heartbeat or a metadata fetch. It carries the committed metadata that follows the broker's
// applied offset: entries in order, or, when the broker is further behind
// than the controller keeps entries, a snapshot of the image to load first.
type HeartbeatAnswer struct {
	// Snapshot, when set, is an encoded metadata.Image the broker loads in
	// place of everything up to its offset; Entries follow it.
	Snapshot []byte
	Entries  []metadata.Entry
	// Fenced and ShuttingDown are the broker's state as the committed
	// metadata says.
	Fenced       bool
	ShuttingDown bool
}

func (r Request) String() string {
	switch {
	case r.Register != nil:
		return fmt.Sprintf("register b%d incarnation=%s previous-epoch=%d", r.From, r.Register.Incarnation, r.Register.PreviousEpoch)
	case r.Heartbeat != nil:
		return fmt.Sprintf("heartbeat b%d epoch=%d applied=%d shutdown=%t", r.From, r.Heartbeat.Epoch, r.Heartbeat.AppliedOffset, r.Heartbeat.WantShutdown)
	case r.AlterPartition != nil:
		return fmt.Sprintf("alter-partition from b%d (%d partitions)", r.From, len(r.AlterPartition.Partitions))
	case r.CreateTopic != nil:
		return fmt.Sprintf("create-topic %s", r.CreateTopic.Name)
	case r.DeleteTopic != nil:
		return fmt.Sprintf("delete-topic %s", r.DeleteTopic.Name)
	case r.ElectPreferred != nil:
		return fmt.Sprintf("elect-preferred %v", r.ElectPreferred.Partitions)
	case r.CreatePartitions != nil:
		return fmt.Sprintf("create-partitions %s count=%d", r.CreatePartitions.Topic, r.CreatePartitions.Count)
	case r.AlterConfigs != nil:
		return fmt.Sprintf("alter-configs %s (%d changes)", r.AlterConfigs.Resource, len(r.AlterConfigs.Changes))
	case r.Reassign != nil:
		return fmt.Sprintf("reassign %s to %v", r.Reassign.TopicPartition, r.Reassign.Replicas)
	case r.AllocateProducerIDs != nil:
		return fmt.Sprintf("allocate-producer-ids b%d epoch=%d", r.From, r.AllocateProducerIDs.BrokerEpoch)
	case r.FetchMetadata != nil:
		return fmt.Sprintf("fetch-metadata b%d epoch=%d applied=%d wait=%d", r.From, r.FetchMetadata.Epoch, r.FetchMetadata.AppliedOffset,
			r.FetchMetadata.MaxWaitTicks)
	}
	return "empty request"
}
