package broker

import (
	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// ClientID identifies a client connection, for routing answers.
type ClientID uint64

// ClientRequest is one partition's part of a client request, or an
// InitProducerId, which names no partition. Exactly one of Produce, Fetch,
// ListOffsets, OffsetsForLeaderEpoch, InitProducerID and DeleteRecords is set; their IDs
// are chosen by the caller and come back in the answer.
type ClientRequest struct {
	Client      ClientID
	Partition   metadata.TopicPartition
	Produce     *replica.ProduceRequest
	Fetch       *replica.FetchRequest
	ListOffsets *replica.ListOffsetsRequest
	// OffsetsForLeaderEpoch is a consumer validating its position after a
	// leader change (KIP-320), the same question a follower asks as a peer.
	OffsetsForLeaderEpoch *replica.OffsetsForLeaderEpochRequest
	InitProducerID        *InitProducerIDRequest
	// DeleteRecords moves the leader's log start offset (API 21).
	DeleteRecords *replica.DeleteRecordsRequest
}

// ClientAnswer answers a ClientRequest. A fetch answer carries its records.
type ClientAnswer struct {
	Client    ClientID
	Partition metadata.TopicPartition
	// ErrorCode is set, and every other field empty, when the broker has
	// no replica of the partition (UNKNOWN_TOPIC_OR_PARTITION) or refuses a
	// produce because its log's writes are behind (REQUEST_TIMED_OUT).
	ErrorCode int16
	Produce   *replica.ProduceAnswer
	Fetch     *replica.FetchResponse
	// FetchChunks, with Config.ZeroCopyReads, hold a fetch answer's records
	// where the log has them, for sendfile; Fetch.Records is then empty.
	// They are only ever records below the high watermark, which no
	// truncation reaches, so they stay valid while the log keeps the
	// segment open.
	FetchChunks           []commitlog.Chunk
	ListOffsets           *replica.ListOffsetsAnswer
	OffsetsForLeaderEpoch *replica.OffsetsForLeaderEpochAnswer
	DeleteRecords         *replica.DeleteRecordsAnswer
	// InitProducerID answers an InitProducerId; Partition is empty.
	InitProducerID *InitProducerIDAnswer
}

// PeerMessage is replication traffic between brokers: a request from a
// follower or the leader's answer to it. Exactly one field is set.
type PeerMessage struct {
	Partition metadata.TopicPartition
	// TopicID is the id of the topic the sending replica belongs to, as
	// the sender's metadata has it (NoTopicID for a topic created before
	// topic ids): a follower fetches by it (KIP-516), so that a leader
	// whose topic of that name is another incarnation does not take the
	// follower for one of its own (rules.FetchByTopicID).
	TopicID                     metadata.TopicID
	Fetch                       *replica.FetchRequest
	FetchResponse               *replica.FetchResponse
	OffsetsForLeaderEpoch       *replica.OffsetsForLeaderEpochRequest
	OffsetsForLeaderEpochAnswer *replica.OffsetsForLeaderEpochAnswer
}

// Outbound is a peer message with its destination.
type Outbound struct {
	To      metadata.BrokerID
	Message PeerMessage
}

// Outbox is everything a node has to send since it was last emptied.
type Outbox struct {
	Peers     []Outbound
	Clients   []ClientAnswer
	Proposals []replica.ISRChange
	// AllocateProducerIDs asks the controller for a block of producer ids
	// (KIP-730), answered with HandleAllocateProducerIDsResponse.
	AllocateProducerIDs bool
}

// Empty reports whether there is nothing to send.
func (o Outbox) Empty() bool {
	return len(o.Peers) == 0 && len(o.Clients) == 0 && len(o.Proposals) == 0 && !o.AllocateProducerIDs
}
