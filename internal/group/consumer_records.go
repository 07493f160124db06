package group

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The __consumer_offsets records of KIP-848 consumer groups (key types 3
// to 8), in the formats of Kafka's JSON schemas
// (group-coordinator/src/main/resources/common/message/ConsumerGroup*):
// a key is the int16 record type then the key's fields, non-flexible
// (strings with an int16 length); a value is the int16 value version (0)
// then the value's fields, flexible (compact strings and arrays, a tagged
// field buffer after every struct). kmsg has no types for them, so they
// are encoded here, with tests of the byte layout.
const (
	recordTypeConsumerGroupMetadata                 int16 = 3
	recordTypeConsumerGroupPartitionMetadata        int16 = 4
	recordTypeConsumerGroupMemberMetadata           int16 = 5
	recordTypeConsumerGroupTargetAssignmentMetadata int16 = 6
	recordTypeConsumerGroupTargetAssignmentMember   int16 = 7
	recordTypeConsumerGroupCurrentMemberAssignment  int16 = 8
)

// consumerValueVersion is the only value version of these records.
const consumerValueVersion int16 = 0

// consumerKey is the key of a consumer-group record: its type, the group
// and, for the per-member types (5, 7, 8), the member.
type consumerKey struct {
	recordType int16
	group      string
	member     string
}

// hasMember reports whether the key type carries a member id.
func (k consumerKey) hasMember() bool {
	switch k.recordType {
	case recordTypeConsumerGroupMemberMetadata, recordTypeConsumerGroupTargetAssignmentMember, recordTypeConsumerGroupCurrentMemberAssignment:
		return true
	}
	return false
}

func (k consumerKey) encode() []byte {
	out := kbin.AppendInt16(nil, k.recordType)
	out = kbin.AppendString(out, k.group)
	if k.hasMember() {
		out = kbin.AppendString(out, k.member)
	}
	return out
}

func decodeConsumerKey(bytes []byte) (consumerKey, error) {
	reader := kbin.Reader{Src: bytes}
	key := consumerKey{recordType: reader.Int16(), group: reader.String()}
	if key.hasMember() {
		key.member = reader.String()
	}
	if err := reader.Complete(); err != nil {
		return consumerKey{}, fmt.Errorf("group: consumer group record key of type %d: %w", key.recordType, err)
	}
	return key, nil
}

// consumerTopicMetadata is one topic of a ConsumerGroupPartitionMetadata
// value: the group's subscription metadata.
type consumerTopicMetadata struct {
	id         [16]byte
	name       string
	partitions int32
}

// topicIDPartitions is one topic of an assignment as the records carry
// it: by topic id.
type topicIDPartitions struct {
	id         [16]byte
	partitions []int32
}

// consumerMemberMetadata is a ConsumerGroupMemberMetadata value. A nil
// pointer is a null field.
type consumerMemberMetadata struct {
	instanceID           *string
	rackID               *string
	clientID             string
	clientHost           string
	subscribedTopicNames []string
	subscribedTopicRegex *string
	rebalanceTimeoutMs   int32
	serverAssignor       *string
}

// currentAssignmentValue is a ConsumerGroupCurrentMemberAssignment value.
type currentAssignmentValue struct {
	memberEpoch         int32
	previousMemberEpoch int32
	state               int8
	assigned            []topicIDPartitions
	pendingRevocation   []topicIDPartitions
}

func valueHeader() []byte { return kbin.AppendInt16(nil, consumerValueVersion) }

// appendNoTags ends a flexible struct with an empty tagged-field buffer.
func appendNoTags(out []byte) []byte { return kbin.AppendUvarint(out, 0) }

func encodeGroupEpochValue(epoch int32) []byte {
	return appendNoTags(kbin.AppendInt32(valueHeader(), epoch))
}

func encodePartitionMetadataValue(topics []consumerTopicMetadata) []byte {
	out := kbin.AppendCompactArrayLen(valueHeader(), len(topics))
	for _, topic := range topics {
		out = kbin.AppendUuid(out, topic.id)
		out = kbin.AppendCompactString(out, topic.name)
		out = kbin.AppendInt32(out, topic.partitions)
		out = kbin.AppendCompactArrayLen(out, 0) // PartitionRacks: tide has no racks
		out = appendNoTags(out)
	}
	return appendNoTags(out)
}

func encodeMemberMetadataValue(value consumerMemberMetadata) []byte {
	out := kbin.AppendCompactNullableString(valueHeader(), value.instanceID)
	out = kbin.AppendCompactNullableString(out, value.rackID)
	out = kbin.AppendCompactString(out, value.clientID)
	out = kbin.AppendCompactString(out, value.clientHost)
	out = kbin.AppendCompactArrayLen(out, len(value.subscribedTopicNames))
	for _, name := range value.subscribedTopicNames {
		out = kbin.AppendCompactString(out, name)
	}
	out = kbin.AppendCompactNullableString(out, value.subscribedTopicRegex)
	out = kbin.AppendInt32(out, value.rebalanceTimeoutMs)
	out = kbin.AppendCompactNullableString(out, value.serverAssignor)
	return appendNoTags(out) // ClassicMemberMetadata (tag 0) is null: no classic members
}

func appendTopicPartitions(out []byte, topics []topicIDPartitions) []byte {
	out = kbin.AppendCompactArrayLen(out, len(topics))
	for _, topic := range topics {
		out = kbin.AppendUuid(out, topic.id)
		out = kbin.AppendCompactArrayLen(out, len(topic.partitions))
		for _, partition := range topic.partitions {
			out = kbin.AppendInt32(out, partition)
		}
		out = appendNoTags(out)
	}
	return out
}

func encodeTargetMemberValue(topics []topicIDPartitions) []byte {
	return appendNoTags(appendTopicPartitions(valueHeader(), topics))
}

func encodeCurrentAssignmentValue(value currentAssignmentValue) []byte {
	out := kbin.AppendInt32(valueHeader(), value.memberEpoch)
	out = kbin.AppendInt32(out, value.previousMemberEpoch)
	out = kbin.AppendInt8(out, value.state)
	out = appendTopicPartitions(out, value.assigned)
	out = appendTopicPartitions(out, value.pendingRevocation)
	return appendNoTags(out)
}

// valueReader reads a flexible value after checking its version.
type valueReader struct{ kbin.Reader }

func newValueReader(bytes []byte) (*valueReader, error) {
	reader := &valueReader{kbin.Reader{Src: bytes}}
	if version := reader.Int16(); reader.Ok() && version != consumerValueVersion {
		return nil, fmt.Errorf("group: consumer group record value version %d", version)
	}
	return reader, nil
}

// skipTags skips a tagged-field buffer: fields of later versions (4.1's
// MetadataHash, a classic member's metadata) that this coordinator does
// not use.
func (r *valueReader) skipTags() {
	for count := r.Uvarint(); count > 0 && r.Ok(); count-- {
		r.Uvarint() // the tag
		r.Span(int(r.Uvarint()))
	}
}

// arrayLength reads a compact array length; a null array is empty, and
// a length beyond the bytes left is an error (it cannot be honest).
func (r *valueReader) arrayLength() int {
	length := int(r.CompactArrayLen())
	if length < 0 {
		return 0
	}
	if length > len(r.Src) {
		r.Span(len(r.Src) + 1) // marks the reader failed
		return 0
	}
	return length
}

func (r *valueReader) done(what string) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("group: %s value: %w", what, err)
	}
	return nil
}

