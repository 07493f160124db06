package assignor

import (
	"slices"
	"sort"
)

// UniformAssignor is Kafka's server-side "uniform" assignor, the default.
// Balance comes first, then stickiness:
//   - when every member subscribes to the same topics (homogeneous, Kafka's
//     optimized uniform builder), all their partitions are pooled and each
//     member gets total/members of them, total%members members one more;
//     a member keeps its current partitions up to that quota, and the
//     extra ones go first to members holding more than the minimum (Kafka's
//     builder hands them out in member order, which can move a partition
//     balance did not require);
//   - otherwise (heterogeneous, Kafka's general builder) every member keeps
//     all its valid current partitions, unassigned ones go to the least
//     loaded subscriber (topics with the fewest subscribers first), and
//     then partitions move one at a time from a member to a subscriber
//     with at least two fewer until no such move exists: then no partition
//     could move to any member it may go to and make the two closer.
type UniformAssignor struct{}

// Name returns "uniform".
func (UniformAssignor) Name() string { return Uniform }

// Assign computes the target assignment; see the type's comment.
func (UniformAssignor) Assign(spec Spec) (map[string]Assignment, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	members := sortedMembers(spec.Members)
	if len(members) == 0 {
		return map[string]Assignment{}, nil
	}
	b := newBuilder(members, spec.Partitions)
	if b.homogeneous() {
		b.assignHomogeneous()
	} else {
		b.assignHeterogeneous()
	}
	return b.result(), nil
}

// builder is the uniform assignor's working state. Partitions are numbered
// globally: topic t's partition p is offset[t]+p, topics in name order.
type builder struct {
	members     []Member
	topics      []string       // subscribed topics that exist, sorted
	index       map[string]int // topic name -> position in topics
	offset      []int          // topic position -> its partition 0's global number
	topicOf     []int          // global partition -> topic position
	owner       []int          // global partition -> member index, or -1
	owned       [][]int        // member index -> global partitions it holds
	subscribers [][]int        // topic position -> member indexes, ascending
	subscribed  [][]bool       // member index -> topic position -> subscribes
}

func newBuilder(members []Member, partitions map[string]int32) *builder {
	b := &builder{members: members, topics: subscribedTopics(members, partitions), index: map[string]int{}}
	b.owned = make([][]int, len(members))
	b.subscribers = make([][]int, len(b.topics))
	b.subscribed = make([][]bool, len(members))
	for position, topic := range b.topics {
		b.index[topic] = position
		b.offset = append(b.offset, len(b.topicOf))
		for range partitions[topic] {
			b.topicOf = append(b.topicOf, position)
			b.owner = append(b.owner, -1)
		}
	}
	for m, member := range members {
		b.subscribed[m] = make([]bool, len(b.topics))
		for _, topic := range member.Topics {
			if position, ok := b.index[topic]; ok && !b.subscribed[m][position] {
				b.subscribed[m][position] = true
				b.subscribers[position] = append(b.subscribers[position], m)
			}
		}
	}
	return b
}

// homogeneous reports whether every member subscribes to the same topics
// (of those that exist).
func (b *builder) homogeneous() bool {
	for m := range b.members {
		if !slices.Equal(b.subscribed[m], b.subscribed[0]) {
			return false
		}
	}
	return true
}

// validCurrent returns member m's current partitions that it may keep:
// in a topic it subscribes to, existing, and not kept by an earlier
// member; ascending.
func (b *builder) validCurrent(m int) []int {
	var valid []int
	for topic, partitions := range b.members[m].Current {
		position, ok := b.index[topic]
		if !ok || !b.subscribed[m][position] {
			continue
		}
		count := b.partitionCount(position)
		for _, partition := range partitions {
			if partition >= 0 && int(partition) < count && b.owner[b.offset[position]+int(partition)] == -1 {
				valid = append(valid, b.offset[position]+int(partition))
			}
		}
	}
	slices.Sort(valid)
	return slices.Compact(valid)
}

