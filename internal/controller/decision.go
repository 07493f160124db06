package controller

import (
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/metadata"
)

// MaxPartitionsPerRequest bounds the partitions one ElectPreferred or
// AlterPartition request may name, and so the records one decision writes
// (Kafka bounds user operations at 10,000 records, MAX_RECORDS_PER_USER_OP).
const MaxPartitionsPerRequest = 10_000

// decision collects the records of one controller decision. Each record is
// applied to a private copy of the image as soon as it is decided, so later
// records of the same decision see the earlier ones, and a record that would
// break an invariant of the image is caught here, as a bug, before anyone
// appends it.
type decision struct {
	image   *metadata.Image
	records []metadata.Record
}

func newDecision(img *metadata.Image) *decision {
	return &decision{image: img.Clone()}
}

func (d *decision) append(r metadata.Record) error {
	applied, err := d.image.Apply(metadata.Entry{Offset: d.image.Offset() + 1, Record: r})
	if err != nil {
		return fmt.Errorf("controller: decided an invalid record: %w", err)
	}
	if !applied {
		return fmt.Errorf("controller: decided a stale record: %v", r)
	}
	d.records = append(d.records, r)
	return nil
}

// moveAway appends the partition changes that take the leaving brokers out
// of every leadership and ISR, electing new leaders where they led (KIP-841:
// a fenced or shutting-down broker neither leads nor sits in an ISR), and
// that take brokers restarting after an unclean shutdown out of every ELR as
// well (KIP-966: their log may have lost committed records). Partitions are
// visited in topic and partition order so the records are deterministic.
func (d *decision) moveAway(leaving, uncleanShutdown []metadata.BrokerID) error {
	eligible := func(id metadata.BrokerID) bool {
		return d.image.Active(id) && !slices.Contains(leaving, id) && !slices.Contains(uncleanShutdown, id)
	}
	for _, partition := range d.image.Partitions() {
		if !touches(partition, leaving, uncleanShutdown) {
			continue
		}
		config, _ := d.image.TopicConfig(partition.Topic)
		change, changed := reconcile(partition, config, eligible, uncleanShutdown)
		if !changed {
			continue
		}
		if err := d.append(change); err != nil {
			return err
		}
	}
	return nil
}

// touches reports whether a partition's leader, ISR or (for brokers that
// shut down uncleanly) ELR involves one of the brokers.
func touches(partition metadata.PartitionState, leaving, uncleanShutdown []metadata.BrokerID) bool {
	for _, id := range leaving {
		if partition.Leader == id || partition.InISR(id) {
			return true
		}
	}
	for _, id := range uncleanShutdown {
		if partition.Leader == id || partition.InISR(id) || slices.Contains(partition.ELR, id) {
			return true
		}
	}
	return false
}

// electLeaderless appends elections for the leaderless partitions that
// broker replicates, now that it may lead (Kafka's handleBrokerUnfenced):
// without them a partition whose last eligible replica comes back would
// stay offline.
func (d *decision) electLeaderless(broker metadata.BrokerID) error {
	for _, partition := range d.image.Partitions() {
		if partition.Leader != metadata.NoBroker || !partition.IsReplica(broker) {
			continue
		}
		config, _ := d.image.TopicConfig(partition.Topic)
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
