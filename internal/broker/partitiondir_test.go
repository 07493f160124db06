package broker

import (
	"path"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

var (
	ghost      = metadata.TopicPartition{Topic: "ghost", Partition: 0}
	firstID    = metadata.TopicID{0: 'a', 15: 1}
	secondID   = metadata.TopicID{0: 'b', 15: 2}
	brokerOnly = []metadata.Record{
		metadata.RegisterBroker{ID: 1, Epoch: 0, Incarnation: "one"},
		metadata.UnfenceBroker{ID: 1, Epoch: 0},
	}
)

// Kafka's partition.metadata: two lines, the id in Kafka's text form; the
// reader takes any version from 0 and refuses what it cannot read.
func TestPartitionMetadataFormat(t *testing.T) {
	encoded := string(encodePartitionMetadata(firstID))
	if encoded != "version: 0\ntopic_id: "+firstID.String() {
		t.Fatalf("encoded %q", encoded)
	}
	if id, err := decodePartitionMetadata([]byte("version: 3\ntopic_id:  " + firstID.String() + "\n")); err != nil || id != firstID {
		t.Fatalf("decoded %v, %v", id, err)
	}
	for _, bad := range []string{"", "version: 0", "version: -1\ntopic_id: " + firstID.String(), "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
		"version: 0\ntopicid: " + firstID.String(), "version: 0\ntopic_id: x\nmore: y"} {
		if _, err := decodePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func newDiskNode(fs disk.FS, epoch metadata.BrokerEpoch) *Node {
	return New(Config{ID: 1, FS: fs, Dir: "data", FlushAlways: true, SegmentBytes: 1 << 20, MaxBatchBytes: 1 << 16,
		ReplicaLagTicks: 100, FetchRetryTicks: 10, ProposalRetryTicks: 10, MaxPendingProduces: 100, DeletedFilesPerTick: 2}, epoch)
}

func createGhost(id metadata.TopicID) metadata.CreateTopic {
	return metadata.CreateTopic{Name: "ghost", ID: id, Config: metadata.TopicConfig{ReplicationFactor: 1, MinInsyncReplicas: 1},
		Partitions: []metadata.PartitionState{{TopicPartition: ghost, Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1}}}
}

// metadataLog numbers records from offset 0.
type metadataLog struct{ entries []metadata.Entry }

func (m *metadataLog) add(records ...metadata.Record) []metadata.Entry {
	start := len(m.entries)
	for _, rec := range records {
		m.entries = append(m.entries, metadata.Entry{Offset: int64(len(m.entries)), Record: rec})
	}
	return m.entries[start:]
}

func mustApply(t *testing.T, n *Node, entries []metadata.Entry) {
	t.Helper()
	if err := n.ApplyMetadata(entries); err != nil {
		t.Fatal(err)
	}
}

// produceTo appends count records to a partition the node leads, acks=1.
func produceTo(t *testing.T, n *Node, tp metadata.TopicPartition, count int) {
	t.Helper()
	records := make([]record.Record, count)
	for i := range records {
		records[i] = record.Record{Value: []byte("deleted?")}
	}
	n.HandleClient(ClientRequest{Client: 1, Partition: tp, Produce: &replica.ProduceRequest{ID: 1,
		Batches: record.Build(record.BuildOptions{Records: records}), Acks: replica.AcksLeader, TimeoutTicks: 100}})
	pass(n)
}

func logEnd(t *testing.T, n *Node, tp metadata.TopicPartition) record.Offset {
	t.Helper()
	_, log, ok := n.Replica(tp)
	if !ok {
		t.Fatalf("%s is not hosted; failed: %v", tp, n.Failed())
	}
	return log.LogEndOffset()
}

func entriesOf(t *testing.T, fs disk.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The resurrection of issue 13: create, produce, delete, create again. The
// deletion renames the directory aside at once and Tick removes it; the
// re-created topic is empty and its directory holds the new id.
func TestRecreatedTopicIsEmpty(t *testing.T) {
	fs := disk.NewMem()
	n := newDiskNode(fs, 5)
	var log metadataLog
	mustApply(t, n, log.add(append(brokerOnly, createGhost(firstID))...))
	produceTo(t, n, ghost, 3)
	if end := logEnd(t, n, ghost); end != 3 {
		t.Fatalf("log end %d", end)
	}
	mustApply(t, n, log.add(metadata.DeleteTopic{Name: "ghost"}))
	names := entriesOf(t, fs, "data")
	if len(names) != 1 || !strings.HasPrefix(names[0], "ghost-0.") || !strings.HasSuffix(names[0], "-delete") || len(names[0]) != len("ghost-0.")+32+len("-delete") {
		t.Fatalf("after the deletion: %v", names)
	}
	for range 10 {
		n.Tick()
	}
	if names := entriesOf(t, fs, "data"); len(names) != 0 || len(n.PendingDeletions()) != 0 {
		t.Fatalf("not removed: %v, pending %v", names, n.PendingDeletions())
	}
	mustApply(t, n, log.add(createGhost(secondID)))
	if end := logEnd(t, n, ghost); end != 0 {
		t.Fatalf("the re-created topic starts at log end %d", end)
	}
	if id, found, err := n.readDirectoryTopicID("data/ghost-0"); !found || err != nil || id != secondID {
		t.Fatalf("partition.metadata holds %v, %v, %v", id, found, err)
	}
}

// A restarted broker replays the metadata log from the start, in batches
// of any size. The directory holds the later topic's id; the early
// CreateTopic of the deleted one must not take it (stale: not served, not
// removed) or the live topic's records would be lost.
func TestReplayKeepsTheLaterTopicsDirectory(t *testing.T) {
	fs := disk.NewMem()
	n := newDiskNode(fs, 5)
	var log metadataLog
	mustApply(t, n, log.add(append(brokerOnly, createGhost(firstID))...))
	produceTo(t, n, ghost, 1)
	mustApply(t, n, log.add(metadata.DeleteTopic{Name: "ghost"}, createGhost(secondID)))
	produceTo(t, n, ghost, 2)
	n.Close()

	restarted := newDiskNode(fs, 9)
	for _, entry := range log.entries {
		mustApply(t, restarted, []metadata.Entry{entry})
		if _, _, hosted := restarted.Replica(ghost); entry.Offset == 2 && (hosted || restarted.stale[ghost] != secondID) {
			t.Fatalf("the deleted topic's CreateTopic took the live topic's directory (stale %v)", restarted.stale)
		}
	}
	if err := restarted.MarkCaughtUp(); err != nil {
		t.Fatal(err)
	}
	if end := logEnd(t, restarted, ghost); end != 2 {
		t.Fatalf("the live topic's log end is %d after the replay", end)
	}
}

// A broker that was down while the topic was deleted and created again
// finds the old directory: when it applies the deletion, it sets it aside;
// when it only gets a snapshot with the new topic, it holds the partition
// back until it has caught up, then sets the directory aside. Either way
// the new topic is empty.
func TestStaleDirectoryOfADeletedTopic(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		fs := disk.NewMem()
		n := newDiskNode(fs, 5)
		var log metadataLog
		mustApply(t, n, log.add(append(brokerOnly, createGhost(firstID))...))
		produceTo(t, n, ghost, 4)
		n.Close()
		log.add(metadata.DeleteTopic{Name: "ghost"}, createGhost(secondID))

		restarted := newDiskNode(fs, 9)
		if !snapshot {
			mustApply(t, restarted, log.entries)
		} else {
			img := metadata.NewImage()
			for _, entry := range log.entries {
				if _, err := img.Apply(entry); err != nil {
					t.Fatal(err)
				}
			}
			if err := restarted.LoadImage(img); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := restarted.Replica(ghost); ok {
				t.Fatalf("served the old directory before catching up")
			}
			if err := restarted.MarkCaughtUp(); err != nil {
				t.Fatal(err)
			}
		}
		if end := logEnd(t, restarted, ghost); end != 0 {
			t.Fatalf("snapshot %t: the re-created topic has log end %d", snapshot, end)
		}
		for range 10 {
			restarted.Tick()
		}
		if names := entriesOf(t, fs, "data"); len(names) != 1 || names[0] != "ghost-0" {
			t.Fatalf("snapshot %t: data holds %v", snapshot, names)
		}
	}
}

// Directories set aside by an earlier incarnation are removed after a
// restart, a bounded number of files per tick.
func TestLeftoverDeletionsRemovedAfterRestart(t *testing.T) {
	fs := disk.NewMem()
	leftover := "data/ghost-0.00000000000000050000000000000001-delete"
	if err := fs.MkdirAll(leftover); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := disk.WriteFileAtomically(fs, leftover, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	n := newDiskNode(fs, 9)
	n.Tick() // two files
	if names := entriesOf(t, fs, leftover); len(names) != 1 {
		t.Fatalf("after one tick: %v", names)
	}
	n.Tick()
	if names := entriesOf(t, fs, "data"); len(names) != 0 {
		t.Fatalf("after two ticks: %v", names)
	}
}

// A directory written before topic ids (no partition.metadata) is served
// as its topic's, and gets the id the controller assigns; a directory of a
// topic the metadata no longer has is set aside once the node has caught
// up (the deletion, by a build before topic ids, left it behind).
func TestDirectoriesFromBeforeTopicIDs(t *testing.T) {
	fs := disk.NewMem()
	old := newDiskNode(fs, 5)
	var log metadataLog
	mustApply(t, old, log.add(append(brokerOnly, createGhost(metadata.NoTopicID))...))
	produceTo(t, old, ghost, 2)
	gone := metadata.TopicPartition{Topic: "gone", Partition: 0}
	if err := fs.MkdirAll(path.Join("data", gone.String())); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if _, found, _ := old.readDirectoryTopicID("data/ghost-0"); found {
		t.Fatalf("a topic without an id wrote partition.metadata")
	}

	n := newDiskNode(fs, 9)
	mustApply(t, n, log.entries)
	if end := logEnd(t, n, ghost); end != 2 {
		t.Fatalf("log end %d", end)
	}
	mustApply(t, n, log.add(metadata.AssignTopicID{Name: "ghost", ID: firstID}))
	if id, found, err := n.readDirectoryTopicID("data/ghost-0"); !found || err != nil || id != firstID {
		t.Fatalf("partition.metadata holds %v, %v, %v", id, found, err)
	}
	if err := n.MarkCaughtUp(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		n.Tick()
	}
	if names := entriesOf(t, fs, "data"); len(names) != 1 || names[0] != "ghost-0" {
		t.Fatalf("data holds %v", names)
	}
}

// An unreadable partition.metadata takes only its partition offline.
func TestCorruptPartitionMetadata(t *testing.T) {
	fs := disk.NewMem()
	if err := fs.MkdirAll("data/ghost-0"); err != nil {
		t.Fatal(err)
	}
	if err := disk.WriteFileAtomically(fs, "data/ghost-0", partitionMetadataName, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	n := newDiskNode(fs, 9)
	var log metadataLog
	mustApply(t, n, log.add(append(brokerOnly, createGhost(firstID))...))
	if _, _, ok := n.Replica(ghost); ok || n.Failed()[ghost] == nil {
		t.Fatalf("served a directory with an unreadable partition.metadata: %v", n.Failed())
	}
}

// A broker further behind than the history gets a snapshot: a topic it
// served without an id that now has one is the same topic, given its id
// in the gap; its records stay and its directory gets the id.
func TestSnapshotWithAnAssignedTopicID(t *testing.T) {
	fs := disk.NewMem()
	n := newDiskNode(fs, 5)
	var log metadataLog
	mustApply(t, n, log.add(append(brokerOnly, createGhost(metadata.NoTopicID))...))
	produceTo(t, n, ghost, 2)
	log.add(metadata.AssignTopicID{Name: "ghost", ID: firstID})
	img := metadata.NewImage()
	for _, entry := range log.entries {
		if _, err := img.Apply(entry); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.LoadImage(img); err != nil {
		t.Fatal(err)
	}
	if end := logEnd(t, n, ghost); end != 2 {
		t.Fatalf("log end %d after the snapshot", end)
	}
	if id, found, err := n.readDirectoryTopicID("data/ghost-0"); !found || err != nil || id != firstID {
		t.Fatalf("partition.metadata holds %v, %v, %v", id, found, err)
	}
}

// The partition.metadata reader takes any bytes from the disk without a
// panic, and what it accepts is an id that writes back to a file it reads
// the same.
func FuzzPartitionMetadata(f *testing.F) {
	f.Add(encodePartitionMetadata(firstID))
	f.Add([]byte("version: 1\ntopic_id: " + secondID.String() + "\n"))
	f.Add([]byte("version: 0\ntopic_id:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := decodePartitionMetadata(data)
		if err != nil {
			return
		}
		again, err := decodePartitionMetadata(encodePartitionMetadata(id))
		if err != nil || again != id || id.IsZero() {
			t.Fatalf("%q read as %v, written back as %v, %v", data, id, again, err)
		}
	})
}
