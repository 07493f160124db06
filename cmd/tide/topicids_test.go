package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// Issue 13 as a new user ran it on tide dev: create ghost, produce a
// record, delete ghost, create ghost, consume. The re-created topic is
// empty, also after a restart, and the deleted topic's partition
// directories are gone from every node.
func TestDevDeletedTopicDoesNotComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	dir := t.TempDir()
	run := startDev(t, "--kafka-port", "0", "--dir", dir)
	bootstrap := run.bootstrap()
	createVisibleTopic(t, bootstrap, "ghost", "1", "3")
	mustRun(t, "the deleted record\n", "", "produce", "ghost", "--bootstrap", bootstrap)
	checkSameLines(t, "the deleted record\n", consumeAll(t, bootstrap, "ghost", "the deleted record\n"))
	first := devTopicID(t, bootstrap, "ghost")
	mustRun(t, "", "deleted topic ghost", "topic", "delete", "ghost", "--bootstrap", bootstrap)
	createVisibleTopic(t, bootstrap, "ghost", "1", "3")
	// The admin requests went to the controller's broker; the bootstrap
	// broker may show the deleted topic a moment longer.
	second := first
	for deadline := time.Now().Add(10 * time.Second); second == first; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the re-created topic has the deleted one's id %v", first)
		}
		second = devTopicID(t, bootstrap, "ghost")
	}
	checkEmpty(t, bootstrap, "ghost")
	waitDirectoriesOf(t, dir, "ghost", second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}

	again := startDev(t, "--kafka-port", "0", "--dir", dir)
	checkEmpty(t, again.bootstrap(), "ghost")
	if id := devTopicID(t, again.bootstrap(), "ghost"); id != second {
		t.Fatalf("the topic id changed over the restart: %v, then %v", second, id)
	}
	waitDirectoriesOf(t, dir, "ghost", second)
	if err := again.stop(); err != nil {
		t.Fatal(err)
	}
}

// The upgrade: testdata/upgrade-21c7b0a is a one-broker tide dev directory
// written by the build before topic ids (commit 21c7b0a): topics legacy (2
// partitions, 4 records) and legacy2 (1 partition, 2 records), and gone,
// written to and deleted, whose directory that build left behind. The new
// build opens it, gives every topic an id (written to partition.metadata),
// serves every record, removes gone's directory, and a gone created now is
// empty. The ids hold over a restart.
func TestDevUpgradeFromBeforeTopicIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "upgrade-21c7b0a"), dir)
	run := startDev(t, "--kafka-port", "0", "--dir", dir)
	bootstrap := run.bootstrap()
	checkSameLines(t, "k1:one\nk2:two\nk3:three\nk4:four\n", consumeAll(t, bootstrap, "legacy", "k1:one\nk2:two\nk3:three\nk4:four\n"))
	checkSameLines(t, "a\nb\n", consumeAll(t, bootstrap, "legacy2", "a\nb\n"))
	ids := map[string]metadata.TopicID{}
	for _, topic := range []string{"legacy", "legacy2"} {
		ids[topic] = waitTopicID(t, bootstrap, topic)
		waitDirectoriesOf(t, dir, topic, ids[topic])
	}
	waitGone(t, filepath.Join(dir, "node-1", "partitions", "gone-0"))
	createVisibleTopic(t, bootstrap, "gone", "1", "1")
	checkEmpty(t, bootstrap, "gone")
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}

	again := startDev(t, "--kafka-port", "0", "--dir", dir)
	checkSameLines(t, "k1:one\nk2:two\nk3:three\nk4:four\n", consumeAll(t, again.bootstrap(), "legacy", "k1:one\nk2:two\nk3:three\nk4:four\n"))
	for topic, id := range ids {
		if got := devTopicID(t, again.bootstrap(), topic); got != id {
			t.Fatalf("%s: id %v after the restart, %v before", topic, got, id)
		}
	}
	if err := again.stop(); err != nil {
		t.Fatal(err)
	}
}

// devTopicID asks Metadata v12 for a topic's id.
func devTopicID(t *testing.T, bootstrap, topic string) metadata.TopicID {
	t.Helper()
	request := kmsg.NewPtrMetadataRequest()
	request.Version = 12
	asked := kmsg.NewMetadataRequestTopic()
	asked.Topic = kmsg.StringPtr(topic)
	request.Topics = append(request.Topics, asked)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	response, err := request.RequestWith(ctx, devClient(t, bootstrap))
	if err != nil || len(response.Topics) != 1 || response.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata %s: %v %+v", topic, err, response)
	}
	return metadata.TopicID(response.Topics[0].TopicID)
}

// waitTopicID waits for the controller to give a topic from before topic
// ids its id, and returns it.
func waitTopicID(t *testing.T, bootstrap, topic string) metadata.TopicID {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if id := devTopicID(t, bootstrap, topic); id.Usable() {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s got no topic id within 10 s", topic)
		}
	}
}

// checkEmpty consumes a topic to its end and finds nothing.
func checkEmpty(t *testing.T, bootstrap, topic string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		stdout, stderr, err := runWithInput("", "consume", topic, "--exit-at-end", "--bootstrap", bootstrap)
		if err == nil {
			if stdout != "" {
				t.Fatalf("the re-created %s holds records:\n%s", topic, stdout)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume %s: %v\n%s", topic, err, stderr)
		}
	}
}

// waitDirectoriesOf waits until every node's directories of topic hold id
// in partition.metadata and none is set aside for deletion.
func waitDirectoriesOf(t *testing.T, dir, topic string, id metadata.TopicID) {
	t.Helper()
	want := "version: 0\ntopic_id: " + id.String()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		matches, err := filepath.Glob(filepath.Join(dir, "node-*", "partitions", topic+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		var wrong []string
		for _, match := range matches {
			data, err := os.ReadFile(filepath.Join(match, "partition.metadata"))
			if strings.HasSuffix(match, "-delete") || err != nil || string(data) != want {
				wrong = append(wrong, match)
			}
		}
		if len(matches) > 0 && len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("directories of %s not all of id %v: %v (of %v)", topic, id, wrong, matches)
		}
	}
}

func waitGone(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there", path)
		}
	}
}

// copyTree copies a checked-in directory to a writable one.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		relative, _ := filepath.Rel(from, path)
		target := filepath.Join(to, relative)
		if entry.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