func decodeGroupEpochValue(bytes []byte, what string) (int32, error) {
	reader, err := newValueReader(bytes)
	if err != nil {
		return 0, err
	}
	epoch := reader.Int32()
	reader.skipTags()
	if err := reader.done(what); err != nil {
		return 0, err
	}
	// A group epoch only ever grows by one from 0: a stored negative one is
	// not one tide wrote (found by FuzzLoad; the largest one is refused
	// growth instead, consumerGroup.bumpEpoch).
	if epoch < 0 {
		return 0, fmt.Errorf("%s: group epoch %d out of range", what, epoch)
	}
	return epoch, nil
}

func decodePartitionMetadataValue(bytes []byte) ([]consumerTopicMetadata, error) {
	reader, err := newValueReader(bytes)
	if err != nil {
		return nil, err
	}
	var topics []consumerTopicMetadata
	for count := reader.arrayLength(); count > 0 && reader.Ok(); count-- {
		topic := consumerTopicMetadata{id: reader.Uuid(), name: reader.CompactString(), partitions: reader.Int32()}
		for racks := reader.arrayLength(); racks > 0 && reader.Ok(); racks-- {
			reader.Int32()
			for names := reader.arrayLength(); names > 0 && reader.Ok(); names-- {
				reader.CompactString()
			}
			reader.skipTags()
		}
		reader.skipTags()
		topics = append(topics, topic)
	}
	reader.skipTags()
	return topics, reader.done("consumer group partition metadata")
}

