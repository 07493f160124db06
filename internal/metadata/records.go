package metadata

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// Record is one entry of the metadata log. The set is sealed (the marker
// method is unexported) so that Image.Apply can be exhaustive: a record type
// the image does not know how to apply cannot exist.
//
// Records are decided by the controller against the image that already holds
// every record it decided before, and reach every broker only through the
// log, in log order (KRaft). That order is what removes the KAFKA-4414 class
// of bugs, where leader changes reached brokers as separate pushes that could
// arrive out of order.
type Record interface {
	isRecord()
	String() string
}

// RegisterBroker records that a broker (re)registered. A new incarnation (a
// restarted process) gets a new, larger epoch: the controller uses the
// metadata log offset at which this record lands, as KRaft does, so epochs
// grow cluster-wide and requests from an older incarnation can be told apart
// and rejected (KIP-380, KIP-903). A newly registered broker starts fenced: it
// may not lead or join an ISR until it has caught up with the metadata log and
// the controller unfences it.
type RegisterBroker struct {
	ID          BrokerID
	Epoch       BrokerEpoch
	Incarnation string
	// Endpoint is the host:port where clients reach the broker's Kafka
	// listener (Kafka's BrokerRegistration listeners), or empty when the
	// broker gave none: Metadata lists it only where configuration names
	// its address.
	Endpoint string
}

// UnfenceBroker records that a registered broker caught up with the metadata
// log and heartbeats: it may lead and join ISRs again.
type UnfenceBroker struct {
	ID    BrokerID
	Epoch BrokerEpoch
}

// FenceBroker records that a broker missed its session (or finished its
// controlled shutdown). The controller writes it only after the partition
// changes that move the broker's leaderships away and take it out of every
// ISR, so no state ever has a fenced leader or ISR member (KIP-841).
type FenceBroker struct {
	ID    BrokerID
	Epoch BrokerEpoch
}

// BeginControlledShutdown records that a broker asked to shut down. Like
// FenceBroker it follows the partition changes that moved its leaderships
// away first (KAFKA-3670), so clients never see a leader that is about to
// disappear.
type BeginControlledShutdown struct {
	ID    BrokerID
	Epoch BrokerEpoch
}

// UnregisterBroker removes a broker from the cluster. It follows the
// partition changes that take the broker out of every ISR and ELR.
type UnregisterBroker struct {
	ID    BrokerID
	Epoch BrokerEpoch
}

// TopicConfig holds the per-topic settings the controller needs to decide
// elections and ISR changes.
type TopicConfig struct {
	// ReplicationFactor is the number of replicas each partition was created
	// with.
	ReplicationFactor int
	// MinInsyncReplicas is min.insync.replicas: acks=all writes need an ISR
	// at least this large, the high watermark does not advance below it
	// (KAFKA-15583), and members removed from an ISR smaller than it stay
	// eligible as leaders in the ELR (KIP-966).
	MinInsyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable: when no ISR
	// or ELR member can lead, elect any live replica, accepting the loss of
	// committed records it does not have.
	UncleanLeaderElection bool
}

func (c TopicConfig) String() string {
	return fmt.Sprintf("replication-factor=%d min-insync-replicas=%d unclean-leader-election=%t",
		c.ReplicationFactor, c.MinInsyncReplicas, c.UncleanLeaderElection)
}

// CreateTopic records a new topic with its configuration and the initial
// state of every partition, indexed 0..len(Partitions)-1.
type CreateTopic struct {
	Name string
	// ID is the topic's id (KIP-516), drawn by the controller; NoTopicID in
	// records written by builds before topic ids.
	ID         TopicID
	Config     TopicConfig
	Partitions []PartitionState
}

// DeleteTopic removes a topic and all its partitions.
type DeleteTopic struct {
	Name string
}

// PartitionChange records the new state of one partition.
//
// Unlike Kafka's PartitionChangeRecord, which carries only the fields that
// change and leaves the epochs to be incremented by whoever applies it, this
// record carries the full new state, epochs included. Applying it needs no
// knowledge of the previous state beyond the staleness check, a stale change
// (an older or equal partition epoch, or an older leader epoch) is recognised
// and ignored instead of being merged into a newer state, and a log reader
// sees every partition's exact state at every offset. The cost is a few bytes
// per record.
type PartitionChange struct {
	TopicPartition
	Leader BrokerID
	ISR    []BrokerID
	ELR    []BrokerID
	// Replicas is the new assignment, or nil when it is unchanged (only a
	// reassignment changes it).
	Replicas            []BrokerID
	LeaderEpoch         record.LeaderEpoch
	PartitionEpoch      PartitionEpoch
	LeaderRecoveryState LeaderRecoveryState
}

