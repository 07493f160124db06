package metadata

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/record"
)

// fixtureRecords registers and unfences brokers 1, 2 and 3 (epochs 0, 2 and
// 4, the offsets of their registrations) and creates topic "orders" with one
// partition led by 1, ISR [1 2 3], min.insync.replicas 2.
func fixtureRecords() []Record {
	return []Record{
		RegisterBroker{ID: 1, Epoch: 0, Incarnation: "a"},
		UnfenceBroker{ID: 1, Epoch: 0},
		RegisterBroker{ID: 2, Epoch: 2, Incarnation: "b"},
		UnfenceBroker{ID: 2, Epoch: 2},
		RegisterBroker{ID: 3, Epoch: 4, Incarnation: "c"},
		UnfenceBroker{ID: 3, Epoch: 4},
		CreateTopic{
			Name:   "orders",
			Config: TopicConfig{ReplicationFactor: 3, MinInsyncReplicas: 2},
			Partitions: []PartitionState{{
				TopicPartition: TopicPartition{Topic: "orders", Partition: 0},
				Replicas:       []BrokerID{1, 2, 3},
				ISR:            []BrokerID{1, 2, 3},
				Leader:         1,
			}},
		},
	}
}

var orders0 = TopicPartition{Topic: "orders", Partition: 0}

func applyAll(t *testing.T, img *Image, records ...Record) {
	t.Helper()
	for _, r := range records {
		if _, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: r}); err != nil {
			t.Fatal(err)
		}
	}
}

func fixture(t *testing.T) *Image {
	t.Helper()
	img := NewImage()
	applyAll(t, img, fixtureRecords()...)
	return img
}

// change returns the fixture partition's next state with the given edits.
func change(edit func(*PartitionChange)) PartitionChange {
	c := PartitionChange{
		TopicPartition: orders0, Leader: 1, ISR: []BrokerID{1, 2, 3},
		LeaderEpoch: 0, PartitionEpoch: 1,
	}
	edit(&c)
	return c
}

func TestApplyEnforcesOrder(t *testing.T) {
	img := fixture(t)
	before := img.Describe()
	for _, offset := range []int64{img.Offset(), img.Offset() + 2, -1} {
		_, err := img.Apply(Entry{Offset: offset, Record: DeleteTopic{Name: "orders"}})
		if !errors.Is(err, ErrOutOfOrder) {
			t.Errorf("offset %d after %d: got %v, want ErrOutOfOrder", offset, img.Offset(), err)
		}
	}
	if img.Describe() != before {
		t.Errorf("an out-of-order entry changed the image")
	}
}

func TestApplyIgnoresStale(t *testing.T) {
	shrink := change(func(c *PartitionChange) { c.ISR = []BrokerID{1, 2} })
	tests := []struct {
		name  string
		setup []Record
		stale Record
	}{
		{"same partition epoch", []Record{shrink}, change(func(c *PartitionChange) { c.ISR = []BrokerID{1, 3} })},
		{"older partition epoch", []Record{shrink, change(func(c *PartitionChange) { c.PartitionEpoch = 2 })},
			change(func(c *PartitionChange) { c.ISR = []BrokerID{1, 3} })},
		{"older leader epoch", []Record{change(func(c *PartitionChange) {
			c.Leader, c.LeaderEpoch, c.PartitionEpoch = 2, 1, 1
		})}, change(func(c *PartitionChange) { c.PartitionEpoch = 5 })},
		{"register with an older epoch", nil, RegisterBroker{ID: 2, Epoch: 1, Incarnation: "z"}},
		{"register with the same epoch", nil, RegisterBroker{ID: 2, Epoch: 2, Incarnation: "z"}},
		{"fence an earlier incarnation", nil, FenceBroker{ID: 3, Epoch: 3}},
		{"unregister an earlier incarnation", nil, UnregisterBroker{ID: 3, Epoch: 1}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			img := fixture(t)
			applyAll(t, img, test.setup...)
			before := img.Describe()
			applied, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: test.stale})
			if err != nil || applied {
				t.Fatalf("got applied=%t err=%v, want a stale record ignored", applied, err)
			}
			after := img.Describe()
			// Only the offset line may differ: the stale entry is consumed.
			if strings.SplitN(before, "\n", 2)[1] != strings.SplitN(after, "\n", 2)[1] {
				t.Errorf("a stale record changed the image:\n%s\n%s", before, after)
			}
		})
	}
}

