package group

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// hexBytes parses hex with spaces, for byte layouts written out by hand.
func hexBytes(t *testing.T, spaced string) []byte {
	t.Helper()
	decoded, err := hex.DecodeString(strings.ReplaceAll(spaced, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return decoded
}

// TestRecordsAreWrittenInKafkasLayout checks the bytes of each record
// against Kafka's schemas (OffsetCommitKey/Value, GroupMetadataKey/Value
// in Kafka's group-coordinator message JSON), written out field by field:
// key type as int16, non-flexible strings as int16 length and bytes,
// nullable strings with length -1 for null, arrays and bytes with an int32
// length.
func TestRecordsAreWrittenInKafkasLayout(t *testing.T) {
	commit := offsetCommitRecord("g", topicPartition{"t", 2}, committedOffset{offset: 5, leaderEpoch: 7, metadata: "m", commitTimestampMs: 1000, expireTimestampMs: -1})
	wantKey := hexBytes(t, "0001 0001 67 0001 74 00000002")
	wantValue := hexBytes(t, "0003 0000000000000005 00000007 0001 6d 00000000000003e8")
	if !bytes.Equal(commit.Key, wantKey) || !bytes.Equal(commit.Value, wantValue) {
		t.Errorf("offset commit v3:\n key %x\nwant %x\n value %x\nwant  %x", commit.Key, wantKey, commit.Value, wantValue)
	}
	expiring := offsetCommitRecord("g", topicPartition{"t", 2}, committedOffset{offset: 5, leaderEpoch: 7, metadata: "", commitTimestampMs: 1000, expireTimestampMs: 2000})
	wantValue = hexBytes(t, "0001 0000000000000005 0000 00000000000003e8 00000000000007d0")
	if !bytes.Equal(expiring.Value, wantValue) {
		t.Errorf("offset commit v1 with expiry: %x, want %x", expiring.Value, wantValue)
	}
	metadata := groupMetadataRecord("g", groupMetadata{protocolType: "c", generation: 3, protocol: "r", leader: "m", stateTimestampMs: 9,
		members: []persistedMember{{memberID: "m", instanceID: "i", clientID: "x", clientHost: "h", rebalanceTimeoutMs: 20, sessionTimeoutMs: 10,
			subscription: []byte{1}, assignment: []byte{}}}})
	wantKey = hexBytes(t, "0002 0001 67")
	wantValue = hexBytes(t, "0003 0001 63 00000003 0001 72 0001 6d 0000000000000009 00000001"+
		" 0001 6d 0001 69 0001 78 0001 68 00000014 0000000a 00000001 01 00000000")
	if !bytes.Equal(metadata.Key, wantKey) || !bytes.Equal(metadata.Value, wantValue) {
		t.Errorf("group metadata v3:\n key %x\nwant %x\n value %x\nwant  %x", metadata.Key, wantKey, metadata.Value, wantValue)
	}
	empty := groupMetadataRecord("g", groupMetadata{protocolType: "", generation: 1, stateTimestampMs: 9})
	wantValue = hexBytes(t, "0003 0000 00000001 ffff ffff 0000000000000009 00000000")
	if !bytes.Equal(empty.Value, wantValue) {
		t.Errorf("empty group metadata: %x, want %x", empty.Value, wantValue)
	}
	if tombstone := groupTombstone("g"); tombstone.Value != nil || !bytes.Equal(tombstone.Key, hexBytes(t, "0002 0001 67")) {
		t.Errorf("group tombstone %+v", tombstone)
	}
}

// TestRecordsOfEveryVersionDecode reads the value versions Kafka has
// written (0-4, 4 flexible) and both offset key types, and skips the
// record types of KIP-848 and share groups.
func TestRecordsOfEveryVersionDecode(t *testing.T) {
	key := (&kmsg.OffsetCommitKey{Version: 0, Group: "g", Topic: "t", Partition: 1}).AppendTo(nil)
	for version := int16(0); version <= 4; version++ {
		value := (&kmsg.OffsetCommitValue{Version: version, Offset: 42, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 7, ExpireTimestamp: 9}).AppendTo(nil)
		decoded, err := decodeRecord(Record{Key: key, Value: value})
		if err != nil {
			t.Fatalf("offset value v%d: %v", version, err)
		}
		wantEpoch, wantExpiry := int32(-1), int64(-1)
		if version >= 3 {
			wantEpoch = 3
		}
		if version == 1 {
			wantExpiry = 9
		}
		got := *decoded.offset
		if decoded.group != "g" || *decoded.partition != (topicPartition{"t", 1}) || got.offset != 42 || got.metadata != "m" ||
			got.leaderEpoch != wantEpoch || got.expireTimestampMs != wantExpiry || got.commitTimestampMs != 7 {
			t.Errorf("offset value v%d: %+v", version, got)
		}
	}
	groupKey := (&kmsg.GroupMetadataKey{Version: 2, Group: "g"}).AppendTo(nil)
	for version := int16(0); version <= 4; version++ {
		value := kmsg.GroupMetadataValue{Version: version, ProtocolType: "consumer", Generation: 4, Protocol: stringPointer("range"),
			Leader: stringPointer("m"), CurrentStateTimestamp: 5,
			Members: []kmsg.GroupMetadataValueMember{{MemberID: "m", InstanceID: stringPointer("i"), SessionTimeoutMillis: 10, RebalanceTimeoutMillis: 20}}}
		decoded, err := decodeRecord(Record{Key: groupKey, Value: value.AppendTo(nil)})
		if err != nil {
			t.Fatalf("group value v%d: %v", version, err)
		}
		metadata := decoded.metadata
		member := metadata.members[0]
		wantRebalance, wantInstance, wantTimestamp := int32(20), "i", int64(5)
		if version < 1 {
			wantRebalance = 10
		}
		if version < 3 {
			wantInstance = ""
		}
		if version < 2 {
			wantTimestamp = -1
		}
		if metadata.generation != 4 || metadata.protocol != "range" || metadata.leader != "m" || member.rebalanceTimeoutMs != wantRebalance ||
			member.instanceID != wantInstance || metadata.stateTimestampMs != wantTimestamp {
			t.Errorf("group value v%d: %+v %+v", version, metadata, member)
		}
	}
	for _, recordType := range []int16{9, 15} { // share groups' records; 3-8 are consumer_records_test.go's
		if decoded, err := decodeRecord(Record{Key: []byte{0, byte(recordType), 0, 1, 'g'}, Value: []byte{0, 0}}); err != nil || !decoded.skip {
			t.Errorf("record type %d: %+v %v", recordType, decoded, err)
		}
	}
	for _, bad := range []Record{{Key: []byte{0}}, {Key: []byte{0xff, 0xff}}, {Key: key, Value: []byte{0, 9}}, {Key: key, Value: []byte{0, 3, 1}}} {
		if _, err := decodeRecord(bad); err == nil {
			t.Errorf("record %x/%x decoded", bad.Key, bad.Value)
		}
	}
}
