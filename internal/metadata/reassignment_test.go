package metadata

import (
	"errors"
	"testing"
)

// reassigningImage is an image with brokers 1 to 4 and topic t (rf 3, one
// partition on 1,2,3) whose partition is being moved from 1 to 4: the
// assignment is the target and the current replicas together.
func reassigningImage(t *testing.T) *Image {
	t.Helper()
	img := NewImage()
	var records []Record
	for id := BrokerID(1); id <= 4; id++ {
		records = append(records, RegisterBroker{ID: id, Epoch: BrokerEpoch(id), Incarnation: "i"}, UnfenceBroker{ID: id, Epoch: BrokerEpoch(id)})
	}
	tp := TopicPartition{Topic: "t"}
	records = append(records,
		CreateTopic{Name: "t", ID: TopicID{7, 15: 1}, Config: TopicConfig{ReplicationFactor: 3, MinInsyncReplicas: 1},
			Partitions: []PartitionState{{TopicPartition: tp, Replicas: []BrokerID{1, 2, 3}, ISR: []BrokerID{1, 2, 3}, Leader: 1}}},
		PartitionChange{TopicPartition: tp, Leader: 1, ISR: []BrokerID{1, 2, 3}, Replicas: []BrokerID{4, 2, 3, 1},
			PartitionEpoch: 1},
		Reassignment{TopicPartition: tp, PartitionEpoch: 1, Adding: []BrokerID{4}, Removing: []BrokerID{1}})
	for _, r := range records {
		applied, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: r})
		if err != nil || !applied {
			t.Fatalf("%v: applied %t, %v", r, applied, err)
		}
	}
	return img
}

// A Reassignment applies to the partition epoch it was decided with; a
// change of ISR keeps it, a change of assignment ends it, and an older one
// is stale.
func TestReassignmentFollowsThePartitionEpoch(t *testing.T) {
	img := reassigningImage(t)
	tp := TopicPartition{Topic: "t"}
	p, _ := img.Partition(tp)
	if !p.Reassigning() || p.Adding[0] != 4 || p.Removing[0] != 1 || len(p.Target()) != 3 || p.Target()[0] != 4 {
		t.Fatalf("state after the reassignment record: %v", p)
	}
	if len(img.Reassignments()) != 1 {
		t.Fatalf("Reassignments() = %v", img.Reassignments())
	}
	apply := func(r Record) (bool, error) { return img.Apply(Entry{Offset: img.Offset() + 1, Record: r}) }
	if applied, err := apply(PartitionChange{TopicPartition: tp, Leader: 1, ISR: []BrokerID{1, 2, 3, 4}, PartitionEpoch: 2}); err != nil || !applied {
		t.Fatal(applied, err)
	}
	if p, _ = img.Partition(tp); !p.Reassigning() {
		t.Fatalf("an ISR change ended the reassignment: %v", p)
	}
	if applied, err := apply(Reassignment{TopicPartition: tp, PartitionEpoch: 1}); err != nil || applied {
		t.Fatalf("an older reassignment record: applied %t, %v", applied, err)
	}
	if _, err := apply(Reassignment{TopicPartition: tp, PartitionEpoch: 3}); !errors.Is(err, ErrInvariant) {
		t.Fatalf("a reassignment for a future epoch: %v", err)
	}
	if _, err := apply(Reassignment{TopicPartition: tp, PartitionEpoch: 2, Adding: []BrokerID{5}}); !errors.Is(err, ErrInvariant) {
		t.Fatalf("adding a broker that is no replica: %v", err)
	}
	if _, err := apply(Reassignment{TopicPartition: tp, PartitionEpoch: 2, Adding: []BrokerID{4}, Removing: []BrokerID{4}}); !errors.Is(err, ErrInvariant) {
		t.Fatalf("adding and removing one broker: %v", err)
	}
	done := PartitionChange{TopicPartition: tp, Leader: 2, ISR: []BrokerID{4, 2, 3}, Replicas: []BrokerID{4, 2, 3},
		LeaderEpoch: 1, PartitionEpoch: 3}
	if applied, err := apply(done); err != nil || !applied {
		t.Fatal(applied, err)
	}
	if p, _ = img.Partition(tp); p.Reassigning() || p.Adding != nil || len(img.Reassignments()) != 0 {
		t.Fatalf("a new assignment kept the reassignment: %v", p)
	}
}

// A snapshot keeps a reassignment in progress (image version 4); an image
// without one keeps its older version, so older builds still open it.
func TestSnapshotKeepsReassignments(t *testing.T) {
	img := reassigningImage(t)
	encoded := EncodeImage(nil, img)
	if encoded[0] != imageReassignmentsVersion {
		t.Fatalf("version %d", encoded[0])
	}
	decoded, err := DecodeImage(encoded)
	if err != nil || !decoded.Equal(img) || decoded.Describe() != img.Describe() {
		t.Fatalf("%v\n%s\nwant\n%s", err, decoded.Describe(), img.Describe())
	}
	p, _ := decoded.Partition(TopicPartition{Topic: "t"})
	if !p.Reassigning() {
		t.Fatalf("the snapshot lost the reassignment: %v", p)
	}
	tp := TopicPartition{Topic: "t"}
	if _, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: PartitionChange{TopicPartition: tp, Leader: 1,
		ISR: []BrokerID{1, 2, 3}, Replicas: []BrokerID{1, 2, 3}, PartitionEpoch: 2}}); err != nil {
		t.Fatal(err)
	}
	if version := EncodeImage(nil, img)[0]; version != imageEndpointsVersion && version != codecVersion {
		t.Fatalf("an image without reassignments is written as version %d", version)
	}
	// A version 3 image (configs only) with a reassignment in its trailing
	// section is corrupt: that version never held one.
	encoded[0] = imageTrailingVersion
	if _, err := DecodeImage(encoded); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 with a reassignment: %v", err)
	}
}
