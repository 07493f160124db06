package reconcile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tidelog/tide/internal/group/assignor"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// owner is who holds a partition and at which member epoch.
type owner struct {
	memberID string
	epoch    int32
}

// Owners records which member owns each partition of a group: every
// partition in a member's Assigned or PendingRevocation, with that
// member's epoch (Kafka's partition epochs). A partition has at most one
// owner; a partition absent from Owners is free.
type Owners struct {
	owners map[topicPartition]owner
}

// NewOwners returns an empty record.
func NewOwners() *Owners { return &Owners{owners: map[topicPartition]owner{}} }

// Epoch returns the epoch of the partition's owner, or -1 when it is free
// (Kafka's currentPartitionEpoch).
func (o *Owners) Epoch(topic string, partition int32) int32 {
	if holder, ok := o.owners[topicPartition{topic, partition}]; ok {
		return holder.epoch
	}
	return -1
}

// Owner returns the member that owns the partition, "" when it is free.
func (o *Owners) Owner(topic string, partition int32) string {
	return o.owners[topicPartition{topic, partition}].memberID
}

func (o *Owners) ownedByOther(topic string, partition int32, memberID string) bool {
	holder, ok := o.owners[topicPartition{topic, partition}]
	return ok && holder.memberID != memberID
}

// Update replaces what memberID owns: the partitions of before (its
// previous current assignment) that it still owns are released, those of
// after claimed at after's epoch. It returns the partitions after claims
// that another member owned. Under revoke-before-assign there are none:
// the coordinator treats any as a broken invariant (Kafka's
// addPartitionEpochs throws); with the rule off (simulator only) the new
// claim overwrites the old one, as the failure the rule prevents.
func (o *Owners) Update(memberID string, before, after Member) (taken []string) {
	o.release(memberID, before.Assigned)
	o.release(memberID, before.PendingRevocation)
	for _, set := range []assignor.Assignment{after.Assigned, after.PendingRevocation} {
		for _, topic := range set.Topics() {
			for _, partition := range set[topic] {
				key := topicPartition{topic, partition}
				if holder, ok := o.owners[key]; ok && holder.memberID != memberID {
					taken = append(taken, fmt.Sprintf("%s-%d from %s", topic, partition, holder.memberID))
				}
				o.owners[key] = owner{memberID: memberID, epoch: after.MemberEpoch}
			}
		}
	}
	return taken
}

// Remove releases everything member (which is leaving or fenced) owns.
func (o *Owners) Remove(memberID string, member Member) {
	o.release(memberID, member.Assigned)
	o.release(memberID, member.PendingRevocation)
}

func (o *Owners) release(memberID string, set assignor.Assignment) {
	for topic, partitions := range set {
		for _, partition := range partitions {
			key := topicPartition{topic, partition}
			if o.owners[key].memberID == memberID {
				delete(o.owners, key)
			}
		}
	}
}

// Describe lists the owned partitions in topic and partition order, each
// as topic-partition=member@epoch, or "none".
func (o *Owners) Describe() string {
	keys := make([]topicPartition, 0, len(o.owners))
	for key := range o.owners {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	var parts []string
	for _, key := range keys {
		holder := o.owners[key]
		parts = append(parts, fmt.Sprintf("%s-%d=%s@%d", key.topic, key.partition, holder.memberID, holder.epoch))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