// ProducerIDs records that the controller handed a broker the block of
// producer ids that ends just below NextProducerID (Kafka's
// ProducerIdsRecord, KIP-730): the broker gives them out to idempotent
// producers with InitProducerId. Because the block is in the replicated
// log before the broker may use it, a controller that restarts or fails
// over continues after it, and a producer id is never handed out twice:
// two producers sharing one would deduplicate each other's batches away.
// NextProducerID only grows (the image refuses one that does not).
type ProducerIDs struct {
	BrokerID       BrokerID
	BrokerEpoch    BrokerEpoch
	NextProducerID int64
}

// Entry is a record at its offset in the metadata log.
type Entry struct {
	Offset int64
	Record Record
}

func (RegisterBroker) isRecord()          {}
func (UnfenceBroker) isRecord()           {}
func (FenceBroker) isRecord()             {}
func (BeginControlledShutdown) isRecord() {}
func (UnregisterBroker) isRecord()        {}
func (CreateTopic) isRecord()             {}
func (DeleteTopic) isRecord()             {}
func (PartitionChange) isRecord()         {}
func (ProducerIDs) isRecord()             {}

func (r RegisterBroker) String() string {
	if r.Endpoint != "" {
		return fmt.Sprintf("register-broker id=%d epoch=%d incarnation=%s endpoint=%s", r.ID, r.Epoch, r.Incarnation, r.Endpoint)
	}
	return fmt.Sprintf("register-broker id=%d epoch=%d incarnation=%s", r.ID, r.Epoch, r.Incarnation)
}

func (r UnfenceBroker) String() string {
	return fmt.Sprintf("unfence-broker id=%d epoch=%d", r.ID, r.Epoch)
}

func (r FenceBroker) String() string {
	return fmt.Sprintf("fence-broker id=%d epoch=%d", r.ID, r.Epoch)
}

func (r BeginControlledShutdown) String() string {
	return fmt.Sprintf("begin-controlled-shutdown id=%d epoch=%d", r.ID, r.Epoch)
}

func (r UnregisterBroker) String() string {
	return fmt.Sprintf("unregister-broker id=%d epoch=%d", r.ID, r.Epoch)
}

func (r CreateTopic) String() string {
	id := ""
	if !r.ID.IsZero() {
		id = " id=" + r.ID.String()
	}
	return fmt.Sprintf("create-topic name=%s%s partitions=%d %s", r.Name, id, len(r.Partitions), r.Config)
}

func (r DeleteTopic) String() string {
	return fmt.Sprintf("delete-topic name=%s", r.Name)
}

func (r PartitionChange) String() string {
	replicas := "unchanged"
	if r.Replicas != nil {
		replicas = fmt.Sprint(r.Replicas)
	}
	return fmt.Sprintf("partition-change %s leader=%d leader-epoch=%d partition-epoch=%d isr=%v elr=%v replicas=%s%s",
		r.TopicPartition, r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR, r.ELR, replicas,
		recoverySuffix(r.LeaderRecoveryState))
}

func (r ProducerIDs) String() string {
	return fmt.Sprintf("producer-ids broker=%d epoch=%d next-producer-id=%d", r.BrokerID, r.BrokerEpoch, r.NextProducerID)
}

func (e Entry) String() string { return fmt.Sprintf("%d: %v", e.Offset, e.Record) }

// String names the state as Kafka's docs do.
func (s LeaderRecoveryState) String() string {
	switch s {
	case Recovered:
		return "recovered"
	case Recovering:
		return "recovering"
	}
	return fmt.Sprintf("leader-recovery-state(%d)", int8(s))
}

// recoverySuffix marks the rare recovering state and leaves the common one
// unsaid, to keep test output short.
func recoverySuffix(state LeaderRecoveryState) string {
	if state == Recovered {
		return ""
	}
	return " " + state.String()
}
