package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCreateTopicCodes(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3, 4)
	c.createTopic("taken", 1, 1, 1, false)
	c.must(ControlledShutdown(c.image, 4, c.epoch(4)))
	tests := []struct {
		name    string
		request CreateTopicRequest
		want    int16
	}{
		{"ok", CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 3}, 0},
		{"empty name", CreateTopicRequest{Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException.Code},
		{"dot name", CreateTopicRequest{Name: "..", Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException.Code},
		{"slash in name", CreateTopicRequest{Name: "a/b", Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException.Code},
		{"long name", CreateTopicRequest{Name: strings.Repeat("a", 250), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException.Code},
		{"exists", CreateTopicRequest{Name: "taken", Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists.Code},
		{"no partitions", CreateTopicRequest{Name: "orders", Partitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions.Code},
		{"too many partitions", CreateTopicRequest{Name: "orders", Partitions: MaxPartitionsPerTopic + 1, ReplicationFactor: 1},
			kerr.InvalidPartitions.Code},
		{"replication factor 0", CreateTopicRequest{Name: "orders", Partitions: 1}, kerr.InvalidReplicationFactor.Code},
		// Broker 4 is shutting down: only 3 brokers may host a replica.
		{"more replicas than brokers", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 4},
			kerr.InvalidReplicationFactor.Code},
		{"config disagrees", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Config: metadata.TopicConfig{ReplicationFactor: 3}}, kerr.InvalidReplicationFactor.Code},
		{"min.insync above RF", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Config: metadata.TopicConfig{MinInsyncReplicas: 3}}, kerr.InvalidConfig.Code},
		{"negative min.insync", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Config: metadata.TopicConfig{MinInsyncReplicas: -1}}, kerr.InvalidConfig.Code},
		{"unknown config", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Configs: map[string]string{"no.such.config": "1"}}, kerr.InvalidConfig.Code},
		{"config out of range", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Configs: map[string]string{"segment.bytes": "1"}}, kerr.InvalidConfig.Code},
		{"min.insync config above RF", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Configs: map[string]string{"min.insync.replicas": "3"}}, kerr.InvalidConfig.Code},
		{"assigned", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Assignments: [][]metadata.BrokerID{{3, 1}}}, 0},
		{"assignment per partition", CreateTopicRequest{Name: "orders", Partitions: 2, ReplicationFactor: 2,
			Assignments: [][]metadata.BrokerID{{3, 1}}}, kerr.InvalidReplicaAssignment.Code},
		{"assignment repeats a broker", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Assignments: [][]metadata.BrokerID{{3, 3}}}, kerr.InvalidReplicaAssignment.Code},
		{"assignment to a shutting-down broker", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Assignments: [][]metadata.BrokerID{{1, 4}}}, kerr.InvalidReplicaAssignment.Code},
		{"assignment of the wrong size", CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
			Assignments: [][]metadata.BrokerID{{1, 2, 3}}}, kerr.InvalidReplicaAssignment.Code},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			records, code, err := CreateTopic(c.image, test.request, c.topicIDs)
			if err != nil || code != test.want {
				t.Fatalf("got %s %v, want %s", CodeName(code), err, CodeName(test.want))
			}
			if (code == 0) != (len(records) == 1+len(test.request.Configs)) {
				t.Errorf("got %d records with %s", len(records), CodeName(code))
			}
		})
	}
}

// Configs given at creation follow the CreateTopic in its batch, one
// config record each in key order, and min.insync.replicas and
// unclean.leader.election.enable among them set the topic's TopicConfig,
// which the controller's ISR and election decisions read.
func TestCreateTopicWithConfigs(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	request := CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 3, Configs: map[string]string{
		"retention.ms": "60000", "cleanup.policy": "compact,delete", "min.insync.replicas": "2", "unclean.leader.election.enable": "true"}}
	records, code, err := CreateTopic(c.image, request, c.topicIDs)
	if err != nil || code != 0 {
		t.Fatal(CodeName(code), err)
	}
	var keys []string
	for _, r := range records[1:] {
		config := r.(metadata.ConfigRecord)
		if config.Resource != (metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "orders"}) || config.Value != request.Configs[config.Key] {
			t.Errorf("record %v", config)
		}
		keys = append(keys, config.Key)
	}
	if want := []string{"cleanup.policy", "min.insync.replicas", "retention.ms", "unclean.leader.election.enable"}; !slices.Equal(keys, want) {
		t.Fatalf("config records %v, want %v", keys, want)
	}
	if got := records[0].(metadata.CreateTopic).Config; got.MinInsyncReplicas != 2 || !got.UncleanLeaderElection {
		t.Fatalf("topic config %v", got)
	}
}