func TestApplyRejects(t *testing.T) {
	fenced := []Record{RegisterBroker{ID: 4, Epoch: 7, Incarnation: "d"}}
	tests := []struct {
		name   string
		setup  []Record
		record Record
		want   error
	}{
		{"unknown broker", nil, UnfenceBroker{ID: 9, Epoch: 0}, ErrUnknownBroker},
		{"unknown topic", nil, DeleteTopic{Name: "nope"}, ErrUnknownTopic},
		{"unknown partition", nil, change(func(c *PartitionChange) { c.Partition = 1 }), ErrUnknownTopic},
		{"topic exists", nil, fixtureRecords()[6], ErrTopicExists},
		{"broker epoch from the future", nil, FenceBroker{ID: 3, Epoch: 5}, ErrInvariant},
		{"leader outside the ISR", nil, change(func(c *PartitionChange) { c.ISR = []BrokerID{2, 3} }), ErrInvariant},
		{"ISR outside the replicas", nil, change(func(c *PartitionChange) { c.ISR = []BrokerID{1, 4} }), ErrInvariant},
		{"duplicate ISR member", nil, change(func(c *PartitionChange) { c.ISR = []BrokerID{1, 1} }), ErrInvariant},
		{"ELR overlaps ISR", nil, change(func(c *PartitionChange) {
			c.ISR, c.ELR = []BrokerID{1}, []BrokerID{1, 2}
		}), ErrInvariant},
		{"ELR beside a full ISR", nil, change(func(c *PartitionChange) {
			c.ISR, c.ELR = []BrokerID{1, 2}, []BrokerID{3}
		}), ErrInvariant},
		{"new leader in the same epoch", nil, change(func(c *PartitionChange) { c.Leader = 2 }), ErrInvariant},
		{"recovering with a wide ISR", nil, change(func(c *PartitionChange) {
			c.LeaderRecoveryState = Recovering
		}), ErrInvariant},
		{"fenced ISR member", fenced, change(func(c *PartitionChange) {
			c.Replicas, c.ISR = []BrokerID{1, 2, 3, 4}, []BrokerID{1, 2, 3, 4}
		}), ErrInvariant},
		{"fence the leader", nil, FenceBroker{ID: 1, Epoch: 0}, ErrInvariant},
		{"shut down an ISR member", nil, BeginControlledShutdown{ID: 2, Epoch: 2}, ErrInvariant},
		{"unregister an ISR member", nil, UnregisterBroker{ID: 3, Epoch: 4}, ErrInvariant},
		{"new incarnation of an ISR member", nil, RegisterBroker{ID: 3, Epoch: 8, Incarnation: "c2"}, ErrInvariant},
		{"topic with a wrong replica count", nil, CreateTopic{
			Name: "other", Config: TopicConfig{ReplicationFactor: 2, MinInsyncReplicas: 1},
			Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "other"},
				Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}},
		}, ErrInvariant},
		{"min.insync above the replication factor", nil, CreateTopic{
			Name: "other", Config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 2},
			Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "other"},
				Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}},
		}, ErrInvariant},
		{"partitions out of order", nil, CreateTopic{
			Name: "other", Config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
			Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "other", Partition: 1},
				Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}},
		}, ErrInvariant},
		{"nil record", nil, nil, ErrInvariant},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			img := fixture(t)
			applyAll(t, img, test.setup...)
			before := img.Describe()
			applied, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: test.record})
			if !errors.Is(err, test.want) || applied {
				t.Fatalf("got applied=%t err=%v, want %v", applied, err, test.want)
			}
			if img.Describe() != before {
				t.Errorf("a rejected record changed the image")
			}
		})
	}
}

func TestApplyChanges(t *testing.T) {
	img := fixture(t)
	clone := img.Clone()
	applyAll(t, img,
		// The ISR shrinks below min.insync.replicas: 3 goes to the ELR.
		change(func(c *PartitionChange) { c.ISR, c.ELR = []BrokerID{1}, []BrokerID{3} }),
		// 2 leads in epoch 1.
		PartitionChange{TopicPartition: orders0, Leader: 2, ISR: []BrokerID{1, 2}, LeaderEpoch: 1, PartitionEpoch: 2},
		PartitionChange{TopicPartition: orders0, Leader: 2, ISR: []BrokerID{2}, LeaderEpoch: 1, PartitionEpoch: 3},
		FenceBroker{ID: 1, Epoch: 0},
		RegisterBroker{ID: 1, Epoch: 11, Incarnation: "a2"},
		UnregisterBroker{ID: 1, Epoch: 11},
	)
	want := `offset=12
broker 2 epoch=2 incarnation=b unfenced
broker 3 epoch=4 incarnation=c unfenced
topic orders replication-factor=3 min-insync-replicas=2 unclean-leader-election=false
  orders-0 leader=2 leader-epoch=1 partition-epoch=3 replicas=[1 2 3] isr=[2] elr=[]
`
	if got := img.Describe(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if partition, _ := clone.Partition(orders0); partition.LeaderEpoch != record.LeaderEpoch(0) || len(partition.ISR) != 3 {
		t.Errorf("the clone changed with the original: %v", partition)
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	img := fixture(t)
	partition, _ := img.Partition(orders0)
	partition.ISR[0] = 99
	topic, _ := img.Topic("orders")
	topic.Partitions[0].Replicas[0] = 99
	img.Partitions()[0].ELR = append(img.Partitions()[0].ELR, 99)
	if again, _ := img.Partition(orders0); again.ISR[0] != 1 || again.Replicas[0] != 1 {
		t.Errorf("an accessor leaked the image's slices: %v", again)
	}
	if got := len(img.Brokers()); got != 3 {
		t.Errorf("got %d brokers, want 3", got)
	}
	if config, ok := img.TopicConfig("orders"); !ok || config.MinInsyncReplicas != 2 {
		t.Errorf("got config %v %t", config, ok)
	}
}

func TestZeroImage(t *testing.T) {
	var img Image
	if img.Offset() != -1 || len(img.Topics()) != 0 || len(img.Partitions()) != 0 {
		t.Fatalf("zero image is not empty at -1: %s", img.Describe())
	}
	clone := img.Clone()
	applyAll(t, clone, RegisterBroker{ID: 1, Incarnation: "a"})
	if img.Offset() != -1 {
		t.Errorf("applying to a clone changed the original")
	}
}
