package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// Backend does the work behind the requests. In tide it is the front end
// (internal/frontend: the FrontEnd seen as a Backend, over the broker node,
// its lifecycle and the active controller); in wire's tests, a fake. It
// speaks tide's types; the Handler translates Kafka's. A Backend that also
// implements FileFetcher is asked for fetches with FetchFiles instead of
// Fetch, and may leave records in the log's files (see FileRange); the
// front end does.
//
// Every method is called from the goroutine that calls Handle, and every
// done callback must be called from that goroutine too, exactly once, either
// before the method returns or later (an acks=all produce waits for the
// ISR, a long-poll fetch for data). A done called twice is a programmer
// error and panics. The Backend may keep the slices passed in but must not
// change them (the Handler reads them again to build the response), except
// Produce's batches, which the replica stamps in place; slices passed to
// done must stay unchanged until done returns (the response is encoded
// before it returns).
type Backend interface {
	// Cluster describes the cluster as the answering broker knows it, for
	// Metadata, DescribeCluster, DescribeConfigs and CreateTopics' defaults.
	Cluster() Cluster
	// Topic returns a topic's configuration and partitions, as the applied
	// metadata image has them.
	Topic(name string) (metadata.Topic, bool)
	// TopicByID returns the topic with a topic id (KIP-516), as the applied
	// metadata image has it; the zero id names none.
	TopicByID(id metadata.TopicID) (metadata.Topic, bool)
	// TopicNames lists every topic, sorted, for requests that ask for all.
	TopicNames() []string

	// Produce appends one partition's batches. request.Batches is the
	// producer's RecordBatch v2 bytes, untouched and unvalidated: it aliases
	// the request buffer Handle was given, and the replica validates it and
	// stamps offsets and its leader epoch into it in place. request.ID is the
	// partition's position in the request. With AcksNone, done may be
	// called at any time (its answer is dropped: acks=0 gets no response).
	Produce(partition metadata.TopicPartition, request replica.ProduceRequest, done func(replica.ProduceAnswer))
	// Fetch reads from every partition of request. The Backend decides
	// when to answer (Kafka's long poll): once at least MinBytes of records
	// are available over all partitions, once MaxWaitTicks have passed, or
	// at once on an error. done gets one response per partition, in request
	// order (each with the ID of its FetchPartition); Records are whole
	// batches, as the log holds them. Not called when the Backend is a
	// FileFetcher.
	Fetch(request FetchRequest, done func([]replica.FetchResponse))
	// ListOffsets answers the earliest (EarliestTimestamp) or latest
	// (LatestTimestamp) offset of one partition, or the offset for a
	// timestamp. OFFSET_NOT_AVAILABLE, the answer of a new leader whose high
	// watermark has not reached its epoch (KIP-207), passes through.
	ListOffsets(partition metadata.TopicPartition, request replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer))
	// DeleteRecords moves the partition's log start offset, on its leader
	// (API 21, KIP-107), and answers its new low watermark.
	DeleteRecords(partition metadata.TopicPartition, request replica.DeleteRecordsRequest, done func(replica.DeleteRecordsAnswer))
	// OffsetsForLeaderEpoch answers where an epoch ended in the leader's
	// log (KIP-101, KIP-279, KIP-320).
	OffsetsForLeaderEpoch(partition metadata.TopicPartition, request replica.OffsetsForLeaderEpochRequest,
		done func(replica.OffsetsForLeaderEpochAnswer))
	// InitProducerID hands out a producer id and epoch for an idempotent
	// producer (KIP-98), or bumps the epoch of the one given (KIP-360).
	// Transactional ids never reach the Backend: the Handler refuses them.
	InitProducerID(request InitProducerIDRequest, done func(InitProducerIDAnswer))
	// CreateTopics creates (or with ValidateOnly only checks) the topics,
	// and answers one error code per topic, in request order. Each request
	// has its defaults filled in.
	CreateTopics(request CreateTopicsRequest, done func([]int16))
	// CreatePartitions grows (or with ValidateOnly only checks) the
	// topics, and answers one error code per topic, in request order.
	CreatePartitions(request CreatePartitionsRequest, done func([]int16))
	// LogDir describes this broker's log directory and every partition it
	// holds there (DescribeLogDirs); the Handler filters it.
	LogDir() LogDir
	// AutoCreateTopic creates a topic a Metadata request named (Kafka's
	// auto.create.topics.enable), with its defaults filled in; nothing is
	// answered: the client sees it in a later Metadata. The Backend may
	// drop it (one already under way, or past its limit): the client asks
	// again.
	AutoCreateTopic(topic controller.CreateTopicRequest)
	// DeleteTopics deletes the topics, each named by name or by id, and
	// answers one error code per topic, in request order.
	DeleteTopics(topics []TopicRef, timeoutTicks int64, done func([]int16))
	// ElectLeaders runs a PREFERRED election for each partition (the only
	// kind tide offers), answering as controller.ElectPreferred does.
	// partitions is never empty.
	ElectLeaders(partitions []metadata.TopicPartition, timeoutTicks int64, done func(controller.ElectLeadersResponse))
	// Reassign moves each partition to its target replicas, or cancels
	// its move (nil Replicas), in order, answering one code per entry as
	// controller.Reassign does (AlterPartitionReassignments, KIP-455).
	Reassign(moves []controller.ReassignRequest, timeoutTicks int64, done func([]int16))
	// AlterConfigs changes one resource's configs (or with validateOnly
	// only checks the change), answering as controller.AlterConfigs does:
	// a code, and a message naming what is refused.
	AlterConfigs(request controller.AlterConfigsRequest, validateOnly bool, done func(code int16, message string))

	// GroupCoordinator answers which broker coordinates a consumer group:
	// the leader of the __consumer_offsets partition the group hashes to,
	// or a code (COORDINATOR_NOT_AVAILABLE while the topic is being created
	// or the partition has no leader).
	GroupCoordinator(groupID string) (metadata.BrokerID, int16)
	// GroupPartition is the __consumer_offsets partition of a group, or
	// NoGroupPartition while the topic does not exist: requests naming
	// several groups are split by it, one request per coordinator.
	GroupPartition(groupID string) int32
	// Group serves a group request (JoinGroup, SyncGroup, Heartbeat,
	// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups,
	// OffsetDelete) at the coordinator of groupID; every group the request
	// names has the same coordinator. request is at the client's version;
	// client is who sent it, which members keep (member ids start with
	// its client id).
	// done gets the coordinator's response, or a code when no coordinator
	// could answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...),
	// which the Handler turns into the request's error response.
	Group(groupID string, client GroupClient, request kmsg.Request, done func(response kmsg.Response, code int16))
	// ListGroups asks every group coordinator this broker hosts and gives
	// their answers, in partition order; a coordinator that cannot answer
	// gives a response carrying only its code.
	ListGroups(request *kmsg.ListGroupsRequest, done func([]*kmsg.ListGroupsResponse))
}

