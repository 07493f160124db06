package assignor

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// propertySeeds is how many random groups a property test draws: 3,000,
// or 500 with -short (CI's race detector run).
func propertySeeds() uint64 {
	if testing.Short() {
		return 500
	}
	return 3000
}

// randomSpec draws a group: up to 6 topics of 0..12 partitions (one topic
// that does not exist), up to 9 members subscribing to random subsets
// (homogeneous half the time), holding as current assignment a random
// earlier target: what a previous Assign over another group gave.
func randomSpec(random *rand.Rand, assignor Assignor) Spec {
	spec := Spec{Partitions: map[string]int32{}}
	topics := []string{"missing"}
	for t := range 1 + random.IntN(6) {
		name := fmt.Sprintf("topic-%d", t)
		spec.Partitions[name] = int32(random.IntN(13))
		topics = append(topics, name)
	}
	homogeneous := random.IntN(2) == 0
	shared := randomSubset(random, topics)
	for m := range random.IntN(10) {
		member := Member{ID: fmt.Sprintf("member-%d", m), Topics: shared}
		if !homogeneous {
			member.Topics = randomSubset(random, topics)
		}
		if random.IntN(3) == 0 {
			member.InstanceID = fmt.Sprintf("instance-%d", random.IntN(20))
		}
		spec.Members = append(spec.Members, member)
	}
	if random.IntN(4) != 0 {
		previous := spec
		previous.Members = nil
		for _, member := range spec.Members {
			if random.IntN(4) != 0 {
				member.Topics = randomSubset(random, topics)
				previous.Members = append(previous.Members, member)
			}
		}
		earlier, err := assignor.Assign(previous)
		if err != nil {
			panic(err)
		}
		for m := range spec.Members {
			spec.Members[m].Current = earlier[spec.Members[m].ID]
		}
	}
	return spec
}

func randomSubset(random *rand.Rand, topics []string) []string {
	var subset []string
	for _, topic := range topics {
		if random.IntN(2) == 0 {
			subset = append(subset, topic)
		}
	}
	return subset
}

// checkComplete fails unless every partition of a subscribed, existing
// topic is assigned to exactly one member subscribed to it, and nothing
// else is assigned.
func checkComplete(t *testing.T, spec Spec, result map[string]Assignment) {
	t.Helper()
	if len(result) != len(spec.Members) {
		t.Fatalf("%d members, %d assignments", len(spec.Members), len(result))
	}
	owners := map[string]map[int32]string{}
	for _, member := range spec.Members {
		assignment, ok := result[member.ID]
		if !ok {
			t.Fatalf("member %s has no assignment", member.ID)
		}
		for topic, partitions := range assignment {
			if !subscribes(member, topic) || !slices.IsSorted(partitions) {
				t.Fatalf("member %s got %s %v: not subscribed, or unsorted", member.ID, topic, partitions)
			}
			for _, partition := range partitions {
				if partition < 0 || partition >= spec.Partitions[topic] {
					t.Fatalf("member %s got %s-%d, which does not exist", member.ID, topic, partition)
				}
				if owners[topic] == nil {
					owners[topic] = map[int32]string{}
				}
				if other, taken := owners[topic][partition]; taken {
					t.Fatalf("%s-%d assigned to %s and %s", topic, partition, other, member.ID)
				}
				owners[topic][partition] = member.ID
			}
		}
	}
	for _, topic := range subscribedTopics(spec.Members, spec.Partitions) {
		if int32(len(owners[topic])) != spec.Partitions[topic] {
			t.Fatalf("topic %s: %d of %d partitions assigned", topic, len(owners[topic]), spec.Partitions[topic])
		}
	}
}

// checkDeterministic fails unless the same group given in another member
// order, and again, gets the same assignment.
func checkDeterministic(t *testing.T, random *rand.Rand, assignor Assignor, spec Spec, result map[string]Assignment) {
	t.Helper()
	shuffled := spec
	shuffled.Members = slices.Clone(spec.Members)
	random.Shuffle(len(shuffled.Members), func(i, j int) {
		shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
	})
	again, err := assignor.Assign(shuffled)
	if err != nil || !reflect.DeepEqual(again, result) {
		t.Fatalf("member order changed the assignment:\n%v\n%v", result, again)
	}
}

// checkStable fails unless assigning again from the result, with nothing
// else changed, gives the result back: a balanced target is left alone.
func checkStable(t *testing.T, assignor Assignor, spec Spec, result map[string]Assignment) {
	t.Helper()
	next := spec
	next.Members = slices.Clone(spec.Members)
	for m := range next.Members {
		next.Members[m].Current = result[next.Members[m].ID]
	}
	again, err := assignor.Assign(next)
	if err != nil || !reflect.DeepEqual(again, result) {
		t.Fatalf("a second round moved partitions:\n%v\n%v", result, again)
	}
}

// validKept returns how many partitions of member's current assignment
// (in topic, or in every topic when topic is "") it may keep: subscribed
// and existing. Current assignments drawn by randomSpec do not overlap.
func validKept(spec Spec, member Member, topic string) int {
	count := 0
	for current, partitions := range member.Current {
		if (topic == "" || current == topic) && subscribes(member, current) {
			for _, partition := range partitions {
				if partition < spec.Partitions[current] {
					count++
				}
			}
		}
	}
	return count
}

func keptCount(member Member, assignment Assignment, topic string) int {
	count := 0
	for current, partitions := range member.Current {
		for _, partition := range partitions {
			if (topic == "" || current == topic) && assignment.Has(current, partition) {
				count++
			}
		}
	}
	return count
}

func TestAssignorsByName(t *testing.T) {
	for _, name := range Names() {
		assignor, ok := Lookup(name)
		if !ok || assignor.Name() != name {
			t.Errorf("Lookup(%q) = %v, %t", name, assignor, ok)
		}
	}
	if _, ok := Lookup("cooperative-sticky"); ok {
		t.Error("a client-side assignor found among the server's")
	}
}

func TestValidateRefusesBadSpecs(t *testing.T) {
	for name, spec := range map[string]Spec{
		"empty member id":  {Members: []Member{{ID: ""}}},
		"duplicate member": {Members: []Member{{ID: "a"}, {ID: "a"}}},
		"negative count":   {Partitions: map[string]int32{"t": -1}},
		"oversized topic":  {Partitions: map[string]int32{"t": MaximumPartitionsPerTopic + 1}},
		"too many members": {Members: make([]Member, MaximumMembers+1)},
	} {
		for _, assignorName := range Names() {
			assignor, _ := Lookup(assignorName)
			if _, err := assignor.Assign(spec); err == nil {
				t.Errorf("%s: %s accepted %s", assignorName, name, name)
			}
		}
	}
}

func TestPreferred(t *testing.T) {
	for _, test := range []struct {
		chosen []string
		want   string
	}{
		{nil, Uniform},
		{[]string{"", ""}, Uniform},
		{[]string{Range, "", Uniform, Range}, Range},
		{[]string{Range, Uniform}, Uniform}, // a tie: the first served
		{[]string{"sticky", "sticky", Range}, Range},
	} {
		if got := Preferred(test.chosen, Names()); got != test.want {
			t.Errorf("Preferred(%q) = %q, want %q", test.chosen, got, test.want)
		}
	}
}
