package group

import (
	"slices"
	"strings"
)

// Overview is one group as an operator reads it (the metrics' consumer
// group lag and the web console): its state and members from the live
// view, its committed offsets from the durable view, the ones OffsetFetch
// answers.
type Overview struct {
	ID string
	// Type is "classic" or "consumer" (KIP-848), as ListGroups names it.
	Type         string
	State        string
	ProtocolType string
	// Protocol is the chosen protocol (for consumers, the assignor); ""
	// while a classic group is not Stable.
	Protocol string
	Members  []MemberOverview
	// Offsets are the committed offsets, by topic then partition.
	Offsets []OffsetOverview
}

// MemberOverview is one member of a group.
type MemberOverview struct {
	ID, ClientID, ClientHost string
}

// OffsetOverview is one committed offset of a group.
type OffsetOverview struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Overviews are this coordinator's groups in id order, at most rows rows:
// a group counts one row per committed offset, and at least one. A group
// that does not fit whole is left out, and so is every group after it, so
// that a reader never sums half a group; omitted counts the rows left out.
// It reads, and changes nothing; a loading or unloaded coordinator has no
// groups to show.
func (c *Coordinator) Overviews(rows int) (overviews []Overview, omitted int) {
	if c.phase != serving {
		return nil, 0
	}
	for _, id := range c.overviewIDs() {
		cost := 1
		if durable := c.durable[id]; durable != nil {
			cost = max(len(durable.offsets), 1)
		}
		if cost > rows {
			// Counted without being read: past the limit a scrape costs
			// the loop a map lookup per group.
			omitted += cost
			rows = 0
			continue
		}
		rows -= cost
		overviews = append(overviews, c.overview(id))
	}
	return overviews, omitted
}

// overviewIDs are the group ids with live or durable state, sorted, but
// for groups being deleted. A
// group that only commits offsets (no members, Kafka's "simple" use) has
// durable state only.
func (c *Coordinator) overviewIDs() []string {
	ids := sortedKeys(c.durable)
	ids = append(ids, sortedKeys(c.groups)...)
	ids = append(ids, sortedKeys(c.consumerGroups)...)
	slices.Sort(ids)
	// A Dead group is being deleted: ListGroups has already dropped it.
	return slices.DeleteFunc(slices.Compact(ids), func(id string) bool {
		group := c.groups[id]
		return group != nil && group.state == stateDead
	})
}

// overview reads one group.
func (c *Coordinator) overview(id string) Overview {
	overview := Overview{ID: id, Type: "classic", State: stateEmpty.String()}
	if consumer := c.consumerGroups[id]; consumer != nil {
		overview.Type, overview.State, overview.ProtocolType = "consumer", consumer.state(), consumerProtocolType
		overview.Protocol = c.preferredAssignor(consumer)
		for _, memberID := range consumer.sortedMemberIDs() {
			member := consumer.members[memberID]
			overview.Members = append(overview.Members, MemberOverview{ID: member.id, ClientID: member.metadata.clientID, ClientHost: member.metadata.clientHost})
		}
	} else if group := c.groups[id]; group != nil {
		overview.State, overview.ProtocolType = group.state.String(), group.protocolType
		if group.state == stateStable {
			overview.Protocol = group.protocol
		}
		for _, memberID := range group.sortedMemberIDs() {
			member := group.members[memberID]
			overview.Members = append(overview.Members, MemberOverview{ID: member.id, ClientID: member.clientID, ClientHost: member.clientHost})
		}
	}
	if durable := c.durable[id]; durable != nil {
		for key, committed := range durable.offsets {
			overview.Offsets = append(overview.Offsets, OffsetOverview{Topic: key.topic, Partition: key.partition, Offset: committed.offset})
		}
		slices.SortFunc(overview.Offsets, func(a, b OffsetOverview) int {
			if order := strings.Compare(a.Topic, b.Topic); order != 0 {
				return order
			}
			return int(a.Partition - b.Partition)
		})
	}
	return overview
}
