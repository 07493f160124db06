package group

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/group/reconcile"
	"github.com/tidelog/tide/internal/rules"
)

// A KIP-848 consumer group (Kafka's ConsumerGroup): the members and their
// subscriptions, the group epoch, the subscription metadata, the target
// assignment and each member's current assignment. Unlike a classic
// group, all of it is persisted (consumer_records.go): the live group is
// exactly what its records say, plus the timers. The coordinator changes
// the live group, then writes the records that differ from before (diff),
// and answers once they are committed.

// TopicInfo is what the coordinator needs of a topic to assign its
// partitions: its id (the wire and the records name topics by id) and its
// partition count.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
	// Internal topics (__consumer_offsets) are never matched by a
	// subscription's regular expression, as Kafka's.
	Internal bool
}

// SetTopics gives the coordinator the topics of the metadata image, by
// name: the host calls it before FinishLoad (a loaded group's assignments
// name topics by id) and again whenever topics are created, deleted or
// grow. A group sees a change at its members' next heartbeat: its
// subscription metadata changes, its epoch is bumped and the target is
// computed again, as Kafka does. The map is copied.
func (c *Coordinator) SetTopics(topics map[string]TopicInfo) {
	c.topics = maps.Clone(topics)
	c.topicNames = make(map[[16]byte]string, len(topics))
	for name, topic := range c.topics {
		c.topicNames[topic.ID] = name
	}
}

