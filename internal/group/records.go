package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The record types of __consumer_offsets keys (the key's leading int16):
// 0 and 1 are an offset commit (0 from the ZooKeeper era, same schema), 2
// is a classic group's metadata, 3 to 8 are KIP-848 consumer groups'
// (consumer_records.go), 9 and up share groups', which this coordinator
// skips on load as Kafka skips types it does not know.
const (
	recordTypeOffsetCommitLegacy int16 = 0
	recordTypeOffsetCommit       int16 = 1
	recordTypeGroupMetadata      int16 = 2
)

// The value versions written, as Kafka writes them for downgrade-readable
// data (MetadataVersion.offsetCommitValueVersion and
// groupMetadataValueVersion): the highest non-flexible ones. An offset
// commit with an explicit expire timestamp (OffsetCommit v2-v4's retention
// time) is written as version 1, the only one that carries it.
const (
	offsetCommitValueVersion           int16 = 3
	offsetCommitValueVersionWithExpiry int16 = 1
	groupMetadataValueVersion          int16 = 3
)

// topicPartition names one partition's committed offset within a group.
type topicPartition struct {
	topic     string
	partition int32
}

// committedOffset is an OffsetCommitValue: what OffsetFetch answers.
type committedOffset struct {
	offset            int64
	leaderEpoch       int32
	metadata          string
	commitTimestampMs int64
	// expireTimestampMs is -1 unless the commit asked for its own
	// retention (OffsetCommit v2-v4).
	expireTimestampMs int64
}

// persistedMember is one member of a GroupMetadataValue.
type persistedMember struct {
	memberID           string
	instanceID         string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	subscription       []byte
	assignment         []byte
}

// groupMetadata is a GroupMetadataValue: what a classic group keeps across
// coordinators. A group with members is loaded Stable at its generation;
// one without is loaded Empty.
type groupMetadata struct {
	protocolType     string
	generation       int32
	protocol         string
	leader           string
	stateTimestampMs int64
	members          []persistedMember
}

// offsetCommitRecord encodes one committed offset as Kafka does: key type
// 1, value version 3, or 1 when it carries an expire timestamp.
func offsetCommitRecord(group string, partition topicPartition, value committedOffset) Record {
	key := kmsg.OffsetCommitKey{Version: recordTypeOffsetCommit, Group: group, Topic: partition.topic, Partition: partition.partition}
	encoded := kmsg.OffsetCommitValue{Version: offsetCommitValueVersion, Offset: value.offset, LeaderEpoch: value.leaderEpoch,
		Metadata: value.metadata, CommitTimestamp: value.commitTimestampMs, ExpireTimestamp: value.expireTimestampMs}
	if value.expireTimestampMs >= 0 {
		encoded.Version = offsetCommitValueVersionWithExpiry
	}
	return Record{Key: key.AppendTo(nil), Value: encoded.AppendTo(nil)}
}

// offsetTombstone deletes one committed offset.
func offsetTombstone(group string, partition topicPartition) Record {
	key := kmsg.OffsetCommitKey{Version: recordTypeOffsetCommit, Group: group, Topic: partition.topic, Partition: partition.partition}
	return Record{Key: key.AppendTo(nil)}
}

// groupMetadataRecord encodes a classic group's metadata, value version 3.
func groupMetadataRecord(group string, value groupMetadata) Record {
	key := kmsg.GroupMetadataKey{Version: recordTypeGroupMetadata, Group: group}
	encoded := kmsg.GroupMetadataValue{Version: groupMetadataValueVersion, ProtocolType: value.protocolType,
		Generation: value.generation, CurrentStateTimestamp: value.stateTimestampMs}
	if value.protocol != "" {
		encoded.Protocol = &value.protocol
	}
	if value.leader != "" {
		encoded.Leader = &value.leader
	}
	encoded.Members = make([]kmsg.GroupMetadataValueMember, 0, len(value.members))
	for _, member := range value.members {
		entry := kmsg.GroupMetadataValueMember{MemberID: member.memberID, ClientID: member.clientID, ClientHost: member.clientHost,
			RebalanceTimeoutMillis: member.rebalanceTimeoutMs, SessionTimeoutMillis: member.sessionTimeoutMs,
			Subscription: member.subscription, Assignment: member.assignment}
		if member.instanceID != "" {
			entry.InstanceID = &member.instanceID
		}
		encoded.Members = append(encoded.Members, entry)
	}
	return Record{Key: key.AppendTo(nil), Value: encoded.AppendTo(nil)}
}

// groupTombstone deletes a group's metadata.
func groupTombstone(group string) Record {
	key := kmsg.GroupMetadataKey{Version: recordTypeGroupMetadata, Group: group}
	return Record{Key: key.AppendTo(nil)}
}

// decodedRecord is one __consumer_offsets record as the coordinator
// applies it: an offset (set or deleted), a group's metadata (set or
// deleted), or a type it skips.
type decodedRecord struct {
	skip      bool
	group     string
	partition *topicPartition // an offset commit's key; nil for group metadata
	offset    *committedOffset
	metadata  *groupMetadata // nil with partition nil and consumer nil: a group tombstone
	// consumer is a KIP-848 consumer group record (key types 3-8).
	consumer *consumerRecord
}

// decodeRecord parses a record of any version Kafka has written: key types
// 0-2 and the consumer group types 3-8 are decoded, the rest (share
// groups) skipped; values of versions 0-4 are read. Bad
// bytes are an error, never a panic.
func decodeRecord(record Record) (decodedRecord, error) {
	if len(record.Key) < 2 {
		return decodedRecord{}, fmt.Errorf("group: record key of %d bytes", len(record.Key))
	}
	recordType := int16(record.Key[0])<<8 | int16(record.Key[1])
	switch recordType {
	case recordTypeOffsetCommitLegacy, recordTypeOffsetCommit:
		return decodeOffsetCommit(record)
	case recordTypeGroupMetadata:
		return decodeGroupMetadata(record)
	case recordTypeConsumerGroupMetadata, recordTypeConsumerGroupPartitionMetadata, recordTypeConsumerGroupMemberMetadata,
		recordTypeConsumerGroupTargetAssignmentMetadata, recordTypeConsumerGroupTargetAssignmentMember,
		recordTypeConsumerGroupCurrentMemberAssignment:
		return decodeConsumerRecord(record)
	}
	if recordType < 0 {
		return decodedRecord{}, fmt.Errorf("group: record type %d", recordType)
	}
	return decodedRecord{skip: true}, nil
}

func decodeOffsetCommit(record Record) (decodedRecord, error) {
	var key kmsg.OffsetCommitKey
	if err := key.ReadFrom(record.Key); err != nil {
		return decodedRecord{}, fmt.Errorf("group: offset commit key: %w", err)
	}
	decoded := decodedRecord{group: key.Group, partition: &topicPartition{topic: key.Topic, partition: key.Partition}}
	if record.Value == nil {
		return decoded, nil
	}
	var value kmsg.OffsetCommitValue
	if err := value.ReadFrom(record.Value); err != nil {
		return decodedRecord{}, fmt.Errorf("group: offset commit value: %w", err)
	}
	if value.Version < 0 || value.Version > 4 {
		return decodedRecord{}, fmt.Errorf("group: offset commit value version %d", value.Version)
	}
	if value.Version < 3 {
		value.LeaderEpoch = -1
	}
	if value.Version != 1 {
		value.ExpireTimestamp = -1
	}
	decoded.offset = &committedOffset{offset: value.Offset, leaderEpoch: value.LeaderEpoch, metadata: value.Metadata,
		commitTimestampMs: value.CommitTimestamp, expireTimestampMs: value.ExpireTimestamp}
	return decoded, nil
}

func decodeGroupMetadata(record Record) (decodedRecord, error) {
	var key kmsg.GroupMetadataKey
	if err := key.ReadFrom(record.Key); err != nil {
		return decodedRecord{}, fmt.Errorf("group: group metadata key: %w", err)
	}
	decoded := decodedRecord{group: key.Group}
	if record.Value == nil {
		return decoded, nil
	}
	var value kmsg.GroupMetadataValue
	if err := value.ReadFrom(record.Value); err != nil {
		return decodedRecord{}, fmt.Errorf("group: group metadata value: %w", err)
	}
	if value.Version < 0 || value.Version > 4 {
		return decodedRecord{}, fmt.Errorf("group: group metadata value version %d", value.Version)
	}
	metadata := &groupMetadata{protocolType: value.ProtocolType, generation: value.Generation, stateTimestampMs: -1}
	if value.Protocol != nil {
		metadata.protocol = *value.Protocol
	}
	if value.Leader != nil {
		metadata.leader = *value.Leader
	}
	if value.Version >= 2 {
		metadata.stateTimestampMs = value.CurrentStateTimestamp
	}
	for _, member := range value.Members {
		entry := persistedMember{memberID: member.MemberID, clientID: member.ClientID, clientHost: member.ClientHost,
			rebalanceTimeoutMs: member.RebalanceTimeoutMillis, sessionTimeoutMs: member.SessionTimeoutMillis,
			subscription: member.Subscription, assignment: member.Assignment}
		if value.Version < 1 {
			entry.rebalanceTimeoutMs = member.SessionTimeoutMillis
		}
		if member.InstanceID != nil {
			entry.instanceID = *member.InstanceID
		}
		metadata.members = append(metadata.members, entry)
	}
	decoded.metadata = metadata
	return decoded, nil
}
