package group

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// The byte layout of the KIP-848 records, written out by hand from
// Kafka's JSON schemas: keys non-flexible (int16 type, int16-length
// strings), values version 0 flexible (compact lengths are length+1 as an
// unsigned varint, and every struct ends with an empty tag buffer, 00).

func unhex(t *testing.T, text string) []byte {
	t.Helper()
	out, err := hex.DecodeString(strings.Join(strings.Fields(text), ""))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConsumerRecordLayout(t *testing.T) {
	id := [16]byte{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb}
	idHex := "aa0102030405060708090a0b0c0d0ebb"
	instance := "i"
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"group metadata key", consumerKey{recordType: 3, group: "g"}.encode(), "0003 0001 67"},
		{"member metadata key", consumerKey{recordType: 5, group: "g", member: "m"}.encode(), "0005 0001 67 0001 6d"},
		{"current assignment key", consumerKey{recordType: 8, group: "g", member: "m"}.encode(), "0008 0001 67 0001 6d"},
		{"group epoch value", encodeGroupEpochValue(7), "0000 00000007 00"},
		{"partition metadata value", encodePartitionMetadataValue([]consumerTopicMetadata{{id: id, name: "t", partitions: 3}}),
			"0000 02 " + idHex + " 02 74 00000003 01 00 00"},
		{"member metadata value", encodeMemberMetadataValue(consumerMemberMetadata{instanceID: &instance, clientID: "c", clientHost: "h",
			subscribedTopicNames: []string{"t"}, rebalanceTimeoutMs: 30000}),
			"0000 02 69 00 02 63 02 68 02 02 74 00 00007530 00 00"},
		{"target member value", encodeTargetMemberValue([]topicIDPartitions{{id: id, partitions: []int32{0, 2}}}),
			"0000 02 " + idHex + " 03 00000000 00000002 00 00"},
		{"current assignment value", encodeCurrentAssignmentValue(currentAssignmentValue{memberEpoch: 5, previousMemberEpoch: 4, state: 1,
			assigned: []topicIDPartitions{{id: id, partitions: []int32{1}}}, pendingRevocation: []topicIDPartitions{}}),
			"0000 00000005 00000004 01 02 " + idHex + " 02 00000001 00 01 00"},
	} {
		if want := unhex(t, c.want); !bytes.Equal(c.got, want) {
			t.Errorf("%s: %x, want %x", c.name, c.got, want)
		}
	}
}

func TestConsumerRecordsRoundTrip(t *testing.T) {
	id := [16]byte{7}
	rack, regex := "r", "x.*"
	member := consumerMemberMetadata{rackID: &rack, clientID: "c", clientHost: "h", subscribedTopicNames: []string{"a", "b"},
		subscribedTopicRegex: &regex, rebalanceTimeoutMs: 5, serverAssignor: stringPointer("range")}
	decoded, err := decodeMemberMetadataValue(encodeMemberMetadataValue(member))
	if err != nil || !bytes.Equal(encodeMemberMetadataValue(decoded), encodeMemberMetadataValue(member)) || *decoded.serverAssignor != "range" {
		t.Fatalf("member metadata: %+v %v", decoded, err)
	}
	current := currentAssignmentValue{memberEpoch: 3, previousMemberEpoch: 2, state: 2,
		assigned: []topicIDPartitions{{id: id, partitions: []int32{4}}}, pendingRevocation: []topicIDPartitions{{id: id, partitions: []int32{5}}}}
	back, err := decodeCurrentAssignmentValue(encodeCurrentAssignmentValue(current))
	if err != nil || back.memberEpoch != 3 || back.state != 2 || back.pendingRevocation[0].partitions[0] != 5 {
		t.Fatalf("current assignment: %+v %v", back, err)
	}
	// A value with a tagged field of a later Kafka (4.1's MetadataHash,
	// tag 0 of 8 bytes) is read, the field skipped.
	tagged := unhex(t, "0000 00000009 01 00 08 0102030405060708")
	if epoch, err := decodeGroupEpochValue(tagged, "test"); err != nil || epoch != 9 {
		t.Fatalf("tagged epoch value: %d %v", epoch, err)
	}
	for _, bad := range []Record{
		{Key: unhex(t, "0003 0005 67"), Value: encodeGroupEpochValue(1)},                                    // key shorter than its string
		{Key: consumerKey{recordType: 3, group: "g"}.encode(), Value: unhex(t, "0001 00000001 00")},         // value version 1
		{Key: consumerKey{recordType: 8, group: "g", member: "m"}.encode(), Value: unhex(t, "0000 000000")}, // truncated
		{Key: consumerKey{recordType: 4, group: "g"}.encode(), Value: unhex(t, "0000 ff ff ff ff 0f")},      // absurd array
		{Key: consumerKey{recordType: 3, group: ""}.encode(), Value: encodeGroupEpochValue(1)},              // no group
	} {
		if _, err := decodeRecord(bad); err == nil {
			t.Errorf("record %x/%x decoded", bad.Key, bad.Value)
		}
	}
}