// GroupClient is who sent a group request: the client.id of its header,
// and its address as Kafka shows it ("/127.0.0.1"), or "" when unknown.
type GroupClient struct {
	ID, Host string
}

// TopicRef names a topic by Name, or by ID with an empty Name (KIP-516).
type TopicRef struct {
	Name string
	ID   metadata.TopicID
}

// Cluster is what the answering broker knows of its cluster.
type Cluster struct {
	ClusterID string
	// BrokerID is the answering broker.
	BrokerID metadata.BrokerID
	// ControllerID is the active controller, or metadata.NoBroker when it
	// is not known.
	ControllerID metadata.BrokerID
	// Brokers are the brokers clients may connect to, in ascending ID
	// order. A replica on a broker not listed here is reported offline.
	Brokers []Broker
	Config  BrokerConfig
	// DynamicDefaults are the cluster-wide dynamic broker defaults the
	// metadata log holds (AlterConfigs of the broker resource ""), by
	// Kafka's broker config names.
	DynamicDefaults map[string]string
}

// Broker is one broker's client endpoint.
type Broker struct {
	ID   metadata.BrokerID
	Host string
	Port int32
	// Rack is broker.rack, or empty for none.
	Rack string
}

// BrokerConfig holds the broker settings DescribeConfigs reports (under
// Kafka's names, given with each field) and CreateTopics takes defaults
// from.
type BrokerConfig struct {
	// DefaultPartitions is num.partitions.
	DefaultPartitions int
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int
	// AutoCreateTopics is auto.create.topics.enable: a Metadata request
	// naming a topic that does not exist creates it.
	AutoCreateTopics bool
	// MinInsyncReplicas is min.insync.replicas, the default for new topics.
	MinInsyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable.
	UncleanLeaderElection bool
	// SegmentBytes is log.segment.bytes (segment.bytes for a topic).
	SegmentBytes int64
	// RetentionBytes is log.retention.bytes (retention.bytes); -1 keeps
	// everything.
	RetentionBytes int64
	// RetentionMs is log.retention.ms (retention.ms); -1 keeps everything.
	RetentionMs int64
	// MessageMaxBytes is message.max.bytes, the largest batch accepted.
	MessageMaxBytes int64
	// Static are the broker configs set on this broker's command line or
	// config file (STATIC_BROKER_CONFIG), by Kafka's names; Defaults the
	// broker's values of the others it has (DEFAULT_CONFIG), where they
	// are not Kafka's. DescribeConfigs builds its synonym chains on them.
	Static, Defaults map[string]string
}