// consumerState is a consumer group's state (Kafka's
// ConsumerGroup.ConsumerGroupState), as ConsumerGroupDescribe, DescribeGroups
// and ListGroups show it.
func (g *consumerGroup) state() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, member := range g.members {
		if member.current.MemberEpoch != g.assignmentEpoch || member.current.State != reconcile.Stable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// consumerGroup is a KIP-848 group's live state.
//
// Invariants: every member is in members under its id; instances maps
// each static member's instance id to it; owners holds exactly the
// partitions of the members' current assignments (Assigned and
// PendingRevocation); assignmentEpoch <= epoch.
type consumerGroup struct {
	id string
	// epoch is the group epoch, bumped on every change of membership,
	// subscriptions or subscription metadata.
	epoch int32
	// assignmentEpoch is the epoch of the target assignment: the target
	// is computed again when epoch passes it.
	assignmentEpoch int32
	// subscription is the subscription metadata: each subscribed topic
	// that exists, sorted by name.
	subscription []consumerTopicMetadata
	members      map[string]*consumerMember
	instances    map[string]string
	owners       *reconcile.Owners
	// change is the change being made by one request or timer, nil
	// between them (see beginChange).
	change *groupChange
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id       string
	metadata consumerMemberMetadata
	// regex is metadata.subscribedTopicRegex compiled to match whole
	// topic names; nil when there is none (or, read from a record, it
	// does not compile: it then matches nothing).
	regex   *regexp.Regexp
	target  assignor.Assignment
	current reconcile.Member
	// sessionDeadlineMs is when the member is fenced unless it heartbeats
	// (group.consumer.session.timeout.ms).
	sessionDeadlineMs int64
	// rebalanceDeadlineMs, when not 0, is when the member is fenced if it
	// still has not revoked what it must (its rebalance timeout).
	rebalanceDeadlineMs int64
}

func newConsumerGroup(id string) *consumerGroup {
	return &consumerGroup{id: id, members: map[string]*consumerMember{}, instances: map[string]string{}, owners: reconcile.NewOwners()}
}

func (g *consumerGroup) sortedMemberIDs() []string { return sortedKeys(g.members) }

// earliestDeadlineMs is the group's next timer, MaxInt64 when none.
func (g *consumerGroup) earliestDeadlineMs() int64 {
	earliest := int64(math.MaxInt64)
	for _, member := range g.members {
		earliest = min(earliest, member.sessionDeadlineMs)
		if member.rebalanceDeadlineMs != 0 {
			earliest = min(earliest, member.rebalanceDeadlineMs)
		}
	}
	return earliest
}

// topicID is the id of a topic the group's records name: from the
// subscription metadata, else from the metadata image.
func (c *Coordinator) topicID(g *consumerGroup, name string) ([16]byte, bool) {
	for _, topic := range g.subscription {
		if topic.name == name {
			return topic.id, true
		}
	}
	topic, ok := c.topics[name]
	return topic.ID, ok
}

// topicName is the reverse of topicID.
func (c *Coordinator) topicName(g *consumerGroup, id [16]byte) (string, bool) {
	for _, topic := range g.subscription {
		if topic.id == id {
			return topic.name, true
		}
	}
	name, ok := c.topicNames[id]
	return name, ok
}

// byID renders an assignment as the records carry it, topics in name
// order; a topic without an id (deleted from the image and the
// subscription) is left out.
func (c *Coordinator) byID(g *consumerGroup, assignment assignor.Assignment) []topicIDPartitions {
	topics := []topicIDPartitions{}
	for _, name := range assignment.Topics() {
		if id, ok := c.topicID(g, name); ok && len(assignment[name]) > 0 {
			topics = append(topics, topicIDPartitions{id: id, partitions: slices.Clone(assignment[name])})
		}
	}
	return topics
}

// byName is the reverse of byID.
func (c *Coordinator) byName(g *consumerGroup, topics []topicIDPartitions) assignor.Assignment {
	assignment := assignor.Assignment{}
	for _, topic := range topics {
		if name, ok := c.topicName(g, topic.id); ok {
			assignment[name] = append(assignment[name], topic.partitions...)
		}
	}
	return assignment.Normalized()
}

// recordSet is every record the group's state is made of, by key: what
// a coordinator that loads the log rebuilds the group from.
func (c *Coordinator) recordSet(g *consumerGroup) map[consumerKey][]byte {
	set := c.groupRecords(g)
	for _, member := range g.members {
		c.addMemberRecords(set, g, member)
	}
	return set
}

// groupRecords are the group's own records: epoch, subscription metadata,
// assignment epoch.
func (c *Coordinator) groupRecords(g *consumerGroup) map[consumerKey][]byte {
	return map[consumerKey][]byte{
		{recordType: recordTypeConsumerGroupMetadata, group: g.id}:                 encodeGroupEpochValue(g.epoch),
		{recordType: recordTypeConsumerGroupPartitionMetadata, group: g.id}:        encodePartitionMetadataValue(g.subscription),
		{recordType: recordTypeConsumerGroupTargetAssignmentMetadata, group: g.id}: encodeGroupEpochValue(g.assignmentEpoch),
	}
}

// addMemberRecords adds a member's three records to set.
func (c *Coordinator) addMemberRecords(set map[consumerKey][]byte, g *consumerGroup, member *consumerMember) {
	set[consumerKey{recordType: recordTypeConsumerGroupMemberMetadata, group: g.id, member: member.id}] = encodeMemberMetadataValue(member.metadata)
	set[consumerKey{recordType: recordTypeConsumerGroupTargetAssignmentMember, group: g.id, member: member.id}] =
		encodeTargetMemberValue(c.byID(g, member.target))
	set[consumerKey{recordType: recordTypeConsumerGroupCurrentMemberAssignment, group: g.id, member: member.id}] =
		encodeCurrentAssignmentValue(currentAssignmentValue{memberEpoch: member.current.MemberEpoch,
			previousMemberEpoch: member.current.PreviousMemberEpoch, state: int8(member.current.State),
			assigned: c.byID(g, member.current.Assigned), pendingRevocation: c.byID(g, member.current.PendingRevocation)})
}

// groupChange is the part of a group one request or timer may change:
// the group's own records and those of the members touched, as they were
// before. Encoding only these keeps a steady heartbeat's cost independent
// of the group's size; the replay property checks nothing is missed (the
// live records equal the committed ones).
type groupChange struct {
	before  map[consumerKey][]byte
	touched map[string]bool
}

// beginChange starts a change of the group; endChange returns its records.
func (c *Coordinator) beginChange(g *consumerGroup) {
	if g.change != nil {
		panic("group: a consumer group change began inside another")
	}
	g.change = &groupChange{before: c.groupRecords(g), touched: map[string]bool{}}
}

// touch notes that member id (present, new or about to go) is changed: it
// must be called BEFORE the member's state changes.
func (c *Coordinator) touch(g *consumerGroup, id string) {
	if g.change == nil {
		panic("group: a consumer group member changed outside a change")
	}
	if g.change.touched[id] {
		return
	}
	g.change.touched[id] = true
	if member := g.members[id]; member != nil {
		c.addMemberRecords(g.change.before, g, member)
	}
}

// endChange returns the records that turn the group's touched part from
// what it was into what it is.
func (c *Coordinator) endChange(g *consumerGroup) []Record {
	after := c.groupRecords(g)
	for id := range g.change.touched {
		if member := g.members[id]; member != nil {
			c.addMemberRecords(after, g, member)
		}
	}
	records := diffRecords(g.change.before, after)
	g.change = nil
	return records
}

// consumerWriteOrder is the order of record types in an append: a
// member's removal first (current assignment, target, metadata, as
// Kafka's removeMember orders them), then changes in the order Kafka
// writes them on a heartbeat.
var consumerWriteOrder = map[bool][]int16{
	true: {recordTypeConsumerGroupCurrentMemberAssignment, recordTypeConsumerGroupTargetAssignmentMember, recordTypeConsumerGroupMemberMetadata,
		recordTypeConsumerGroupPartitionMetadata, recordTypeConsumerGroupTargetAssignmentMetadata, recordTypeConsumerGroupMetadata},
	false: {recordTypeConsumerGroupMemberMetadata, recordTypeConsumerGroupPartitionMetadata, recordTypeConsumerGroupMetadata,
		recordTypeConsumerGroupTargetAssignmentMember, recordTypeConsumerGroupTargetAssignmentMetadata, recordTypeConsumerGroupCurrentMemberAssignment},
}

// diffRecords returns the records that turn before into after: a value
// for each key new or changed, a tombstone for each key gone.
func diffRecords(before, after map[consumerKey][]byte) []Record {
	var records []Record
	for _, tombstone := range []bool{true, false} {
		for _, recordType := range consumerWriteOrder[tombstone] {
			source := after
			if tombstone {
				source = before
			}
			for _, key := range sortedConsumerKeys(source, recordType) {
				value, present := after[key]
				switch {
				case tombstone && !present:
					records = append(records, Record{Key: key.encode()})
				case !tombstone && string(before[key]) != string(value):
					records = append(records, Record{Key: key.encode(), Value: value})
				}
			}
		}
	}
	return records
}

func sortedConsumerKeys(set map[consumerKey][]byte, recordType int16) []consumerKey {
	var keys []consumerKey
	for key := range set {
		if key.recordType == recordType {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].member < keys[j].member })
	return keys
}