// An explicit assignment is kept in its order: its first replica leads.
func TestCreateTopicAssigned(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	records, code, err := CreateTopic(c.image, CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 3,
		Assignments: [][]metadata.BrokerID{{2, 3, 1}}}, c.topicIDs)
	if err != nil || code != 0 {
		t.Fatal(CodeName(code), err)
	}
	partition := records[0].(metadata.CreateTopic).Partitions[0]
	if !slices.Equal(partition.Replicas, []metadata.BrokerID{2, 3, 1}) || partition.Leader != 2 || !slices.Equal(partition.ISR, partition.Replicas) {
		t.Errorf("got %v", partition)
	}
}

func TestCreateTopicPlacement(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3, 4, 5)
	c.fence(5)
	records, code, err := CreateTopic(c.image, CreateTopicRequest{Name: "orders", Partitions: 8, ReplicationFactor: 3,
		Config: metadata.TopicConfig{MinInsyncReplicas: 2}}, seededTopicIDs(1))
	if err != nil || code != 0 {
		t.Fatal(CodeName(code), err)
	}
	again, _, _ := CreateTopic(c.image.Clone(), CreateTopicRequest{Name: "orders", Partitions: 8, ReplicationFactor: 3,
		Config: metadata.TopicConfig{MinInsyncReplicas: 2}}, seededTopicIDs(1))
	if describeRecords(again) != describeRecords(records) {
		t.Errorf("placement is not deterministic")
	}
	create := records[0].(metadata.CreateTopic)
	if create.Config != (metadata.TopicConfig{ReplicationFactor: 3, MinInsyncReplicas: 2}) {
		t.Errorf("config %v", create.Config)
	}
	leaders := map[metadata.BrokerID]int{}
	for i, partition := range create.Partitions {
		if partition.Leader != partition.Replicas[0] || !slices.Equal(partition.ISR, partition.Replicas) ||
			partition.LeaderEpoch != 0 || partition.PartitionEpoch != 0 || int(partition.Partition) != i {
			t.Errorf("bad initial state %v", partition)
		}
		if slices.Contains(partition.Replicas, 5) {
			t.Errorf("replica on fenced broker 5: %v", partition)
		}
		leaders[partition.Leader]++
	}
	for _, id := range []metadata.BrokerID{1, 2, 3, 4} {
		if leaders[id] != 2 {
			t.Errorf("leaders do not spread: %v", leaders)
		}
	}
	// Another name starts elsewhere, so that single-partition topics do not
	// all land their leader on the same broker.
	starts := map[metadata.BrokerID]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		records, _, _ := CreateTopic(c.image, CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: 1}, c.topicIDs)
		starts[records[0].(metadata.CreateTopic).Partitions[0].Leader] = true
	}
	if len(starts) < 2 {
		t.Errorf("every topic starts on the same broker: %v", starts)
	}
}

func TestDeleteTopic(t *testing.T) {
	c := newCluster(t)
	c.register(1)
	c.createTopic("orders", 1, 1, 1, false)
	if _, code, _ := DeleteTopic(c.image, "nope", metadata.NoTopicID); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("got %s", CodeName(code))
	}
	records, code, err := DeleteTopic(c.image, "orders", metadata.NoTopicID)
	if err != nil || code != 0 {
		t.Fatal(CodeName(code), err)
	}
	checkRecords(t, records, "delete-topic name=orders\n")
	c.apply(records)
	if len(c.image.Topics()) != 0 {
		t.Errorf("topic still there")
	}
}

