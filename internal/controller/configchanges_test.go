package controller

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

func setConfig(resource metadata.ConfigResource, key, value string) AlterConfigsRequest {
	return AlterConfigsRequest{Resource: resource, Incremental: true, Changes: []ConfigChange{{Key: key, Op: ConfigSet, Value: value}}}
}

// Rule min-isr-race: a min.insync.replicas change bumps the partition
// epoch of every partition of the topic after the config record, so an
// ISR shrink proposed before it fails the compare-and-set; with the rule
// off only the config is written and the shrink goes through.
func TestMinInsyncChangeBumpsPartitionEpochs(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		c := newCluster(t)
		c.register(1, 2, 3)
		c.createTopic("orders", 2, 3, 2, false)
		before := c.partition("orders", 0)
		in := rules.Rules{}
		if legacy {
			in = in.Without(rules.MinISRRace)
		}
		records, code, message, err := AlterConfigs(c.image, setConfig(ordersResource, "min.insync.replicas", "3"), in)
		if code != 0 || err != nil {
			t.Fatalf("%s %s %v", CodeName(code), message, err)
		}
		want := "config topic orders min.insync.replicas=3\n"
		if !legacy {
			for index := range int32(2) {
				p := c.partition("orders", index)
				p.PartitionEpoch++
				want += bumped(p)
			}
		}
		checkRecords(t, records, want)
		c.apply(records)
		if config, _ := c.image.TopicConfig("orders"); config.MinInsyncReplicas != 3 {
			t.Fatalf("min.insync.replicas %d after the change", config.MinInsyncReplicas)
		}
		// The leader's shrink, built on the partition epoch before the change.
		leader, follower := before.Replicas[0], before.Replicas[1]
		item := AlterPartitionItem{TopicPartition: before.TopicPartition, LeaderEpoch: before.LeaderEpoch,
			PartitionEpoch: before.PartitionEpoch, NewISR: []BrokerIDAndEpoch{{leader, c.epoch(leader)}, {follower, c.epoch(follower)}}}
		_, response, err := AlterPartition(c.image, AlterPartitionRequest{BrokerID: leader, BrokerEpoch: c.epoch(leader),
			Partitions: []AlterPartitionItem{item}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := CodeName(response.Partitions[0].ErrorCode), map[bool]string{false: "INVALID_UPDATE_VERSION", true: "NONE"}[legacy]; got != want {
			t.Errorf("legacy=%t: the stale shrink got %s, want %s", legacy, got, want)
		}
	}
}

// An ELR is cleared only where the ISR reaches the new
// min.insync.replicas (docs/compatibility.md says why tide differs from
// Kafka 4.0 here); below it, it stays.
func TestMinInsyncChangeClearsELROnlyWhereTheISRReachesIt(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 2, 3, 3, false)
	zero, one := c.partition("orders", 0), c.partition("orders", 1)
	records, _ := c.alter("orders", 0, zero.Replicas[0], zero.Replicas[1])
	c.apply(records)
	records, _ = c.alter("orders", 1, one.Replicas[0])
	c.apply(records)
	zero, one = c.partition("orders", 0), c.partition("orders", 1)
	if len(zero.ELR) != 1 || len(one.ELR) != 2 {
		t.Fatalf("setup: %v, %v", zero, one)
	}
	records, code, message, err := AlterConfigs(c.image, setConfig(ordersResource, "min.insync.replicas", "2"), rules.Rules{})
	if code != 0 || err != nil {
		t.Fatalf("%s %s %v", CodeName(code), message, err)
	}
	cleared := zero
	cleared.ELR, cleared.PartitionEpoch = nil, zero.PartitionEpoch+1
	one.PartitionEpoch++
	checkRecords(t, records, bumped(cleared)+"config topic orders min.insync.replicas=2\n"+bumped(one))
	c.apply(records)
}

// bumped is the record of a partition change to state p.
func bumped(p metadata.PartitionState) string {
	return metadata.PartitionChange{TopicPartition: p.TopicPartition, Leader: p.Leader, ISR: p.ISR, ELR: p.ELR,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, LeaderRecoveryState: p.LeaderRecoveryState}.String() + "\n"
}

