package metadata

import (
	"errors"
	"reflect"
	"testing"
)

// sampleRecords has one record of every type, with the awkward values: an
// unchanged assignment (nil Replicas) beside an empty ELR, negative ids.
func sampleRecords() []Record {
	return []Record{
		RegisterBroker{ID: 1, Epoch: 42, Incarnation: "b1-7"},
		RegisterBroker{ID: 5, Epoch: 43, Incarnation: "b5-1", Endpoint: "broker-5.example:9092"},
		UnfenceBroker{ID: 1, Epoch: 42},
		FenceBroker{ID: 2, Epoch: 7},
		BeginControlledShutdown{ID: 3, Epoch: 9},
		UnregisterBroker{ID: 4, Epoch: 11},
		CreateTopic{Name: "events", Config: TopicConfig{ReplicationFactor: 3, MinInsyncReplicas: 2, UncleanLeaderElection: true},
			Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "events"}, Replicas: []BrokerID{1, 2, 3},
				ISR: []BrokerID{1, 2}, ELR: []BrokerID{}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0}}},
		CreateTopic{Name: "orders", ID: TopicID{1, 2, 3, 15: 4}, Config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
			Partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "orders"}, Replicas: []BrokerID{1},
				ISR: []BrokerID{1}, Leader: 1}}},
		AssignTopicID{Name: "events", ID: TopicID{9, 15: 9}},
		DeleteTopic{Name: "old"},
		PartitionChange{TopicPartition: TopicPartition{Topic: "events", Partition: 0}, Leader: NoBroker, ISR: []BrokerID{},
			ELR: []BrokerID{2}, LeaderEpoch: 5, PartitionEpoch: 8, LeaderRecoveryState: Recovering},
		ProducerIDs{BrokerID: 2, BrokerEpoch: 7, NextProducerID: 3000},
		CreatePartitions{Topic: "orders", ID: TopicID{1, 2, 3, 15: 4}, Partitions: []PartitionState{
			{TopicPartition: TopicPartition{Topic: "orders", Partition: 1}, Replicas: []BrokerID{2}, ISR: []BrokerID{2}, Leader: 2},
			{TopicPartition: TopicPartition{Topic: "orders", Partition: 2}, Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}}},
		CreatePartitions{Topic: "legacy", Partitions: []PartitionState{
			{TopicPartition: TopicPartition{Topic: "legacy", Partition: 3}, Replicas: []BrokerID{1}, ISR: []BrokerID{}, ELR: []BrokerID{}, Leader: NoBroker}}},
		ConfigRecord{Resource: ConfigResource{Type: ConfigTopic, Name: "events"}, Key: "retention.ms", Value: "60000"},
		ConfigRecord{Resource: ConfigResource{Type: ConfigBrokerDefault}, Key: "log.retention.ms", Delete: true},
		Reassignment{TopicPartition: TopicPartition{Topic: "events", Partition: 2}, PartitionEpoch: 9,
			Adding: []BrokerID{4}, Removing: []BrokerID{1}},
		Reassignment{TopicPartition: TopicPartition{Topic: "events"}, PartitionEpoch: 10},
	}
}

// Every record type round-trips; a type the codec does not know panics in
// EncodeRecords, so adding a record type without its encoding fails here.
func TestRecordsRoundTrip(t *testing.T) {
	records := sampleRecords()
	for _, r := range records {
		decoded, err := DecodeRecords(EncodeRecords(nil, []Record{r}))
		if err != nil || len(decoded) != 1 || !reflect.DeepEqual(decoded[0], r) {
			t.Errorf("%#v came back as %#v, %v", r, decoded, err)
		}
	}
	decoded, err := DecodeRecords(EncodeRecords([]byte("prefix")[:0], records))
	if err != nil || !reflect.DeepEqual(decoded, records) {
		t.Fatalf("a batch came back as %v, %v", decoded, err)
	}
}

// Images built by random logs round-trip through a snapshot, and the image
// a snapshot gives applies the rest of the log exactly as the original.
func TestImageRoundTrip(t *testing.T) {
	reassigning := 0 // snapshots with a reassignment in progress (version 4)
	defer func() {
		if reassigning == 0 && !t.Failed() {
			t.Error("no snapshot held a reassignment in progress")
		}
	}()
	for seed := uint64(1); seed <= 50; seed++ {
		img, log := runRandomRecords(t, seed, 300)
		half := NewImage()
		for _, entry := range log[:len(log)/2] {
			if _, err := half.Apply(entry); err != nil {
				t.Fatal(err)
			}
		}
		encoded := EncodeImage(nil, half)
		if encoded[0] == imageReassignmentsVersion {
			reassigning++
		}
		snapshot, err := DecodeImage(encoded)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, half.Describe())
		}
		if snapshot.Describe() != half.Describe() || !snapshot.Equal(half) {
			t.Fatalf("seed %d: the snapshot differs:\n%s\nwant\n%s", seed, snapshot.Describe(), half.Describe())
		}
		for _, entry := range log[len(log)/2:] {
			if _, err := snapshot.Apply(entry); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if !snapshot.Equal(img) {
			t.Fatalf("seed %d: the log applied to a snapshot gave another image", seed)
		}
	}
}

// A snapshot that decodes but breaks an invariant is refused like a record
// that would break one.
func TestDecodeImageChecksInvariants(t *testing.T) {
	img := NewImage()
	img.brokers = map[BrokerID]brokerRegistration{1: {state: BrokerState{ID: 1, Epoch: 3, Fenced: true, ServedEpoch: NoBrokerEpoch}}}
	img.topics = map[string]*topicImage{"t": {config: TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
		partitions: []PartitionState{{TopicPartition: TopicPartition{Topic: "t"}, Replicas: []BrokerID{1}, ISR: []BrokerID{1}, Leader: 1}}}}
	if _, err := DecodeImage(EncodeImage(nil, img)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a fenced leader was accepted: %v", err)
	}
	for _, bad := range [][]byte{nil, {0}, {codecVersion}, {codecVersion, 0, 1}, {codecVersion, 0, 0, 0, 9}} {
		if _, err := DecodeImage(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeImage(%v) = %v, want ErrCorrupt", bad, err)
		}
		if _, err := DecodeRecords(bad); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeRecords(%v) = %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzDecode: arbitrary bytes never panic the decoders, and whatever they
// accept encodes to bytes that decode to the same thing.
func FuzzDecode(f *testing.F) {
	f.Add(EncodeRecords(nil, sampleRecords()))
	img := NewImage()
	for i, r := range sampleRecords()[:2] {
		if _, err := img.Apply(Entry{Offset: int64(i), Record: r}); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(EncodeImage(nil, img))
	f.Add([]byte{codecVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if records, err := DecodeRecords(b); err == nil {
			again, err := DecodeRecords(EncodeRecords(nil, records))
			if err != nil || !reflect.DeepEqual(again, records) {
				t.Fatalf("records %v did not round-trip: %v", records, err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		if img, err := DecodeImage(b); err == nil {
			again, err := DecodeImage(EncodeImage(nil, img))
			if err != nil || !again.Equal(img) {
				t.Fatalf("image did not round-trip: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