// A topic created again under a deleted topic's name gets a new id, and a
// deletion by id finds the topic that has it; an unknown id, or an id that
// is not the named topic's, is UNKNOWN_TOPIC_ID.
func TestTopicIDs(t *testing.T) {
	c := newCluster(t)
	c.register(1)
	c.createTopic("ghost", 1, 1, 1, false)
	first, _ := c.image.TopicID("ghost")
	if !first.Usable() {
		t.Fatalf("id %v", first)
	}
	c.apply(c.mustDelete(DeleteTopic(c.image, "", first)))
	if _, code, _ := DeleteTopic(c.image, "", first); code != kerr.UnknownTopicID.Code {
		t.Errorf("deleting a deleted id: %s", CodeName(code))
	}
	c.createTopic("ghost", 1, 1, 1, false)
	second, _ := c.image.TopicID("ghost")
	if second == first || !second.Usable() {
		t.Fatalf("re-created with id %v after %v", second, first)
	}
	if _, code, _ := DeleteTopic(c.image, "ghost", first); code != kerr.UnknownTopicID.Code {
		t.Errorf("deleting the new ghost under the old id: %s", CodeName(code))
	}
	records := c.mustDelete(DeleteTopic(c.image, "ghost", second))
	checkRecords(t, records, "delete-topic name=ghost\n")
}

func (c *cluster) mustDelete(records []metadata.Record, code int16, err error) []metadata.Record {
	c.t.Helper()
	if err != nil || code != 0 {
		c.t.Fatal(CodeName(code), err)
	}
	return records
}

// The upgrade step gives every topic without an id one, in bounded
// decisions, and nothing once all have one.
func TestAssignMissingTopicIDs(t *testing.T) {
	c := newCluster(t)
	c.register(1)
	var legacy []metadata.Record
	for i := range MaxTopicIDAssignments + 3 {
		name := fmt.Sprintf("t%03d", i)
		legacy = append(legacy, metadata.CreateTopic{Name: name, Config: metadata.TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
			Partitions: []metadata.PartitionState{{TopicPartition: metadata.TopicPartition{Topic: name}, Replicas: []metadata.BrokerID{1},
				ISR: []metadata.BrokerID{1}, Leader: 1}}})
	}
	c.apply(legacy)
	c.createTopic("modern", 1, 1, 1, false)
	first, err := AssignMissingTopicIDs(c.image, c.topicIDs)
	if err != nil || len(first) != MaxTopicIDAssignments {
		t.Fatalf("%d records, %v", len(first), err)
	}
	c.apply(first)
	second, err := AssignMissingTopicIDs(c.image, c.topicIDs)
	if err != nil || len(second) != 3 || second[0].(metadata.AssignTopicID).Name != fmt.Sprintf("t%03d", MaxTopicIDAssignments) {
		t.Fatalf("%v, %v", second, err)
	}
	c.apply(second)
	if none, err := AssignMissingTopicIDs(c.image, c.topicIDs); none != nil || err != nil || len(c.image.TopicsWithoutID()) != 0 {
		t.Fatalf("%v, %v, left %v", none, err, c.image.TopicsWithoutID())
	}
	if _, _, err := CreateTopic(c.image, CreateTopicRequest{Name: "x", Partitions: 1, ReplicationFactor: 1}, strings.NewReader("")); err == nil {
		t.Errorf("a failed random source created a topic")
	}
}

func TestTopicNameProblemInKafkasWords(t *testing.T) {
	for name, want := range map[string]string{
		"orders.v2_x-y":          "",
		"":                       "it can't be empty",
		"..":                     `cannot be "." or ".."`,
		"bad name!":              `Topic name "bad name!" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		strings.Repeat("a", 250): "it can't be longer than 249 characters",
	} {
		got := TopicNameProblem(name)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("TopicNameProblem(%q) = %q, want %q", name, got, want)
		}
		if validTopicName(name) != (want == "") {
			t.Errorf("validTopicName(%q) disagrees", name)
		}
	}
}
