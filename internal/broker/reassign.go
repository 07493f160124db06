package broker

import "github.com/tidelog/tide/internal/metadata"

// dropReplica stops serving a partition this broker is no longer a replica
// of (a reassignment moved it away, KIP-455) and sets its directory aside
// for removal, as a deleted topic's are (dropTopic, rule delete-by-rename).
// The replica first applies the state that took it out, so that produce
// requests waiting on it are answered (NOT_LEADER_OR_FOLLOWER) and their
// clients go to the new leader. The controller removes a replica only once
// the target replicas are in the ISR (rule reassignment-completes-in-isr),
// so the records are held elsewhere. A partition this node neither served
// nor failed on is left alone, like a directory of another topic id.
func (n *Node) dropReplica(state metadata.PartitionState) {
	tp := state.TopicPartition
	p, open := n.partitions[tp]
	_, failed := n.failed[tp]
	if !open && !failed {
		return
	}
	if open {
		p.replica.ApplyPartitionState(state)
		n.process(tp, p)
		p.log.Close()
		delete(n.partitions, tp)
		n.sorted = nil
	}
	delete(n.failed, tp)
	delete(n.unsynced, tp)
	if exists, err := n.directoryExists(n.partitionDirectory(tp)); err == nil && exists {
		n.moveAside(tp)
	}
}
