package controller

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// topicConfigChange is a topic whose TopicConfig a config change moves.
type topicConfigChange struct {
	name          string
	before, after metadata.TopicConfig
}

// topicConfigChanges returns a config change's records, in the order
// brokers must apply them:
//
//  1. For each topic whose min.insync.replicas changes, the partitions
//     whose ISR reaches the new value lose their ELR (KIP-966: once the
//     high watermark may advance, a former member may miss committed
//     records). Only those: an ELR beside an ISR still below the new value
//     stays, unlike Kafka 4.0, which clears every ELR of the topic. Kafka
//     can: its controller keeps the last known ELR and may fall back on
//     it; tide has no such fallback, and clearing the ELR of a partition
//     whose ISR is empty would leave it offline for good.
//     These come first so no prefix of the log holds an ELR beside a large
//     enough ISR; a broker that sees them before the config still holds
//     the old, higher value, which only holds its high watermark back.
//  2. The config records.
//  3. Rule min-isr-race: every other partition of those topics gets its
//     partition epoch bumped, after the config, so a broker never sees
//     the new epoch without the new value. An ISR shrink a leader proposed
//     on the old epoch, under the old value, then fails the
//     compare-and-set (INVALID_UPDATE_VERSION); the leader proposes again
//     once it holds the new value, and counts its ISR against it.
//  4. When unclean.leader.election.enable becomes true, an election for
//     each offline partition of the topic (Kafka's controller does the
//     same): the operator turned it on to get them back.
func topicConfigChanges(img *metadata.Image, resource metadata.ConfigResource, next map[string]string,
	configRecords []metadata.Record, in rules.Rules) ([]metadata.Record, error) {
	d := newDecision(img)
	changed := changedTopicConfigs(img, resource, next)
	bumped := map[metadata.TopicPartition]bool{}
	for _, topic := range changed {
		if topic.before.MinInsyncReplicas == topic.after.MinInsyncReplicas {
			continue
		}
		for _, partition := range topicPartitions(d.image, topic.name) {
			if len(partition.ELR) == 0 || len(partition.ISR) < topic.after.MinInsyncReplicas {
				continue
			}
			change, _ := changeRecord(partition, election{leader: partition.Leader, isr: partition.ISR,
				recoveryState: partition.LeaderRecoveryState})
			if err := d.append(change); err != nil {
				return nil, err
			}
			bumped[partition.TopicPartition] = true
		}
	}
	for _, record := range configRecords {
		if err := d.append(record); err != nil {
			return nil, err
		}
	}
	for _, topic := range changed {
		if topic.before.MinInsyncReplicas != topic.after.MinInsyncReplicas && in.On(rules.MinISRRace) {
			if err := d.bumpPartitionEpochs(topic.name, bumped); err != nil {
				return nil, err
			}
		}
		if !topic.before.UncleanLeaderElection && topic.after.UncleanLeaderElection {
			if err := d.electOffline(topic.name, topic.after); err != nil {
				return nil, err
			}
		}
	}
	return d.records, nil
}

// changedTopicConfigs lists the topics, by name, whose TopicConfig the
// resource's new configs change: the topic itself, or for the broker
// default every topic that inherits a changed value.
func changedTopicConfigs(img *metadata.Image, resource metadata.ConfigResource, next map[string]string) []topicConfigChange {
	affected, own, defaults := img.Topics(), map[string]string(nil), next
	if resource.Type == metadata.ConfigTopic {
		affected, own, defaults = []string{resource.Name}, next, nil
	}
	var changed []topicConfigChange
	for _, name := range affected {
		before, _ := img.TopicConfig(name)
		after, _ := img.TopicConfigWith(name, own, defaults)
		if before != after {
			changed = append(changed, topicConfigChange{name: name, before: before, after: after})
		}
	}
	return changed
}

// bumpPartitionEpochs appends, for each partition of the topic not in
// skip, a change that keeps its state and bumps its partition epoch.
func (d *decision) bumpPartitionEpochs(topic string, skip map[metadata.TopicPartition]bool) error {
	for _, partition := range topicPartitions(d.image, topic) {
		if skip[partition.TopicPartition] {
			continue
		}
		change := metadata.PartitionChange{
			TopicPartition: partition.TopicPartition, Leader: partition.Leader,
			ISR: partition.ISR, ELR: partition.ELR,
			LeaderEpoch: partition.LeaderEpoch, PartitionEpoch: partition.PartitionEpoch + 1,
			LeaderRecoveryState: partition.LeaderRecoveryState,
		}
		if err := d.append(change); err != nil {
			return err
		}
	}
	return nil
}

// electOffline appends an election for each leaderless partition of the
// topic, under its new config (electLeader: unclean only when neither an
// ISR nor an ELR member can lead).
func (d *decision) electOffline(topic string, config metadata.TopicConfig) error {
	for _, partition := range topicPartitions(d.image, topic) {
		if partition.Leader != metadata.NoBroker {
			continue
		}
		change, changed := reconcile(partition, config, d.image.Active, nil)
		if !changed {
			continue
		}
		if err := d.append(change); err != nil {
			return err
		}
	}
	return nil
}

// topicPartitions is a copy of a topic's partitions, by number.
func topicPartitions(img *metadata.Image, name string) []metadata.PartitionState {
	topic, _ := img.Topic(name)
	return topic.Partitions
}