func decodeMemberMetadataValue(bytes []byte) (consumerMemberMetadata, error) {
	reader, err := newValueReader(bytes)
	if err != nil {
		return consumerMemberMetadata{}, err
	}
	value := consumerMemberMetadata{instanceID: reader.CompactNullableString(), rackID: reader.CompactNullableString(),
		clientID: reader.CompactString(), clientHost: reader.CompactString()}
	for count := reader.arrayLength(); count > 0 && reader.Ok(); count-- {
		value.subscribedTopicNames = append(value.subscribedTopicNames, reader.CompactString())
	}
	value.subscribedTopicRegex = reader.CompactNullableString()
	value.rebalanceTimeoutMs = reader.Int32()
	value.serverAssignor = reader.CompactNullableString()
	reader.skipTags()
	return value, reader.done("consumer group member metadata")
}

func (r *valueReader) topicPartitions() []topicIDPartitions {
	var topics []topicIDPartitions
	for count := r.arrayLength(); count > 0 && r.Ok(); count-- {
		topic := topicIDPartitions{id: r.Uuid()}
		for partitions := r.arrayLength(); partitions > 0 && r.Ok(); partitions-- {
			topic.partitions = append(topic.partitions, r.Int32())
		}
		r.skipTags()
		topics = append(topics, topic)
	}
	return topics
}

func decodeTargetMemberValue(bytes []byte) ([]topicIDPartitions, error) {
	reader, err := newValueReader(bytes)
	if err != nil {
		return nil, err
	}
	topics := reader.topicPartitions()
	reader.skipTags()
	return topics, reader.done("consumer group target assignment member")
}

func decodeCurrentAssignmentValue(bytes []byte) (currentAssignmentValue, error) {
	reader, err := newValueReader(bytes)
	if err != nil {
		return currentAssignmentValue{}, err
	}
	value := currentAssignmentValue{memberEpoch: reader.Int32(), previousMemberEpoch: reader.Int32(), state: reader.Int8()}
	value.assigned = reader.topicPartitions()
	value.pendingRevocation = reader.topicPartitions()
	reader.skipTags()
	return value, reader.done("consumer group current member assignment")
}

// consumerRecord is a decoded consumer-group record as the durable view
// keeps it: the key and the value's bytes (nil for a tombstone). The
// durable view keeps bytes, the latest per key as compaction and replay
// resolve it, and the live group is compared with it by encoding.
type consumerRecord struct {
	key   consumerKey
	value []byte
}

// decodeConsumerRecord checks a consumer-group record decodes, so bad
// bytes are refused on Load, never met later.
func decodeConsumerRecord(record Record) (decodedRecord, error) {
	key, err := decodeConsumerKey(record.Key)
	if err != nil {
		return decodedRecord{}, err
	}
	if key.group == "" {
		return decodedRecord{}, errors.New("group: consumer group record with an empty group id")
	}
	if record.Value != nil {
		if err := checkConsumerValue(key.recordType, record.Value); err != nil {
			return decodedRecord{}, err
		}
	}
	return decodedRecord{group: key.group, consumer: &consumerRecord{key: key, value: slices.Clone(record.Value)}}, nil
}

func checkConsumerValue(recordType int16, value []byte) error {
	var err error
	switch recordType {
	case recordTypeConsumerGroupMetadata:
		_, err = decodeGroupEpochValue(value, "consumer group metadata")
	case recordTypeConsumerGroupTargetAssignmentMetadata:
		_, err = decodeGroupEpochValue(value, "consumer group target assignment metadata")
	case recordTypeConsumerGroupPartitionMetadata:
		_, err = decodePartitionMetadataValue(value)
	case recordTypeConsumerGroupMemberMetadata:
		_, err = decodeMemberMetadataValue(value)
	case recordTypeConsumerGroupTargetAssignmentMember:
		_, err = decodeTargetMemberValue(value)
	case recordTypeConsumerGroupCurrentMemberAssignment:
		_, err = decodeCurrentAssignmentValue(value)
	}
	return err
}