// IsolationLevel is a fetch's or ListOffsets' isolation level. With no
// transactions in tide, both read up to the high watermark: the last stable
// offset equals the high watermark.
type IsolationLevel int8

// Kafka's isolation levels.
const (
	ReadUncommitted IsolationLevel = 0
	ReadCommitted   IsolationLevel = 1
)

// FetchRequest is a whole fetch: the long-poll parameters and the
// partitions, in request order.
type FetchRequest struct {
	// ReplicaID is the follower's broker id, replica.ConsumerReplicaID or
	// replica.DebugReplicaID.
	ReplicaID metadata.BrokerID
	// ReplicaEpoch is the follower's broker epoch (KIP-903, Fetch v15+),
	// or metadata.NoBrokerEpoch at the versions served.
	ReplicaEpoch metadata.BrokerEpoch
	// MaxWaitTicks bounds how long the Backend may hold the fetch waiting
	// for MinBytes.
	MaxWaitTicks int64
	// MinBytes is how many bytes of records the fetch waits for.
	MinBytes int32
	// MaxBytes bounds the whole response's records; like Kafka (KIP-74),
	// the first batch is returned even when it is larger, so a consumer
	// always makes progress.
	MaxBytes       int32
	IsolationLevel IsolationLevel
	Partitions     []FetchPartition
}

// FetchPartition is one partition's part of a fetch. Its FetchRequest's ID
// is its position in FetchRequest.Partitions, and ReplicaID and
// ReplicaEpoch repeat the fetch's.
type FetchPartition struct {
	metadata.TopicPartition
	replica.FetchRequest
}

// ProducerID identifies an idempotent producer (KIP-98).
type ProducerID int64

// ProducerEpoch is a producer id's epoch, bumped to fence an older
// incarnation of the same producer.
type ProducerEpoch int16

// NoProducerID and NoProducerEpoch mean "none yet": a producer asking for a
// fresh id sends them.
const (
	NoProducerID    ProducerID    = -1
	NoProducerEpoch ProducerEpoch = -1
)

// InitProducerIDRequest asks for a producer id. A producer that has one and
// hit an error it can recover from sends it, to have its epoch bumped
// (KIP-360, InitProducerId v3+); otherwise both fields are "none".
type InitProducerIDRequest struct {
	ProducerID    ProducerID
	ProducerEpoch ProducerEpoch
}

// InitProducerIDAnswer answers it.
type InitProducerIDAnswer struct {
	ErrorCode     int16
	ProducerID    ProducerID
	ProducerEpoch ProducerEpoch
}

// LogDir is one broker's log directory as DescribeLogDirs reports it
// (KIP-113): tide keeps every partition of a broker under one directory.
type LogDir struct {
	// Path is the directory, as the broker was configured with it.
	Path string
	// ErrorCode is 0, or KAFKA_STORAGE_ERROR when the directory failed.
	ErrorCode int16
	// TotalBytes and UsableBytes are the size of the volume holding it and
	// the bytes still free there for the broker (KIP-827), or -1 when the
	// runtime does not know them.
	TotalBytes  int64
	UsableBytes int64
	// Partitions are the partitions whose logs are open there, sorted by
	// topic and partition.
	Partitions []LogDirPartition
}

// LogDirPartition is one partition's log in a LogDir.
type LogDirPartition struct {
	metadata.TopicPartition
	// SizeBytes is the size of the log's segments.
	SizeBytes int64
	// OffsetLag is how far the log end is below the high watermark this
	// replica knows, never negative: Kafka's definition, 0 for a leader.
	OffsetLag int64
}

// CreatePartitionsRequest asks to grow topics, in request order.
type CreatePartitionsRequest struct {
	Topics       []controller.CreatePartitionsRequest
	TimeoutTicks int64
	// ValidateOnly asks for the checks and the answer without adding any
	// partition.
	ValidateOnly bool
}

// CreateTopicsRequest asks for topics, in request order, each with its
// defaults filled in from BrokerConfig.
type CreateTopicsRequest struct {
	Topics       []controller.CreateTopicRequest
	TimeoutTicks int64
	// ValidateOnly asks for the checks and the answer without creating
	// anything.
	ValidateOnly bool
}
