package frontend

import (
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// ViewGroups are the consumer groups this broker coordinates, as the
// metrics (kafka_consumergroup_lag) and the console show them.
type ViewGroups struct {
	// Groups are in coordinator partition order, then group id order.
	Groups []ViewGroup
	// Omitted counts the group partitions (a group with no committed
	// offset counts one) left out by the row limit.
	Omitted int
}

// ViewGroup is one group with its committed offsets and, where this
// broker can tell, their lag.
type ViewGroup struct {
	group.Overview
	Partitions []ViewGroupPartition
}

// ViewGroupPartition is one partition a group committed an offset for.
//
// Lag is measured without a network call: the coordinator knows the
// committed offset, and the partition's end offset is what this broker's
// own replica of it has. EndOffset is that replica's high watermark (what
// ListOffsets' latest answers a read_uncommitted consumer, and what
// Kafka's tools call the log end offset): exact on the partition's
// leader, a fetch behind on a follower. A partition this broker hosts no
// replica of has EndOffset and Lag -1.
type ViewGroupPartition struct {
	Topic     string
	Partition int32
	Committed int64
	EndOffset int64
	// FromLeader says this broker leads the partition, so EndOffset is
	// the leader's own.
	FromLeader bool
	// Lag is EndOffset less Committed, never below 0 (a follower's high
	// watermark can trail a commit made on what the leader served).
	Lag int64
}

// GroupsView reads the hosted coordinators' groups, at most rows group
// partitions in all (a named limit on the metrics' cardinality and the
// console's page); it runs on the node loop. Coordinators still loading
// show nothing.
func (fe *FrontEnd) GroupsView(rows int) ViewGroups {
	var view ViewGroups
	node := fe.Node()
	if node == nil {
		return view
	}
	for _, hosted := range fe.hostedCoordinators() {
		if hosted.loading {
			continue
		}
		overviews, omitted := hosted.coordinator.Overviews(rows)
		view.Omitted += omitted
		if omitted > 0 {
			rows = 0 // what comes after is left out too, as within one coordinator
		}
		for _, overview := range overviews {
			rows -= max(len(overview.Offsets), 1)
			shown := ViewGroup{Overview: overview}
			for _, offset := range overview.Offsets {
				shown.Partitions = append(shown.Partitions, fe.groupPartition(offset))
			}
			view.Groups = append(view.Groups, shown)
		}
	}
	return view
}

// groupPartition is one committed offset with the end offset this
// broker's replica knows.
func (fe *FrontEnd) groupPartition(offset group.OffsetOverview) ViewGroupPartition {
	shown := ViewGroupPartition{Topic: offset.Topic, Partition: offset.Partition, Committed: offset.Offset, EndOffset: -1, Lag: -1}
	r, _, ok := fe.Node().Replica(metadata.TopicPartition{Topic: offset.Topic, Partition: offset.Partition})
	if !ok {
		return shown
	}
	shown.EndOffset, shown.FromLeader = int64(r.HighWatermark()), r.Role() == replica.Leader
	shown.Lag = max(shown.EndOffset-offset.Offset, 0)
	return shown
}