func (b *builder) partitionCount(position int) int {
	if position+1 < len(b.offset) {
		return b.offset[position+1] - b.offset[position]
	}
	return len(b.topicOf) - b.offset[position]
}

func (b *builder) claim(m, partition int) {
	if b.owner[partition] != -1 {
		panic("assignor: a partition claimed twice")
	}
	b.owner[partition] = m
	b.owned[m] = append(b.owned[m], partition)
}

// assignHomogeneous pools every partition: quotas differ by at most one
// and each member keeps its current partitions up to its quota.
func (b *builder) assignHomogeneous() {
	total, count := len(b.topicOf), len(b.members)
	if total == 0 {
		return
	}
	minimum, extra := total/count, total%count
	quota := make([]int, count)
	for m := range b.members {
		valid := b.validCurrent(m)
		keep := min(len(valid), minimum)
		quota[m] = minimum
		if len(valid) > minimum && extra > 0 {
			keep, quota[m] = keep+1, minimum+1
			extra--
		}
		for _, partition := range valid[:keep] {
			b.claim(m, partition)
		}
	}
	for m := range quota {
		if extra > 0 && quota[m] == minimum {
			quota[m]++
			extra--
		}
	}
	m := 0
	for partition, owner := range b.owner {
		if owner != -1 {
			continue
		}
		for len(b.owned[m]) >= quota[m] {
			m++
		}
		b.claim(m, partition)
	}
}

// assignHeterogeneous keeps every valid current partition, hands out the
// rest to the least loaded subscriber, then balances.
func (b *builder) assignHeterogeneous() {
	for m := range b.members {
		for _, partition := range b.validCurrent(m) {
			b.claim(m, partition)
		}
	}
	order := make([]int, len(b.topics))
	for position := range order {
		order[position] = position
	}
	sort.SliceStable(order, func(i, j int) bool {
		return len(b.subscribers[order[i]]) < len(b.subscribers[order[j]])
	})
	for _, position := range order {
		for partition := b.offset[position]; partition < b.offset[position]+b.partitionCount(position); partition++ {
			if b.owner[partition] == -1 {
				b.claim(b.leastLoaded(position, -1), partition)
			}
		}
	}
	b.balance()
}

// leastLoaded returns the subscriber of topic position holding the fewest
// partitions (lowest index on a tie), other than except.
func (b *builder) leastLoaded(position, except int) int {
	best := -1
	for _, m := range b.subscribers[position] {
		if m != except && (best == -1 || len(b.owned[m]) < len(b.owned[best])) {
			best = m
		}
	}
	return best
}

// balance moves partitions from a member to a subscriber holding at least
// two fewer until no such move is left. Each move lowers the sum of the
// squared member loads by at least two, so the loop ends.
func (b *builder) balance() {
	for moved := true; moved; {
		moved = false
		order := make([]int, len(b.members))
		for m := range order {
			order[m] = m
		}
		sort.SliceStable(order, func(i, j int) bool { return len(b.owned[order[i]]) > len(b.owned[order[j]]) })
		for _, from := range order {
			for _, partition := range slices.Clone(b.owned[from]) {
				to := b.leastLoaded(b.topicOf[partition], from)
				if to != -1 && len(b.owned[to]) < len(b.owned[from])-1 {
					b.move(partition, from, to)
					moved = true
				}
			}
		}
	}
}

func (b *builder) move(partition, from, to int) {
	index := slices.Index(b.owned[from], partition)
	b.owned[from] = slices.Delete(b.owned[from], index, index+1)
	b.owner[partition] = -1
	b.claim(to, partition)
}

// result converts the global numbering back to topics and partitions.
func (b *builder) result() map[string]Assignment {
	result := emptyResult(b.members)
	for m, member := range b.members {
		for _, partition := range b.owned[m] {
			position := b.topicOf[partition]
			result[member.ID].add(b.topics[position], int32(partition-b.offset[position]))
		}
		result[member.ID].normalize()
	}
	return result
}
