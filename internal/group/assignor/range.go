package assignor

import (
	"slices"
	"sort"
)

// RangeAssignor is Kafka's server-side "range" assignor: per topic, the
// subscribed members get contiguous ranges of partitions, sized to differ
// by at most one; members ordered by instance id (member id for dynamic
// members). When every member subscribes to the same topics and those have
// equal partition counts, a member gets the same partition numbers in
// every topic (co-partitioning, which stream joins need). It is sticky: a
// member keeps the lowest-numbered of its current partitions of a topic up
// to its quota, and only what is left is handed out in ranges.
type RangeAssignor struct{}

// Name returns "range".
func (RangeAssignor) Name() string { return Range }

// Assign computes the target assignment; see the type's comment.
func (RangeAssignor) Assign(spec Spec) (map[string]Assignment, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	members := rangeOrder(spec.Members)
	result := emptyResult(members)
	for _, topic := range subscribedTopics(members, spec.Partitions) {
		var subscribers []Member
		for _, member := range members {
			if subscribes(member, topic) {
				subscribers = append(subscribers, member)
			}
		}
		assignRangeTopic(topic, spec.Partitions[topic], subscribers, result)
	}
	for _, assignment := range result {
		assignment.normalize()
	}
	return result, nil
}

// rangeOrder sorts members by instance id where they have one and member
// id otherwise (member id breaking ties), so that a static member that
// rejoins with a new member id takes the same place.
func rangeOrder(members []Member) []Member {
	sorted := slices.Clone(members)
	key := func(member Member) string {
		if member.InstanceID != "" {
			return member.InstanceID
		}
		return member.ID
	}
	sort.Slice(sorted, func(i, j int) bool {
		if key(sorted[i]) != key(sorted[j]) {
			return key(sorted[i]) < key(sorted[j])
		}
		return sorted[i].ID < sorted[j].ID
	})
	return sorted
}

// subscribedTopics returns the topics some member subscribes to that exist
// with at least one partition, sorted.
func subscribedTopics(members []Member, partitions map[string]int32) []string {
	var topics []string
	for _, member := range members {
		for _, topic := range member.Topics {
			if partitions[topic] > 0 {
				topics = append(topics, topic)
			}
		}
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// assignRangeTopic assigns the count partitions of topic to subscribers.
// Each gets minimum = count/len(subscribers) partitions, and the first
// count%len(subscribers) of them that ask one more. A member first keeps
// its lowest current partitions up to its quota (one more than minimum if
// it holds more and an extra is left); the partitions left are then handed
// out in ascending runs, in member order.
func assignRangeTopic(topic string, count int32, subscribers []Member, result map[string]Assignment) {
	minimum := int(count) / len(subscribers)
	extra := int(count) % len(subscribers)
	taken := make([]bool, count)
	type unfilled struct {
		id        string
		remaining int
	}
	var waiting []unfilled
	for _, member := range subscribers {
		current := validCurrent(member.Current[topic], count, taken)
		keep := min(len(current), minimum)
		gotExtra := len(current) > minimum && extra > 0
		if gotExtra {
			keep++
			extra--
		}
		for _, partition := range current[:keep] {
			taken[partition] = true
			result[member.ID].add(topic, partition)
		}
		if !gotExtra {
			waiting = append(waiting, unfilled{id: member.ID, remaining: minimum - keep})
		}
	}
	next := int32(0)
	for _, member := range waiting {
		remaining := member.remaining
		if extra > 0 {
			remaining++
			extra--
		}
		for ; remaining > 0; remaining-- {
			for taken[next] {
				next++
			}
			taken[next] = true
			result[member.id].add(topic, next)
		}
	}
}

// validCurrent returns the partitions of current that exist and no
// earlier member has kept, sorted and without duplicates.
func validCurrent(current []int32, count int32, taken []bool) []int32 {
	var valid []int32
	for _, partition := range current {
		if partition >= 0 && partition < count && !taken[partition] {
			valid = append(valid, partition)
		}
	}
	slices.Sort(valid)
	return slices.Compact(valid)
}
