package metadata

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/codec"
)

// Reassignment records the state of a partition reassignment in progress
// (KIP-455): the replicas it adds and the replicas it takes out, once every
// added one is in the ISR. Kafka keeps them in its PartitionRecord and
// PartitionChangeRecord (addingReplicas, removingReplicas); tide writes them
// as a record of their own, right after the PartitionChange that set the
// partition's assignment to the target and the current replicas together,
// in the same batch, so the PartitionChange record keeps its format.
//
// PartitionEpoch is the epoch of that change: a Reassignment applies only
// to the partition state it was decided with. One for an older epoch is
// stale (its change was ignored, or a later one superseded it) and is
// ignored; one for a newer epoch than the partition has never had a change
// to go with, and breaks an invariant. Both lists empty ends the
// reassignment state; so does any PartitionChange that sets an assignment.
type Reassignment struct {
	TopicPartition
	PartitionEpoch PartitionEpoch
	Adding         []BrokerID
	Removing       []BrokerID
}

func (Reassignment) isRecord() {}

func (r Reassignment) String() string {
	return fmt.Sprintf("reassignment %s partition-epoch=%d adding=%v removing=%v",
		r.TopicPartition, r.PartitionEpoch, r.Adding, r.Removing)
}

// tagReassignment is Reassignment on disk.
const tagReassignment byte = 19

// imageReassignmentsVersion is imageTrailingVersion whose trailing section
// may also hold Reassignment records, after the config records: written
// only while some partition is being reassigned, so an image without one
// keeps its older encoding and older builds still open it.
const imageReassignmentsVersion = 4

func appendReassignment(e *codec.Encoder, r Reassignment) {
	e.Byte(tagReassignment)
	e.String(r.Topic)
	e.Varint(int64(r.Partition))
	e.Varint(int64(r.PartitionEpoch))
	AppendBrokers(e, r.Adding)
	AppendBrokers(e, r.Removing)
}

func readReassignment(d *codec.Decoder) Record {
	r := Reassignment{TopicPartition: TopicPartition{Topic: d.String(maxNameBytes), Partition: d.Int32()}}
	r.PartitionEpoch = PartitionEpoch(d.Int32())
	r.Adding, r.Removing = ReadBrokers(d), ReadBrokers(d)
	return r
}

// applyReassignment sets a partition's reassignment state; see
// Reassignment for when it is stale.
func (img *Image) applyReassignment(r Reassignment) (bool, error) {
	topic, ok := img.topics[r.Topic]
	if !ok || r.Partition < 0 || int(r.Partition) >= len(topic.partitions) {
		return false, fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicPartition)
	}
	current := topic.partitions[r.Partition]
	switch {
	case r.PartitionEpoch < current.PartitionEpoch:
		return false, nil
	case r.PartitionEpoch > current.PartitionEpoch:
		return false, fmt.Errorf("%w: %s: reassignment for partition epoch %d, which is at %d",
			ErrInvariant, r.TopicPartition, r.PartitionEpoch, current.PartitionEpoch)
	}
	next := current.Clone()
	next.Adding, next.Removing = nil, nil
	if len(r.Adding) > 0 || len(r.Removing) > 0 {
		next.Adding, next.Removing = slices.Clone(r.Adding), slices.Clone(r.Removing)
	}
	if err := validateReassignmentShape(next); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrInvariant, r.TopicPartition, err)
	}
	topic.partitions[r.Partition] = next
	return true, nil
}

// validateReassignmentShape checks a partition's reassignment state: Adding
// and Removing are disjoint sets of replicas, and the target (the replicas
// without Removing) is not empty.
func validateReassignmentShape(p PartitionState) error {
	if !p.Reassigning() {
		if p.Adding != nil || p.Removing != nil {
			return errors.New("empty reassignment lists that are not nil")
		}
		return nil
	}
	switch {
	case hasDuplicateOrNegative(p.Adding) || !isSubset(p.Adding, p.Replicas):
		return fmt.Errorf("adding %v is not a set of replicas %v", p.Adding, p.Replicas)
	case hasDuplicateOrNegative(p.Removing) || !isSubset(p.Removing, p.Replicas):
		return fmt.Errorf("removing %v is not a set of replicas %v", p.Removing, p.Replicas)
	case intersects(p.Adding, p.Removing):
		return fmt.Errorf("adding %v and removing %v overlap", p.Adding, p.Removing)
	case len(p.Removing) == len(p.Replicas):
		return fmt.Errorf("removing every replica %v", p.Replicas)
	}
	return nil
}

// Reassignments returns every partition with a reassignment in progress,
// sorted by topic and partition.
func (img *Image) Reassignments() []PartitionState {
	var list []PartitionState
	for _, name := range img.Topics() {
		for _, partition := range img.topics[name].partitions {
			if partition.Reassigning() {
				list = append(list, partition.Clone())
			}
		}
	}
	return list
}

// reassignmentRecords returns the records that rebuild every reassignment
// in progress: part of a snapshot's trailing section.
func (img *Image) reassignmentRecords() []Record {
	var records []Record
	for _, p := range img.Reassignments() {
		records = append(records, Reassignment{TopicPartition: p.TopicPartition, PartitionEpoch: p.PartitionEpoch,
			Adding: p.Adding, Removing: p.Removing})
	}
	return records
}
