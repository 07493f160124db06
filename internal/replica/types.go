package replica

import (
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// Kafka's acks values for produce requests.
const (
	AcksNone   int16 = 0
	AcksLeader int16 = 1
	AcksAll    int16 = -1
)

// ListOffsets timestamps with a special meaning; any other negative one
// is refused with UNSUPPORTED_VERSION, as Kafka does for an unknown one.
const (
	LatestTimestamp   int64 = -1
	EarliestTimestamp int64 = -2
	// MaxTimestamp (v7+, KIP-734) asks for the record with the largest
	// timestamp.
	MaxTimestamp int64 = -3
	// EarliestLocalTimestamp (v8+, KIP-405) asks for the local log start
	// offset: without tiered storage, the log start offset.
	EarliestLocalTimestamp int64 = -4
	// LatestTieredTimestamp (v9+, KIP-1005) asks for the highest offset in
	// remote storage: without tiered storage, offset -1 and epoch -1.
	LatestTieredTimestamp int64 = -5
)

// ConsumerReplicaID is the replica id of fetches from consumers (and of any
// request not sent by a follower).
const ConsumerReplicaID metadata.BrokerID = -1

// DebugReplicaID is Kafka's debugging replica id (DEBUGGING_REPLICA_ID):
// a tool reading a replica's own state. Any replica with partition state
// answers it, leader or follower: a Fetch gets that replica's high
// watermark and log start offset and reads at most up to its high
// watermark; a ListOffsets gets its log end offset as the latest offset.
// It never counts as a follower's fetch, so it cannot move the high
// watermark, the ISR or any follower's progress.
const DebugReplicaID metadata.BrokerID = -2

// ProduceRequest is one partition's part of a produce request.
type ProduceRequest struct {
	// ID is chosen by the caller and echoed in the answer.
	ID uint64
	// Batches is one or more RecordBatch v2, as the producer sent them. The
	// replica takes ownership: it writes offsets and its leader epoch into
	// the headers in place.
	Batches []byte
	// Acks is AcksNone, AcksLeader or AcksAll.
	Acks int16
	// TimeoutTicks bounds how long an AcksAll request waits for the ISR.
	TimeoutTicks int64
	// AppendTimeMs is the broker's time when it took the request, in
	// milliseconds since the Unix epoch: what a LogAppendTime topic stamps
	// its batches with (Config.LogAppendTime). The replica reads no clock.
	AppendTimeMs int64
}

// ProduceAnswer answers a ProduceRequest.
type ProduceAnswer struct {
	ID             uint64
	ErrorCode      int16
	BaseOffset     record.Offset
	LogStartOffset record.Offset
	// LogAppendTime says the batches were stamped with LogAppendTimeMs
	// (a LogAppendTime topic); Produce answers it, -1 otherwise.
	LogAppendTime   bool
	LogAppendTimeMs int64
	// ErrorMessage and RecordErrors say which records made the batch fail,
	// for Produce v8+ (KIP-467). As in Kafka they are set only when
	// particular records are at fault (a malformed record, a missing one,
	// an offset delta out of place); otherwise the code says it all.
	ErrorMessage string
	RecordErrors []RecordError
}

// RecordError names one record of a refused batch and why.
type RecordError struct {
	// BatchIndex is the record's index in its batch, from 0.
	BatchIndex int32
	Message    string
}

// FetchRequest is one partition's part of a fetch, from a follower
// (ReplicaID >= 0), a consumer (ConsumerReplicaID) or a debugging tool
// (DebugReplicaID).
type FetchRequest struct {
	// ID is chosen by the sender and echoed in the response.
	ID        uint64
	ReplicaID metadata.BrokerID
	// ReplicaEpoch is the follower's broker epoch (KIP-903), or
	// metadata.NoBrokerEpoch.
	ReplicaEpoch metadata.BrokerEpoch
	// CurrentLeaderEpoch is the epoch the sender believes current
	// (KIP-320), or record.NoLeaderEpoch to skip the check.
	CurrentLeaderEpoch record.LeaderEpoch
	FetchOffset        record.Offset
	// LastFetchedEpoch is the epoch of the last batch in the follower's log,
	// or record.NoLeaderEpoch; the leader compares it with its own epoch
	// history to detect a diverging log (KIP-595 style, Kafka 2.7+).
	LastFetchedEpoch record.LeaderEpoch
	MaxBytes         int64
	// LogStartOffset is a follower's own log start offset (Fetch v5+,
	// KIP-107), or -1: the leader's DeleteRecords answers wait for its
	// followers' (lowWatermark).
	LogStartOffset record.Offset
}

// EpochEndOffset is where an epoch ended in a log.
type EpochEndOffset struct {
	Epoch     record.LeaderEpoch
	EndOffset record.Offset
}

// FetchResponse answers a FetchRequest. The replica fills in everything but
// Records: it says which range to read ([ReadFrom, ReadUpTo), at most
// MaxBytes, whole batches), and whoever carries out the Ready reads the log
// and attaches the batches, so the core never copies record bytes.
type FetchResponse struct {
	ID        uint64
	ErrorCode int16
	// HighWatermark and LogStartOffset are the answering replica's: the
	// leader's, except for a DebugReplicaID fetch a follower answers.
	HighWatermark  record.Offset
	LogStartOffset record.Offset
	// LogEndOffset is the answering replica's log end offset, which a
	// follower needs after OFFSET_OUT_OF_RANGE (Kafka's fetcher asks with
	// ListOffsets).
	LogEndOffset record.Offset
	// DivergingEpoch, when set, tells the follower its log diverges: it
	// carries no records and the follower must truncate first.
	DivergingEpoch *EpochEndOffset
	// LeaderEpoch is the answering replica's current epoch, a hint after
	// FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER.
	LeaderEpoch record.LeaderEpoch
	ReadFrom    record.Offset
	ReadUpTo    record.Offset
	MaxBytes    int64
	// Records are the batches read, filled in outside the core.
	Records []byte
}

// OffsetsForLeaderEpochRequest asks where LeaderEpoch ended.
type OffsetsForLeaderEpochRequest struct {
	ID                 uint64
	ReplicaID          metadata.BrokerID
	CurrentLeaderEpoch record.LeaderEpoch
	LeaderEpoch        record.LeaderEpoch
}

// OffsetsForLeaderEpochAnswer answers it: the largest epoch at or below the
// one asked for that the leader knows, and its end offset, or -1 and -1.
type OffsetsForLeaderEpochAnswer struct {
	ID          uint64
	ErrorCode   int16
	LeaderEpoch record.LeaderEpoch
	EndOffset   record.Offset
}

// ListOffsetsRequest asks for the latest or earliest offset.
type ListOffsetsRequest struct {
	ID                 uint64
	ReplicaID          metadata.BrokerID
	CurrentLeaderEpoch record.LeaderEpoch
	Timestamp          int64
}

// ListOffsetsAnswer answers it. An answer to a lookup by timestamp
// (timestamp >= 0, or MaxTimestamp) leaves the search of the log to whoever
// carries out the Ready, as a fetch leaves its read: LookupTimestamp says
// what to search for, and a record found at or above LookupUpTo (the
// fetchable limit) is not answered. That caller fills in Offset,
// TimestampMs and LeaderEpoch (the epoch of the record found).
type ListOffsetsAnswer struct {
	ID          uint64
	ErrorCode   int16
	Offset      record.Offset
	LeaderEpoch record.LeaderEpoch
	TimestampMs int64
	Lookup      bool
	// LookupTimestamp is the timestamp to search for, or MaxTimestamp.
	LookupTimestamp int64
	LookupUpTo      record.Offset
}

// ISRMember is a proposed ISR member with the broker epoch its last fetch
// carried, so the controller can reject a member that has since restarted
// (KIP-903).
type ISRMember struct {
	ID    metadata.BrokerID
	Epoch metadata.BrokerEpoch
}

// ISRChange is an AlterPartition proposal: the leader asks the controller to
// replace the ISR, compare-and-set on PartitionEpoch (KIP-497).
type ISRChange struct {
	Partition      metadata.TopicPartition
	Leader         metadata.BrokerID
	LeaderEpoch    record.LeaderEpoch
	PartitionEpoch metadata.PartitionEpoch
	NewISR         []ISRMember
}

func (c ISRChange) String() string {
	ids := make([]metadata.BrokerID, len(c.NewISR))
	for i, member := range c.NewISR {
		ids[i] = member.ID
	}
	return fmt.Sprintf("alter-partition %s isr=%v leader-epoch=%d partition-epoch=%d", c.Partition, ids, c.LeaderEpoch, c.PartitionEpoch)
}

// AlterPartitionResponse is the controller's answer to an ISRChange. On
// success State is the partition's new state.
type AlterPartitionResponse struct {
	// Request is the proposal answered: a leader that resent a proposal can
	// get answers to old ones, which must not settle the current one.
	Request   ISRChange
	ErrorCode int16
	State     *metadata.PartitionState
}

// sameProposal reports whether two proposals ask for the same change.
func sameProposal(a, b ISRChange) bool {
	return a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch && slices.Equal(a.NewISR, b.NewISR)
}

// Message is a request this replica sends to another broker: exactly one of
// Fetch and OffsetsForLeaderEpoch is set.
type Message struct {
	To                    metadata.BrokerID
	Partition             metadata.TopicPartition
	Fetch                 *FetchRequest
	OffsetsForLeaderEpoch *OffsetsForLeaderEpochRequest
}

// Answer is this replica's answer to a request it handled: exactly one field
// is set.
type Answer struct {
	Produce               *ProduceAnswer
	Fetch                 *FetchResponse
	OffsetsForLeaderEpoch *OffsetsForLeaderEpochAnswer
	ListOffsets           *ListOffsetsAnswer
	DeleteRecords         *DeleteRecordsAnswer
}
