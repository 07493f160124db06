package broker

import (
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
)

// A reassignment that moves a partition off this broker (it leads it, then
// the assignment holds broker 2 alone) closes its log and sets its
// directory aside like a deleted topic's; Tick removes it. A broker that
// was down while the partition moved away finds the directory stray once
// caught up, and sets it aside too.
func TestMovedAwayReplicaDropsItsCopy(t *testing.T) {
	fs := disk.NewMem()
	n := newDiskNode(fs, 5)
	var log metadataLog
	two := []metadata.Record{metadata.RegisterBroker{ID: 2, Epoch: 1, Incarnation: "two"}, metadata.UnfenceBroker{ID: 2, Epoch: 1}}
	create := createGhost(firstID)
	create.Partitions[0].Replicas, create.Partitions[0].ISR = []metadata.BrokerID{1}, []metadata.BrokerID{1}
	mustApply(t, n, log.add(append(append(append([]metadata.Record{}, brokerOnly...), two...), create)...))
	produceTo(t, n, ghost, 3)
	moved := []metadata.Record{
		metadata.PartitionChange{TopicPartition: ghost, Leader: 1, ISR: []metadata.BrokerID{1}, Replicas: []metadata.BrokerID{2, 1}, PartitionEpoch: 1},
		metadata.Reassignment{TopicPartition: ghost, PartitionEpoch: 1, Adding: []metadata.BrokerID{2}, Removing: []metadata.BrokerID{1}},
		metadata.PartitionChange{TopicPartition: ghost, Leader: 1, ISR: []metadata.BrokerID{2, 1}, PartitionEpoch: 2},
		metadata.PartitionChange{TopicPartition: ghost, Leader: 2, ISR: []metadata.BrokerID{2}, Replicas: []metadata.BrokerID{2},
			LeaderEpoch: 1, PartitionEpoch: 3},
	}
	mustApply(t, n, log.add(moved[:3]...))
	if end := logEnd(t, n, ghost); end != 3 {
		t.Fatalf("while the move is in progress the log end is %d", end)
	}
	mustApply(t, n, log.add(moved[3]))
	if _, _, hosted := n.Replica(ghost); hosted {
		t.Fatal("still hosted after the move")
	}
	names := entriesOf(t, fs, "data")
	if len(names) != 1 || !strings.HasPrefix(names[0], "ghost-0.") || !strings.HasSuffix(names[0], "-delete") {
		t.Fatalf("after the move: %v", names)
	}
	for range 10 {
		n.Tick()
	}
	if names := entriesOf(t, fs, "data"); len(names) != 0 {
		t.Fatalf("not removed: %v", names)
	}

	// Down during the move: the restarted node opens the directory as it
	// replays, and sets it aside once caught up.
	fs = disk.NewMem()
	n = newDiskNode(fs, 5)
	log = metadataLog{}
	mustApply(t, n, log.add(append(append(append([]metadata.Record{}, brokerOnly...), two...), create)...))
	produceTo(t, n, ghost, 3)
	restarted := newDiskNode(fs, 9)
	img := metadata.NewImage()
	log.add(moved...)
	for _, entry := range log.entries {
		if _, err := img.Apply(entry); err != nil {
			t.Fatal(err)
		}
	}
	if err := restarted.LoadImage(img); err != nil {
		t.Fatal(err)
	}
	if err := restarted.MarkCaughtUp(); err != nil {
		t.Fatal(err)
	}
	if names := entriesOf(t, fs, "data"); len(names) != 1 || !strings.HasSuffix(names[0], "-delete") {
		t.Fatalf("after catching up: %v", names)
	}
}
