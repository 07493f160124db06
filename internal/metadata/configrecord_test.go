package metadata

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/codec"
)

func topicConfig(topic, key, value string) ConfigRecord {
	return ConfigRecord{Resource: ConfigResource{Type: ConfigTopic, Name: topic}, Key: key, Value: value}
}

func brokerDefault(key, value string) ConfigRecord {
	return ConfigRecord{Resource: ConfigResource{Type: ConfigBrokerDefault}, Key: key, Value: value}
}

func oneBrokerTopic(name string) CreateTopic {
	return CreateTopic{Name: name, Config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
		Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: name}, Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}}}
}

func applyConfigs(t *testing.T, img *Image, records ...Record) {
	t.Helper()
	for _, r := range records {
		if _, err := img.Apply(Entry{Offset: img.nextOffset, Record: r}); err != nil {
			t.Fatal(err)
		}
	}
}

// Config records set and delete a topic's configs and the broker
// defaults; a topic's configs go with the topic, so a topic created again
// under the same name starts without them (rule config-needs-resource).
func TestConfigRecordsApply(t *testing.T) {
	img := NewImage()
	applyConfigs(t, img, RegisterBroker{ID: 1, Epoch: 0, Incarnation: "a"}, UnfenceBroker{ID: 1, Epoch: 0}, oneBrokerTopic("t"),
		topicConfig("t", "retention.ms", "1000"), topicConfig("t", "cleanup.policy", "compact"),
		brokerDefault("log.retention.ms", "5000"))
	if got := img.TopicConfigs("t"); !maps.Equal(got, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}) {
		t.Fatalf("topic configs %v", got)
	}
	applyConfigs(t, img, ConfigRecord{Resource: ConfigResource{Type: ConfigTopic, Name: "t"}, Key: "retention.ms", Delete: true})
	if got := img.TopicConfigs("t"); !maps.Equal(got, map[string]string{"cleanup.policy": "compact"}) {
		t.Fatalf("after delete %v", got)
	}
	if got := img.BrokerDefaultConfigs(); got["log.retention.ms"] != "5000" {
		t.Fatalf("broker defaults %v", got)
	}
	if !strings.Contains(img.Describe(), "configs: cleanup.policy=compact") {
		t.Fatalf("describe:\n%s", img.Describe())
	}
	applyConfigs(t, img, DeleteTopic{Name: "t"}, oneBrokerTopic("t"))
	if got := img.TopicConfigs("t"); len(got) != 0 {
		t.Fatalf("configs survived the topic: %v", got)
	}
	before := img.Offset()
	_, err := img.Apply(Entry{Offset: img.nextOffset, Record: topicConfig("missing", "retention.ms", "1")})
	if !errors.Is(err, ErrUnknownTopic) || img.Offset() != before {
		t.Fatalf("config of a missing topic: %v, offset %d", err, img.Offset())
	}
	bad := ConfigRecord{Resource: ConfigResource{Type: ConfigBrokerDefault, Name: "3"}, Key: "x", Value: "y"}
	if _, err := img.Apply(Entry{Offset: img.nextOffset, Record: bad}); !errors.Is(err, ErrInvariant) {
		t.Fatalf("broker default with a name: %v", err)
	}
}

// A snapshot with configs is version 3 and rebuilds them; a clone carries
// them and shares nothing.
func TestImageWithConfigsRoundTrip(t *testing.T) {
	img := NewImage()
	applyConfigs(t, img, RegisterBroker{ID: 1, Epoch: 0, Incarnation: "a"}, UnfenceBroker{ID: 1, Epoch: 0}, oneBrokerTopic("t"))
	plain := EncodeImage(nil, img)
	if plain[0] == imageTrailingVersion {
		t.Fatal("an image without configs needs no trailing section")
	}
	applyConfigs(t, img, topicConfig("t", "max.message.bytes", "2000000"), brokerDefault("log.segment.bytes", "1048576"))
	encoded := EncodeImage(nil, img)
	if encoded[0] != imageTrailingVersion {
		t.Fatalf("version %d", encoded[0])
	}
	decoded, err := DecodeImage(encoded)
	if err != nil {
		t.Fatal(err)
	}
	if !decoded.Equal(img) || decoded.TopicConfigs("t")["max.message.bytes"] != "2000000" ||
		decoded.BrokerDefaultConfigs()["log.segment.bytes"] != "1048576" {
		t.Fatalf("decoded:\n%s\nwant:\n%s", decoded.Describe(), img.Describe())
	}
	clone := img.Clone()
	applyConfigs(t, clone, topicConfig("t", "max.message.bytes", "1"))
	if img.TopicConfigs("t")["max.message.bytes"] != "2000000" {
		t.Fatal("clone shares configs")
	}
}