// A cluster-wide default reaches the topics without their own value, and
// deleting a topic's own value falls back to it.
func TestBrokerDefaultMinInsyncReachesInheritingTopics(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 1, false)
	c.createTopic("pinned", 1, 3, 1, false)
	c.apply(alterRecords(t, c, setConfig(metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "pinned"}, "min.insync.replicas", "1")))
	records := alterRecords(t, c, setConfig(metadata.ConfigResource{Type: metadata.ConfigBrokerDefault}, "min.insync.replicas", "2"))
	orders := c.partition("orders", 0)
	orders.PartitionEpoch++
	checkRecords(t, records, "config broker-default min.insync.replicas=2\n"+bumped(orders))
	c.apply(records)
	if orders, _ := c.image.TopicConfig("orders"); orders.MinInsyncReplicas != 2 {
		t.Fatalf("orders inherits %d", orders.MinInsyncReplicas)
	}
	c.apply(alterRecords(t, c, AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "pinned"},
		Incremental: true, Changes: []ConfigChange{{Key: "min.insync.replicas", Op: ConfigDelete}}}))
	if pinned, _ := c.image.TopicConfig("pinned"); pinned.MinInsyncReplicas != 2 {
		t.Fatalf("pinned falls back to %d", pinned.MinInsyncReplicas)
	}
}

// Enabling unclean.leader.election.enable elects a leader at once for an
// offline partition, from the replicas out of the ISR and ELR.
func TestEnablingUncleanElectsOfflinePartitions(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 1, false)
	replicas := c.partition("orders", 0).Replicas
	records, _ := c.alter("orders", 0, replicas[0])
	c.apply(records)
	c.fence(replicas[0])
	before := c.partition("orders", 0)
	if before.Leader != metadata.NoBroker {
		t.Fatalf("setup: %v", before)
	}
	records = alterRecords(t, c, setConfig(ordersResource, "unclean.leader.election.enable", "true"))
	elected := metadata.PartitionState{TopicPartition: before.TopicPartition, Leader: replicas[1], ISR: []metadata.BrokerID{replicas[1]},
		LeaderEpoch: before.LeaderEpoch + 1, PartitionEpoch: before.PartitionEpoch + 1, LeaderRecoveryState: metadata.Recovering}
	checkRecords(t, records, "config topic orders unclean.leader.election.enable=true\n"+bumped(elected))
	c.apply(records)
	// Turning it on again, or off, elects nobody.
	if records := alterRecords(t, c, setConfig(ordersResource, "unclean.leader.election.enable", "false")); len(records) != 1 {
		t.Fatalf("turning it off wrote %v", records)
	}
}

func alterRecords(t *testing.T, c *cluster, request AlterConfigsRequest) []metadata.Record {
	t.Helper()
	records, code, message, err := AlterConfigs(c.image, request, rules.Rules{})
	if code != 0 || err != nil {
		t.Fatalf("%s %s %v", CodeName(code), message, err)
	}
	return records
}

// A topic may not drop its own min.insync.replicas for a cluster-wide
// default above its replication factor: INVALID_CONFIG, not a decision
// the image would refuse.
func TestDroppingMinInsyncForATooLargeDefaultIsRefused(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 1, false)
	c.createTopic("pair", 1, 2, 1, false)
	pair := metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "pair"}
	c.apply(alterRecords(t, c, setConfig(pair, "min.insync.replicas", "1")))
	c.apply(alterRecords(t, c, setConfig(metadata.ConfigResource{Type: metadata.ConfigBrokerDefault}, "min.insync.replicas", "3")))
	records, code, message, err := AlterConfigs(c.image, AlterConfigsRequest{Resource: pair, Incremental: true,
		Changes: []ConfigChange{{Key: "min.insync.replicas", Op: ConfigDelete}}}, rules.Rules{})
	if err != nil || code != kerr.InvalidConfig.Code || len(records) != 0 || !strings.Contains(message, "cluster-wide default") {
		t.Fatalf("%s %q %v %v", CodeName(code), message, records, err)
	}
}

// A topic created without its own min.insync.replicas under a cluster-wide
// default above its replication factor is INVALID_CONFIG.
func TestCreateTopicUnderATooLargeDefaultIsRefused(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.apply(alterRecords(t, c, setConfig(metadata.ConfigResource{Type: metadata.ConfigBrokerDefault}, "min.insync.replicas", "3")))
	_, code, err := CreateTopic(c.image, CreateTopicRequest{Name: "pair", Partitions: 1, ReplicationFactor: 2,
		Config: metadata.TopicConfig{MinInsyncReplicas: 1}}, c.topicIDs)
	if err != nil || code != kerr.InvalidConfig.Code {
		t.Fatalf("%s %v", CodeName(code), err)
	}
	c.must(CreateTopic(c.image, CreateTopicRequest{Name: "pair", Partitions: 1, ReplicationFactor: 2,
		Config: metadata.TopicConfig{MinInsyncReplicas: 1}, Configs: map[string]string{"min.insync.replicas": "1"}}, c.topicIDs))
}
