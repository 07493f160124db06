package broker

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// LoadImage replaces the broker's metadata with an image at a later
// offset: for a broker further behind the metadata log than the controller
// keeps entries. Like ApplyMetadata it publishes only the final state to
// the replicas; topics the image no longer has, or has under another
// topic id (deleted and created again in the gap), are dropped and their
// directories set aside (dropTopic). A topic that had no id and has one
// now is taken for the same topic, given its id in the gap, and its
// directories get the id: the image cannot tell that from a topic of a
// build before topic ids deleted and created again in the gap, and
// keeping records is the safe mistake.
func (n *Node) LoadImage(img *metadata.Image) error {
	if img.Offset() <= n.image.Offset() {
		return nil
	}
	previous := n.image
	n.image = img.Clone()
	for _, name := range previous.Topics() {
		old, _ := previous.Topic(name)
		current, ok := n.image.Topic(name)
		switch {
		case !ok || !old.ID.IsZero() && current.ID != old.ID:
			n.dropTopic(old)
		case old.ID.IsZero() && !current.ID.IsZero():
			// Taken for the id assigned in the gap (AssignTopicID), not a
			// topic created again: dropping it could delete live records.
			n.adoptTopicID(name, current.ID)
		}
	}
	brokers := n.image.Brokers()
	for _, tp := range n.Partitions() {
		p := n.partitions[tp]
		p.replica.SetBrokers(brokers)
		n.process(tp, p)
	}
	for _, state := range n.image.Partitions() {
		if err := n.applyPartitionState(state.TopicPartition); err != nil {
			return err
		}
	}
	return nil
}

// TakeProposals returns the ISR proposals in the outbox and leaves the rest
// of it.
func (n *Node) TakeProposals() []replica.ISRChange {
	proposals := n.outbox.Proposals
	n.outbox.Proposals = nil
	return proposals
}

// TakeAllocateProducerIDs reports whether the node asked for a block of
// producer ids since the last call, and clears the ask.
func (n *Node) TakeAllocateProducerIDs() bool {
	want := n.outbox.AllocateProducerIDs
	n.outbox.AllocateProducerIDs = false
	return want
}