// The upgrade case: a metadata log and a snapshot written before config
// records (versions 1 and 2, no tag 11) still open, with no configs.
func TestOldImagesAndLogsOpen(t *testing.T) {
	img := NewImage()
	records := []Record{RegisterBroker{ID: 1, Epoch: 0, Incarnation: "a", Endpoint: "h:1"}, UnfenceBroker{ID: 1, Epoch: 0}, oneBrokerTopic("t")}
	decodedRecords, err := DecodeRecords(EncodeRecords(nil, records))
	if err != nil {
		t.Fatal(err)
	}
	applyConfigs(t, img, decodedRecords...)
	encoded := EncodeImage(nil, img)
	if encoded[0] != imageEndpointsVersion {
		t.Fatalf("version %d", encoded[0])
	}
	decoded, err := DecodeImage(encoded)
	if err != nil || len(decoded.TopicConfigs("t")) != 0 || len(decoded.BrokerDefaultConfigs()) != 0 {
		t.Fatalf("%v %v", err, decoded)
	}
}

// The trailing section holds only records that rebuild state: a deletion,
// a config of a topic the snapshot lacks or another record type is corrupt.
func TestTrailingSectionRefusesOtherRecords(t *testing.T) {
	img := NewImage()
	applyConfigs(t, img, RegisterBroker{ID: 1, Epoch: 0, Incarnation: "a"}, UnfenceBroker{ID: 1, Epoch: 0}, oneBrokerTopic("t"),
		topicConfig("t", "retention.ms", "1"))
	base := EncodeImage(nil, img)
	// The trailing section is the last thing: count 1 and one record.
	e := &codec.Encoder{}
	AppendRecord(e, topicConfig("t", "retention.ms", "1"))
	prefix := base[:len(base)-len(e.B)-1]
	for _, bad := range []Record{
		ConfigRecord{Resource: ConfigResource{Type: ConfigTopic, Name: "t"}, Key: "retention.ms", Delete: true},
		topicConfig("gone", "retention.ms", "1"),
		DeleteTopic{Name: "t"},
	} {
		e := &codec.Encoder{B: append([]byte(nil), prefix...)}
		e.Uvarint(1)
		AppendRecord(e, bad)
		if _, err := DecodeImage(e.B); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v in the trailing section: %v", bad, err)
		}
	}
}

// The min.insync.replicas and unclean.leader.election.enable decisions
// read come from the topic's own config, else the cluster-wide default,
// else the topic's creation; a record that would leave an ELR beside an
// ISR reaching the new value, or a value above the replication factor, is
// refused and changes nothing; a snapshot keeps the effective values.
func TestDecisionConfigsFollowConfigRecords(t *testing.T) {
	img := NewImage()
	three := CreateTopic{Name: "t", Config: TopicConfig{ReplicationFactor: 3, MinInsyncReplicas: 3},
		Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "t"}, Replicas: []BrokerID{1, 2, 3}, ISR: []BrokerID{1, 2}, ELR: []BrokerID{3}, Leader: 1}}}
	var records []Record
	for id := BrokerID(1); id <= 3; id++ {
		records = append(records, RegisterBroker{ID: id, Epoch: BrokerEpoch(id), Incarnation: "a"}, UnfenceBroker{ID: id, Epoch: BrokerEpoch(id)})
	}
	applyConfigs(t, img, append(records, three, brokerDefault("unclean.leader.election.enable", "true"))...)
	if config, _ := img.TopicConfig("t"); config.MinInsyncReplicas != 3 || !config.UncleanLeaderElection {
		t.Fatalf("config %v", config)
	}
	for _, refused := range []ConfigRecord{topicConfig("t", "min.insync.replicas", "2"), brokerDefault("min.insync.replicas", "1"),
		topicConfig("t", "min.insync.replicas", "4")} {
		before := img.Offset()
		if _, err := img.Apply(Entry{Offset: img.nextOffset, Record: refused}); !errors.Is(err, ErrInvariant) || img.Offset() != before {
			t.Fatalf("%v: %v", refused, err)
		}
		if config, _ := img.TopicConfig("t"); config.MinInsyncReplicas != 3 || len(img.TopicConfigs("t")) != 0 || len(img.BrokerDefaultConfigs()) != 1 {
			t.Fatalf("%v changed the image: %v %v", refused, config, img.TopicConfigs("t"))
		}
	}
	// A log from before the controller checked may hold a default above
	// the replication factor: it does not reach the topic.
	applyConfigs(t, img, brokerDefault("min.insync.replicas", "4"))
	if config, _ := img.TopicConfig("t"); config.MinInsyncReplicas != 3 {
		t.Fatalf("a default above the replication factor reached the topic: %v", config)
	}
	applyConfigs(t, img, PartitionChange{TopicPartition: TopicPartition{Topic: "t"}, Leader: 1, ISR: []BrokerID{1, 2}, PartitionEpoch: 1},
		brokerDefault("min.insync.replicas", "2"), topicConfig("t", "unclean.leader.election.enable", "false"))
	if config, _ := img.TopicConfig("t"); config.MinInsyncReplicas != 2 || config.UncleanLeaderElection {
		t.Fatalf("config %v", config)
	}
	if with, _ := img.TopicConfigWith("t", map[string]string{"min.insync.replicas": "1"}, nil); with.MinInsyncReplicas != 1 {
		t.Fatalf("TopicConfigWith %v", with)
	}
	decoded, err := DecodeImage(EncodeImage(nil, img))
	if err != nil || !decoded.Equal(img) {
		t.Fatalf("snapshot: %v", err)
	}
	if config, _ := decoded.TopicConfig("t"); config.MinInsyncReplicas != 2 {
		t.Fatalf("snapshot config %v", config)
	}
}
