package assignor

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRangeProperties checks the range assignor on random groups: complete
// and exclusive; per topic, subscribers' loads differ by at most one; a
// member keeps min(its valid current partitions of a topic, the topic's
// minimum quota); stable and deterministic.
func TestRangeProperties(t *testing.T) {
	for seed := range propertySeeds() {
		random := rand.New(rand.NewPCG(seed, 2))
		spec := randomSpec(random, RangeAssignor{})
		result, err := RangeAssignor{}.Assign(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("", func(t *testing.T) {
			checkComplete(t, spec, result)
			checkRangeBalanceAndStickiness(t, spec, result)
			checkStable(t, RangeAssignor{}, spec, result)
			checkDeterministic(t, random, RangeAssignor{}, spec, result)
		})
		if t.Failed() {
			t.Fatalf("seed %d: %+v", seed, spec)
		}
	}
}

func checkRangeBalanceAndStickiness(t *testing.T, spec Spec, result map[string]Assignment) {
	t.Helper()
	for _, topic := range subscribedTopics(spec.Members, spec.Partitions) {
		subscribers, low, high := 0, int(^uint(0)>>1), 0
		for _, member := range spec.Members {
			if subscribes(member, topic) {
				subscribers++
				low, high = min(low, len(result[member.ID][topic])), max(high, len(result[member.ID][topic]))
			}
		}
		if high-low > 1 {
			t.Fatalf("topic %s: subscribers hold from %d to %d partitions", topic, low, high)
		}
		quota := int(spec.Partitions[topic]) / subscribers
		for _, member := range spec.Members {
			if !subscribes(member, topic) {
				continue
			}
			if kept, want := keptCount(member, result[member.ID], topic), min(validKept(spec, member, topic), quota); kept < want {
				t.Fatalf("member %s kept %d of topic %s, want at least %d", member.ID, kept, topic, want)
			}
		}
	}
}

// TestRangeCoPartitions: members subscribed to the same topics of equal
// partition counts get the same partition numbers in each, in contiguous
// ranges, also when a static member rejoins under a new member id.
func TestRangeCoPartitions(t *testing.T) {
	spec := Spec{Partitions: map[string]int32{"orders": 7, "payments": 7}}
	for _, id := range []string{"c", "a", "b"} {
		spec.Members = append(spec.Members, Member{ID: id, InstanceID: "instance-" + id, Topics: []string{"orders", "payments"}})
	}
	result, err := RangeAssignor{}.Assign(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int32{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}
	for id, partitions := range want {
		if !reflect.DeepEqual(result[id]["orders"], partitions) || !reflect.DeepEqual(result[id]["payments"], partitions) {
			t.Errorf("member %s: %v, want %v in both topics", id, result[id], partitions)
		}
	}
	spec.Members[1].ID = "z" // instance-a rejoins with a new member id
	spec.Members[1].Current = nil
	again, _ := RangeAssignor{}.Assign(spec)
	if !reflect.DeepEqual(again["z"], result["a"]) {
		t.Errorf("the rejoined static member got %v, want %v", again["z"], result["a"])
	}
}

// TestUniformHomogeneousExample shows the uniform assignor adding a member:
// the newcomer takes one partition from each of the two fuller members and
// nobody else moves.
func TestUniformHomogeneousExample(t *testing.T) {
	spec := Spec{Partitions: map[string]int32{"orders": 6}, Members: []Member{
		{ID: "a", Topics: []string{"orders"}, Current: Assignment{"orders": {0, 1, 2}}},
		{ID: "b", Topics: []string{"orders"}, Current: Assignment{"orders": {3, 4, 5}}},
		{ID: "c", Topics: []string{"orders"}},
	}}
	result, err := UniformAssignor{}.Assign(spec)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(result["a"], result["b"], result["c"])
	if got != "map[orders:[0 1]] map[orders:[3 4]] map[orders:[2 5]]" {
		t.Errorf("got %s", got)
	}
}

// BenchmarkAssign1000x1000 assigns 1,000 partitions (10 topics of 100) to
// 1,000 members, from scratch and again after one member left.
func BenchmarkAssign1000x1000(b *testing.B) {
	spec := Spec{Partitions: map[string]int32{}}
	var topics []string
	for t := range 10 {
		topics = append(topics, fmt.Sprintf("topic-%d", t))
		spec.Partitions[topics[t]] = 100
	}
	for m := range 1000 {
		spec.Members = append(spec.Members, Member{ID: fmt.Sprintf("member-%04d", m), Topics: topics})
	}
	for _, name := range Names() {
		assignor, _ := Lookup(name)
		b.Run(name+"/fresh", func(b *testing.B) {
			for b.Loop() {
				if _, err := assignor.Assign(spec); err != nil {
					b.Fatal(err)
				}
			}
		})
		first, _ := assignor.Assign(spec)
		sticky := spec
		sticky.Members = nil
		for _, member := range spec.Members[1:] {
			member.Current = first[member.ID]
			sticky.Members = append(sticky.Members, member)
		}
		b.Run(name+"/member-left", func(b *testing.B) {
			for b.Loop() {
				if _, err := assignor.Assign(sticky); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	heterogeneous := spec
	heterogeneous.Members = nil
	for m, member := range spec.Members {
		member.Topics = topics[m%10 : min(m%10+1+m%3, len(topics))]
		heterogeneous.Members = append(heterogeneous.Members, member)
	}
	b.Run("uniform/heterogeneous", func(b *testing.B) {
		for b.Loop() {
			if _, err := (UniformAssignor{}).Assign(heterogeneous); err != nil {
				b.Fatal(err)
			}
		}
	})
}
