package metadata

import (
	"bytes"
	"errors"
	"testing"
)

// Kafka's text form: URL-safe base64 without padding, and back.
func TestTopicIDText(t *testing.T) {
	id := TopicID{0xfb, 0xff, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if got := id.String(); got != "-_8CAwQFBgcICQoLDA0ODw" {
		t.Fatalf("text %q", got)
	}
	if parsed, err := ParseTopicID(id.String()); err != nil || parsed != id {
		t.Fatalf("parsed %v, %v", parsed, err)
	}
	if got := id.Hex(); got != "fbff02030405060708090a0b0c0d0e0f" {
		t.Fatalf("hex %q", got)
	}
	for _, bad := range []string{"", "AAAA", "AAAAAAAAAAAAAAAAAAAAAA==", "!AAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := ParseTopicID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Rule usable-topic-id: the zero id, the metadata topic's and ids whose
// text starts with "-" are redrawn; so is an id another topic has.
func TestNewTopicIDSkipsUnusable(t *testing.T) {
	img := NewImage()
	taken := TopicID{15: 7}
	img.topics = map[string]*topicImage{"t": {id: taken}}
	dash := TopicID{0xfb}
	good := TopicID{1, 15: 2}
	var draws []byte
	for _, id := range []TopicID{NoTopicID, MetadataTopicID, dash, taken, good} {
		draws = append(draws, id[:]...)
	}
	id, err := NewTopicID(img, bytes.NewReader(draws))
	if err != nil || id != good {
		t.Fatalf("drew %v, %v; want %v", id, err, good)
	}
	if _, err := NewTopicID(img, bytes.NewReader(nil)); !errors.Is(err, ErrTopicIDSource) {
		t.Fatalf("an empty source gave %v", err)
	}
	if _, err := NewTopicID(img, bytes.NewReader(make([]byte, 16*maxTopicIDDraws+16))); !errors.Is(err, ErrTopicIDSource) {
		t.Fatalf("a source of zeros gave %v", err)
	}
}

// A CreateTopic written before topic ids (tag 6, no id) still decodes,
// with no id; one with an id is written under its own tag.
func TestCreateTopicWithoutIDDecodes(t *testing.T) {
	legacy := CreateTopic{Name: "legacy", Config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
		Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "legacy"}, Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}}}
	encoded := EncodeRecords(nil, []Record{legacy})
	if encoded[2] != tagCreateTopic {
		t.Fatalf("a CreateTopic without id is written with tag %d", encoded[2])
	}
	// The bytes today's build wrote for this record.
	written := []byte{1, 1, 6, 6, 'l', 'e', 'g', 'a', 'c', 'y', 2, 2, 0, 1, 6, 'l', 'e', 'g', 'a', 'c', 'y', 0, 2, 2, 2, 2, 1, 2, 0, 0, 0}
	if !bytes.Equal(written, encoded) {
		t.Fatalf("today's bytes %v, encoded now %v", written, encoded)
	}
	decoded, err := DecodeRecords(written)
	if err != nil || len(decoded) != 1 || decoded[0].(CreateTopic).ID != NoTopicID || decoded[0].(CreateTopic).Name != "legacy" {
		t.Fatalf("decoded %v, %v (encoded today: %v)", decoded, err, encoded)
	}
	withID := legacy
	withID.ID = TopicID{15: 9}
	if encoded := EncodeRecords(nil, []Record{withID}); encoded[2] != tagCreateTopicID {
		t.Fatalf("a CreateTopic with an id is written with tag %d", encoded[2])
	}
}