// applyConsumer applies one consumer group record to the durable view.
func (d *durableGroup) applyConsumer(record *consumerRecord) {
	if record.value == nil {
		delete(d.consumer, record.key)
		return
	}
	if d.consumer == nil {
		d.consumer = map[consumerKey][]byte{}
	}
	d.consumer[record.key] = record.value
}

// consumerGroupFromDurable rebuilds a loaded group from its records (the
// values were checked on Load): members Stable or mid-reconciliation as
// their current assignment says, sessions starting now, and a member
// that must still revoke given its rebalance timeout from now.
func (c *Coordinator) consumerGroupFromDurable(id string, records map[consumerKey][]byte, nowMs int64) *consumerGroup {
	g := newConsumerGroup(id)
	for key, value := range records {
		switch key.recordType {
		case recordTypeConsumerGroupMetadata:
			g.epoch, _ = decodeGroupEpochValue(value, "")
		case recordTypeConsumerGroupTargetAssignmentMetadata:
			g.assignmentEpoch, _ = decodeGroupEpochValue(value, "")
		case recordTypeConsumerGroupPartitionMetadata:
			g.subscription, _ = decodePartitionMetadataValue(value)
		}
	}
	for _, key := range sortedConsumerKeys(records, recordTypeConsumerGroupMemberMetadata) {
		metadata, _ := decodeMemberMetadataValue(records[key])
		member := &consumerMember{id: key.member, metadata: metadata, regex: compileSubscription(metadata.subscribedTopicRegex), target: assignor.Assignment{}, sessionDeadlineMs: nowMs + c.config.ConsumerSessionTimeoutMs}
		member.current = reconcile.Member{Assigned: assignor.Assignment{}, PendingRevocation: assignor.Assignment{}}
		if target, ok := records[consumerKey{recordType: recordTypeConsumerGroupTargetAssignmentMember, group: id, member: key.member}]; ok {
			topics, _ := decodeTargetMemberValue(target)
			member.target = c.byName(g, topics)
		}
		if current, ok := records[consumerKey{recordType: recordTypeConsumerGroupCurrentMemberAssignment, group: id, member: key.member}]; ok {
			value, _ := decodeCurrentAssignmentValue(current)
			member.current = reconcile.Member{State: reconcile.State(value.state), MemberEpoch: value.memberEpoch, PreviousMemberEpoch: value.previousMemberEpoch,
				Assigned: c.byName(g, value.assigned), PendingRevocation: c.byName(g, value.pendingRevocation)}
		}
		if member.current.State == reconcile.UnrevokedPartitions {
			member.rebalanceDeadlineMs = nowMs + int64(max(member.metadata.rebalanceTimeoutMs, 0))
		}
		// Records neither Kafka nor tide write (a partition two members
		// own, an instance two members hold): the first member in id
		// order keeps it.
		member.current.Assigned = unowned(g, member.current.Assigned)
		member.current.PendingRevocation = unowned(g, member.current.PendingRevocation)
		g.members[member.id] = member
		if instance := member.metadata.instanceID; instance != nil && g.instances[*instance] == "" {
			g.instances[*instance] = member.id
		} else {
			member.metadata.instanceID = nil
		}
		g.owners.Update(member.id, reconcile.Member{}, member.current)
	}
	g.epoch = max(g.epoch, g.assignmentEpoch)
	return g
}

