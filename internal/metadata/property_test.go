package metadata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/record"
)

// TestApplyRandomRecords throws random records at an image, most of them
// plausible, many of them stale or invalid, and checks after every entry that
// the image still satisfies its invariants (by a naive checker written
// independently of Apply), that a rejected record changed nothing and a stale
// one changed only the offset, and that replaying the same log gives the same
// image.
func TestApplyRandomRecords(t *testing.T) {
	seeds := uint64(100)
	if testing.Short() {
		seeds = 20
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		img, log := runRandomRecords(t, seed, 300)
		replayed := NewImage()
		for _, entry := range log {
			if _, err := replayed.Apply(entry); err != nil {
				t.Fatalf("seed %d: replaying %v: %v", seed, entry, err)
			}
		}
		if replayed.Describe() != img.Describe() {
			t.Fatalf("seed %d: replay differs:\n%s\n%s", seed, replayed.Describe(), img.Describe())
		}
		again, _ := runRandomRecords(t, seed, 300)
		if again.Describe() != img.Describe() {
			t.Fatalf("seed %d: same seed, different image", seed)
		}
	}
	for _, kind := range []string{"register-broker", "unfence-broker", "fence-broker", "begin-controlled-shutdown",
		"unregister-broker", "create-topic", "delete-topic", "partition-change", "assign-topic-id", "create-partitions", "reassignment"} {
		for _, outcome := range []string{"applied", "rejected"} {
			if outcomes[kind+" "+outcome] == 0 {
				t.Errorf("no %s %s in the random runs: %v", kind, outcome, outcomes)
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["partition-change stale"] == 0 || outcomes["fence-broker stale"] == 0 || outcomes["reassignment stale"] == 0 {
		t.Errorf("no stale records in the random runs: %v", outcomes)
	}
}

// runRandomRecords returns the final image and the log of the entries it
// accepted (stale ones included).
func runRandomRecords(t *testing.T, seed uint64, steps int) (*Image, []Entry) {
	random := rand.New(rand.NewPCG(seed, 0))
	img := NewImage()
	var log []Entry
	for step := 0; step < steps; step++ {
		r := randomRecord(random, img)
		before := img.Clone()
		entry := Entry{Offset: img.Offset() + 1, Record: r}
		applied, err := img.Apply(entry)
		outcomes[outcomeOf(r, applied, err)]++
		img.topicsByID = nil // a cache, rebuilt on demand: not part of the state compared
		switch {
		case err != nil:
			if errors.Is(err, ErrOutOfOrder) {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if !reflect.DeepEqual(before, img) {
				t.Fatalf("seed %d step %d: rejected %v changed the image", seed, step, r)
			}
		case !applied:
			log = append(log, entry)
			before.nextOffset++
			if !reflect.DeepEqual(before, img) {
				t.Fatalf("seed %d step %d: stale %v changed more than the offset", seed, step, r)
			}
		default:
			log = append(log, entry)
		}
		if problem := checkImage(img, before); problem != "" {
			t.Fatalf("seed %d step %d after %v: %s\n%s", seed, step, r, problem, img.Describe())
		}
	}
	return img, log
}

// checkImage is the naive invariant checker: it looks only at the images'
// accessors, the new one and the one before the last entry.
func checkImage(img, previous *Image) string {
	owners := map[TopicID]string{}
	for _, name := range img.Topics() {
		id, _ := img.TopicID(name)
		if before, ok := previous.TopicID(name); ok && !before.IsZero() && before != id {
			return fmt.Sprintf("topic %s: id changed from %v to %v", name, before, id)
		}
		if id.IsZero() {
			continue
		}
		if other, taken := owners[id]; taken || !id.Usable() {
			return fmt.Sprintf("topic %s: id %v (also %q's, or reserved)", name, id, other)
		}
		if found, ok := img.TopicByID(id); !ok || found != name {
			return fmt.Sprintf("topic %s: id %v finds %q", name, id, found)
		}
		owners[id] = name
	}
	for _, name := range img.Topics() {
		topic, _ := img.Topic(name)
		for i, p := range topic.Partitions {
			// A reassignment in the random logs adds at most one replica.
			size := len(p.Replicas)
			if p.Topic != name || int(p.Partition) != i || size < topic.Config.ReplicationFactor || size > topic.Config.ReplicationFactor+1 {
				return fmt.Sprintf("topic %s holds %s at %d with replicas %v", name, p.TopicPartition, i, p.Replicas)
			}
		}
	}
	for _, p := range img.Partitions() {
		config, _ := img.TopicConfig(p.Topic)
		if p.Leader != NoBroker && !slices.Contains(p.ISR, p.Leader) {
			return fmt.Sprintf("%s: leader outside ISR", p.TopicPartition)
		}
		for _, member := range append(slices.Clone(p.ISR), p.ELR...) {
			if !slices.Contains(p.Replicas, member) {
				return fmt.Sprintf("%s: %d in ISR or ELR but not a replica", p.TopicPartition, member)
			}
		}
		for _, member := range p.ISR {
			if slices.Contains(p.ELR, member) {
				return fmt.Sprintf("%s: %d in both ISR and ELR", p.TopicPartition, member)
			}
			if broker, ok := img.Broker(member); !ok || broker.Fenced || broker.ShuttingDown {
				return fmt.Sprintf("%s: ISR member %d is not active", p.TopicPartition, member)
			}
		}
		for _, id := range append(slices.Clone(p.Adding), p.Removing...) {
			if !slices.Contains(p.Replicas, id) || (slices.Contains(p.Adding, id) && slices.Contains(p.Removing, id)) {
				return fmt.Sprintf("%s: adding %v or removing %v not disjoint sets of replicas", p.TopicPartition, p.Adding, p.Removing)
			}
		}
		if len(p.Removing) >= len(p.Replicas) && len(p.Replicas) > 0 {
			return fmt.Sprintf("%s: removing every replica", p.TopicPartition)
		}
		if len(p.ISR) >= config.MinInsyncReplicas && len(p.ELR) > 0 {
			return fmt.Sprintf("%s: ELR beside a full ISR", p.TopicPartition)
		}
		if before, ok := previous.Partition(p.TopicPartition); ok {
			if p.LeaderEpoch < before.LeaderEpoch || p.PartitionEpoch < before.PartitionEpoch {
				return fmt.Sprintf("%s: epochs went backwards", p.TopicPartition)
			}
			if p.Leader != before.Leader && p.LeaderEpoch == before.LeaderEpoch {
				return fmt.Sprintf("%s: new leader without a new leader epoch", p.TopicPartition)
			}
		}
	}
	return ""
}

// outcomes counts what happened to each kind of record across the whole
// test, so that the test can insist that every path was exercised.
var outcomes = map[string]int{}

func outcomeOf(r Record, applied bool, err error) string {
	kind := strings.Fields(r.String())[0]
	switch {
	case err != nil:
		return kind + " rejected"
	case !applied:
		return kind + " stale"
	}
	return kind + " applied"
}

var randomTopics = []string{"a", "b", "c"}

func randomBroker(random *rand.Rand) BrokerID { return BrokerID(random.IntN(5)) }

// randomEpoch is usually the broker's registered epoch, sometimes one off.
func randomEpoch(random *rand.Rand, img *Image, id BrokerID) BrokerEpoch {
	broker, _ := img.Broker(id)
	up, down := random.IntN(5)/4, random.IntN(5)/4
	return broker.Epoch + BrokerEpoch(up-down)
}

func randomRecord(random *rand.Rand, img *Image) Record {
	id := randomBroker(random)
	switch random.IntN(10) {
	case 0:
		return RegisterBroker{ID: id, Epoch: BrokerEpoch(img.Offset() + 1), Incarnation: fmt.Sprint(random.IntN(3))}
	case 1:
		return UnfenceBroker{ID: id, Epoch: randomEpoch(random, img, id)}
	case 2:
		return FenceBroker{ID: id, Epoch: randomEpoch(random, img, id)}
	case 3:
		return BeginControlledShutdown{ID: id, Epoch: randomEpoch(random, img, id)}
	case 4:
		if random.IntN(4) == 0 {
			return UnregisterBroker{ID: id, Epoch: randomEpoch(random, img, id)}
		}
		return randomCreateTopic(random, img)
	case 5:
		if random.IntN(3) == 0 {
			return AssignTopicID{Name: randomTopics[random.IntN(len(randomTopics))], ID: randomTopicID(random)}
		}
		return DeleteTopic{Name: randomTopics[random.IntN(len(randomTopics))]}
	case 6:
		if random.IntN(3) == 0 {
			// Usually a new block, sometimes one that does not go up.
			next := img.NextProducerID() + int64(random.IntN(3))*1000
			return ProducerIDs{BrokerID: id, BrokerEpoch: randomEpoch(random, img, id), NextProducerID: next}
		}
		if random.IntN(2) == 0 {
			return randomCreatePartitions(random, img)
		}
	case 7:
		if random.IntN(2) == 0 {
			return randomReassignment(random, img)
		}
	}
	return randomPartitionChange(random, img)
}

func randomCreateTopic(random *rand.Rand, img *Image) Record {
	name := randomTopics[random.IntN(len(randomTopics))]
	replicationFactor := 1 + random.IntN(3)
	config := TopicConfig{ReplicationFactor: replicationFactor, MinInsyncReplicas: 1 + random.IntN(replicationFactor)}
	var partitions []PartitionState
	for i := range 1 + random.IntN(3) {
		replicas := randomSubset(random, []BrokerID{0, 1, 2, 3, 4}, replicationFactor)
		var isr []BrokerID
		for _, replica := range replicas {
			if img.Active(replica) {
				isr = append(isr, replica)
			}
		}
		leader := NoBroker
		if len(isr) > 0 {
			leader = isr[0]
		}
		partitions = append(partitions, PartitionState{
			TopicPartition: TopicPartition{Topic: name, Partition: int32(i)},
			Replicas:       replicas, ISR: isr, Leader: leader,
		})
	}
	id := NoTopicID // as a build before topic ids wrote it
	if random.IntN(3) > 0 {
		id = randomTopicID(random)
	}
	return CreateTopic{Name: name, ID: id, Config: config, Partitions: partitions}
}

// randomCreatePartitions grows a random topic, usually as the controller
// would (numbered on from its count, its replication factor, its id),
// sometimes with a gap, an overlap, a wrong replication factor or another
// id, which Apply must refuse.
func randomCreatePartitions(random *rand.Rand, img *Image) Record {
	name := randomTopics[random.IntN(len(randomTopics))]
	topic, _ := img.Topic(name)
	first := len(topic.Partitions)
	if random.IntN(5) == 0 {
		first += 1 - 2*random.IntN(2)
	}
	replicationFactor := topic.Config.ReplicationFactor
	if random.IntN(5) == 0 || replicationFactor == 0 {
		replicationFactor = 1 + random.IntN(3)
	}
	id := topic.ID
	if random.IntN(6) == 0 {
		id = randomTopicID(random)
	}
	grow := CreatePartitions{Topic: name, ID: id}
	for i := range 1 + random.IntN(2) {
		replicas := randomSubset(random, []BrokerID{0, 1, 2, 3, 4}, replicationFactor)
		var isr []BrokerID
		for _, replica := range replicas {
			if img.Active(replica) {
				isr = append(isr, replica)
			}
		}
		leader := NoBroker
		if len(isr) > 0 {
			leader = isr[0]
		}
		grow.Partitions = append(grow.Partitions, PartitionState{
			TopicPartition: TopicPartition{Topic: name, Partition: int32(first + i)},
			Replicas:       replicas, ISR: isr, Leader: leader,
		})
	}
	return grow
}

// randomTopicID draws from few ids, so that some are taken and one (1) is
// the reserved metadata topic id.
func randomTopicID(random *rand.Rand) TopicID { return TopicID{15: byte(1 + random.IntN(8))} }

func randomPartitionChange(random *rand.Rand, img *Image) Record {
	partitions := img.Partitions()
	if len(partitions) == 0 {
		return DeleteTopic{Name: "none"}
	}
	current := partitions[random.IntN(len(partitions))]
	isr := randomSubset(random, current.Replicas, random.IntN(len(current.Replicas)+1))
	var rest []BrokerID
	for _, replica := range current.Replicas {
		if !slices.Contains(isr, replica) {
			rest = append(rest, replica)
		}
	}
	change := PartitionChange{
		TopicPartition: current.TopicPartition,
		Leader:         NoBroker,
		ISR:            isr,
		ELR:            randomSubset(random, rest, random.IntN(len(rest)+1)),
		LeaderEpoch:    current.LeaderEpoch + record.LeaderEpoch(random.IntN(3)-random.IntN(2)),
		PartitionEpoch: current.PartitionEpoch + PartitionEpoch(random.IntN(3)),
	}
	if len(isr) > 0 && random.IntN(5) > 0 {
		change.Leader = isr[random.IntN(len(isr))]
	}
	if random.IntN(10) == 0 {
		change.LeaderRecoveryState = Recovering
	}
	config, _ := img.TopicConfig(current.Topic)
	switch random.IntN(8) {
	case 0: // a reassignment begins: one broker more
		for _, id := range randomSubset(random, []BrokerID{0, 1, 2, 3, 4}, 5) {
			if !slices.Contains(current.Replicas, id) && len(current.Replicas) == config.ReplicationFactor {
				change.Replicas = append(slices.Clone(current.Replicas), id)
				break
			}
		}
	case 1: // one completes, or the replicas are reordered
		change.Replicas = randomSubset(random, current.Replicas, config.ReplicationFactor)
	}
	return change
}

// randomReassignment states a random partition's reassignment, usually for
// its partition epoch, with random adding and removing replicas (sometimes
// overlapping, or none), which Apply must check.
func randomReassignment(random *rand.Rand, img *Image) Record {
	partitions := img.Partitions()
	if len(partitions) == 0 {
		return Reassignment{TopicPartition: TopicPartition{Topic: "none"}}
	}
	current := partitions[random.IntN(len(partitions))]
	r := Reassignment{TopicPartition: current.TopicPartition,
		PartitionEpoch: current.PartitionEpoch - PartitionEpoch(random.IntN(6)/4) + PartitionEpoch(random.IntN(10)/9)}
	if random.IntN(4) > 0 {
		r.Adding = randomSubset(random, current.Replicas, 1)
		r.Removing = randomSubset(random, current.Replicas, random.IntN(2))
	}
	return r
}

func randomSubset(random *rand.Rand, from []BrokerID, size int) []BrokerID {
	shuffled := slices.Clone(from)
	random.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	return shuffled[:min(size, len(shuffled))]
}
