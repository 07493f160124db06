package assignor

import (
	"fmt"
	"slices"
	"sort"
)

// Assignment maps a topic name to the partitions assigned in it. A
// well-formed Assignment (what the assignors return) has its partition
// lists sorted, without duplicates, and no empty list.
type Assignment map[string][]int32

// Count returns the number of partitions in a.
func (a Assignment) Count() int {
	count := 0
	for _, partitions := range a {
		count += len(partitions)
	}
	return count
}

// Has reports whether a holds partition of topic.
func (a Assignment) Has(topic string, partition int32) bool {
	_, found := slices.BinarySearch(a[topic], partition)
	return found
}

// Topics returns the topics of a, sorted.
func (a Assignment) Topics() []string {
	topics := make([]string, 0, len(a))
	for topic := range a {
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	return topics
}

// add appends partition to topic's list; callers sort once at the end.
func (a Assignment) add(topic string, partition int32) {
	a[topic] = append(a[topic], partition)
}

// normalize sorts every list and drops empty ones.
func (a Assignment) normalize() {
	for topic, partitions := range a {
		if len(partitions) == 0 {
			delete(a, topic)
			continue
		}
		slices.Sort(partitions)
	}
}

// Normalized returns a copy of a made well-formed: each list sorted and
// without duplicates, empty lists dropped. Assignments that come from the
// wire (a heartbeat's owned partitions) go through it before use.
func (a Assignment) Normalized() Assignment {
	normalized := make(Assignment, len(a))
	for topic, partitions := range a {
		if len(partitions) > 0 {
			sorted := slices.Clone(partitions)
			slices.Sort(sorted)
			normalized[topic] = slices.Compact(sorted)
		}
	}
	return normalized
}

// Member is one member of a group as an assignor sees it.
type Member struct {
	// ID is the member id; unique in the group.
	ID string
	// InstanceID is the static member's group.instance.id, "" for a
	// dynamic member. The range assignor orders members by it, so that a
	// static member that rejoins under a new member id keeps its ranges.
	InstanceID string
	// Topics are the subscribed topic names. Topics the Spec does not know
	// are ignored: a subscription may name a topic not created yet.
	Topics []string
	// Current is the member's assignment in the current target. Partitions
	// no longer valid (a topic it left, a partition that does not exist, one
	// claimed by an earlier member) are dropped, not kept.
	Current Assignment
}

// Spec is an assignor's whole input.
type Spec struct {
	// Members of the group, in any order; the assignors sort them.
	Members []Member
	// Partitions is the partition count of each topic that exists.
	Partitions map[string]int32
}

// Limits on a Spec: Kafka bounds neither, but a coordinator that trusts a
// wire value for a loop bound can be made to spin, so tide bounds both.
const (
	// MaximumMembers is the most members a Spec may have.
	MaximumMembers = 100_000
	// MaximumPartitionsPerTopic is the largest partition count accepted.
	MaximumPartitionsPerTopic = 1_000_000
)

// Validate checks a Spec where it enters: member ids non-empty and unique,
// partition counts within [0, MaximumPartitionsPerTopic], and at most
// MaximumMembers members.
func (s Spec) Validate() error {
	if len(s.Members) > MaximumMembers {
		return fmt.Errorf("assignor: %d members, more than %d", len(s.Members), MaximumMembers)
	}
	seen := make(map[string]bool, len(s.Members))
	for _, member := range s.Members {
		if member.ID == "" {
			return fmt.Errorf("assignor: a member has an empty id")
		}
		if seen[member.ID] {
			return fmt.Errorf("assignor: member %q appears twice", member.ID)
		}
		seen[member.ID] = true
	}
	for topic, count := range s.Partitions {
		if count < 0 || count > MaximumPartitionsPerTopic {
			return fmt.Errorf("assignor: topic %q has %d partitions", topic, count)
		}
	}
	return nil
}

// Assignor computes a group's target assignment.
type Assignor interface {
	// Name is the name clients send in ServerAssignor.
	Name() string
	// Assign returns the target assignment of every member of spec (an
	// empty Assignment for a member that gets nothing). Every partition of
	// a topic some member subscribes to is assigned to exactly one member
	// subscribed to it. It fails only on a Spec that Validate refuses.
	Assign(spec Spec) (map[string]Assignment, error)
}

// Uniform is Kafka's "uniform" assignor, the default.
const Uniform = "uniform"

// Range is Kafka's "range" assignor.
const Range = "range"

// Names lists the assignors tide serves, default first, as Kafka's
// group.consumer.assignors default does.
func Names() []string { return []string{Uniform, Range} }

// Lookup returns the assignor named name, as a ServerAssignor names it.
func Lookup(name string) (Assignor, bool) {
	switch name {
	case Uniform:
		return UniformAssignor{}, true
	case Range:
		return RangeAssignor{}, true
	}
	return nil, false
}

// sortedMembers returns the members sorted by id, so that no map order or
// request order reaches the output.
func sortedMembers(members []Member) []Member {
	sorted := slices.Clone(members)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	return sorted
}

// subscribes reports whether member subscribes to topic.
func subscribes(member Member, topic string) bool {
	return slices.Contains(member.Topics, topic)
}

// emptyResult returns an empty Assignment for every member.
func emptyResult(members []Member) map[string]Assignment {
	result := make(map[string]Assignment, len(members))
	for _, member := range members {
		result[member.ID] = Assignment{}
	}
	return result
}

// Preferred returns the assignor a group uses (Kafka's
// ConsumerGroup.computePreferredServerAssignor): the one its members name
// in ServerAssignor most often, the first of served on a tie (Kafka breaks
// ties in HashMap order, which is unspecified), or served[0], the
// default, when no member names one. chosen holds each member's
// ServerAssignor, "" for none; names not in served are skipped (heartbeat
// validation refuses them).
func Preferred(chosen []string, served []string) string {
	votes := map[string]int{}
	for _, name := range chosen {
		if name != "" && slices.Contains(served, name) {
			votes[name]++
		}
	}
	best := ""
	for _, name := range served {
		if votes[name] > votes[best] {
			best = name
		}
	}
	if best == "" && len(served) > 0 {
		return served[0]
	}
	return best
}