// unowned returns the partitions of assignment no member of g owns yet.
func unowned(g *consumerGroup, assignment assignor.Assignment) assignor.Assignment {
	kept := assignor.Assignment{}
	for _, topic := range assignment.Topics() {
		for _, partition := range assignment[topic] {
			if g.owners.Owner(topic, partition) == "" {
				kept[topic] = append(kept[topic], partition)
			}
		}
	}
	return kept
}

// checkConsumerGroups checks every consumer group: filed under its id and
// not also a classic group, its instances and owners agree with its
// members, no partition has two owners (reconcile.Owners keeps one owner
// a partition; a member's current assignment naming a partition another
// member owns is the failure revoke-before-assign prevents), epochs are
// ordered, and no timer is before the next deadline Tick looks at.
func (c *Coordinator) checkConsumerGroups() error {
	for _, id := range sortedKeys(c.consumerGroups) {
		group := c.consumerGroups[id]
		switch {
		case group.id != id:
			return fmt.Errorf("consumer group %q filed under %q", group.id, id)
		case c.groups[id] != nil:
			return fmt.Errorf("group %q is both a classic and a consumer group", id)
		case group.assignmentEpoch > group.epoch:
			return fmt.Errorf("consumer group %q: assignment epoch %d above group epoch %d", id, group.assignmentEpoch, group.epoch)
		case c.phase == serving && group.earliestDeadlineMs() < c.nextDeadlineMs:
			return fmt.Errorf("consumer group %q has a timer at %d, before the next deadline %d", id, group.earliestDeadlineMs(), c.nextDeadlineMs)
		}
		if owner := twoOwners(group); owner != "" && c.config.Rules.On(rules.RevokeBeforeAssign) {
			return fmt.Errorf("consumer group %q: %s", id, owner)
		}
		for instance, memberID := range group.instances {
			if member := group.members[memberID]; member == nil || stringOrEmpty(member.metadata.instanceID) != instance {
				return fmt.Errorf("consumer group %q: instance %q maps to %q, which does not hold it", id, instance, memberID)
			}
		}
	}
	return nil
}

// twoOwners describes a partition two members' current assignments both
// hold, or one whose recorded owner is not the member holding it; "" when
// there is none.
func twoOwners(group *consumerGroup) string {
	holders := map[topicPartition]string{}
	for _, memberID := range group.sortedMemberIDs() {
		member := group.members[memberID]
		for _, set := range []assignor.Assignment{member.current.Assigned, member.current.PendingRevocation} {
			for _, topic := range set.Topics() {
				for _, partition := range set[topic] {
					key := topicPartition{topic, partition}
					if other, taken := holders[key]; taken {
						return fmt.Sprintf("partition %s-%d owned by %s and %s", topic, partition, other, memberID)
					}
					holders[key] = memberID
					if owner := group.owners.Owner(topic, partition); owner != memberID {
						return fmt.Sprintf("partition %s-%d held by %s, recorded as owned by %q", topic, partition, memberID, owner)
					}
				}
			}
		}
	}
	return ""
}

// compileSubscription compiles a subscription's regular expression (RE2
// syntax, as Kafka's RE2J) to match whole topic names; nil for none.
func compileSubscription(regex *string) *regexp.Regexp {
	if regex == nil || *regex == "" {
		return nil
	}
	compiled, err := regexp.Compile("^(?:" + *regex + ")$")
	if err != nil {
		return nil
	}
	return compiled
}

// memberTopics are the topics a member subscribes to: its topic names and
// the topics of the metadata image its regular expression matches (never
// an internal one), sorted.
func (c *Coordinator) memberTopics(member *consumerMember) []string {
	if member.regex == nil {
		return member.metadata.subscribedTopicNames
	}
	topics := map[string]bool{}
	for _, name := range member.metadata.subscribedTopicNames {
		topics[name] = true
	}
	for name, topic := range c.topics {
		if !topic.Internal && member.regex.MatchString(name) {
			topics[name] = true
		}
	}
	return sortedKeys(topics)
}
