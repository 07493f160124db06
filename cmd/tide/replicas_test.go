package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each replica gets a line, in the partition's replica order: a follower's
// lag is the leader's log end offset less its own, and a replica that could
// not say where it is says why. Served clusters have no followers yet
// (replication over TCP is not built), so their lines are checked here.
func TestPrintReplicas(t *testing.T) {
	partition := kmsg.NewMetadataResponseTopicPartition()
	partition.Partition, partition.Leader = 3, 1
	partition.Replicas, partition.OfflineReplicas = []int32{2, 1, 4, 5, 6, 7}, []int32{7}
	states := map[replicaKey]replicaState{
		{3, 1}: {logStartOffset: 2, highWatermark: 8, logEndOffset: 10},
		{3, 2}: {logStartOffset: 0, highWatermark: 7, logEndOffset: 7},
		{3, 4}: {unreachable: errors.New("dial tcp: connection refused"), logEndOffset: -1, highWatermark: -1, logStartOffset: -1},
		{3, 5}: {failure: kafkaError(kerr.NotLeaderForPartition.Code, nil), logEndOffset: -1, highWatermark: -1, logStartOffset: -1},
		{3, 6}: {failure: kafkaError(kerr.OffsetOutOfRange.Code, nil), logEndOffset: 9, highWatermark: -1, logStartOffset: -1},
	}
	var out bytes.Buffer
	printReplicas(&out, partition, states)
	want := `    replica 2 (follower): log start offset 0, high watermark 7, log end offset 7, lag 3
    replica 1 (leader): log start offset 2, high watermark 8, log end offset 10, lag 0
    replica 4 (follower): unreachable (dial tcp: connection refused)
    replica 5 (follower): error NOT_LEADER_FOR_PARTITION
    replica 6 (follower): log end offset 9, high watermark unknown (error OFFSET_OUT_OF_RANGE), lag 1
    replica 7 (follower, offline): not asked
`
	if out.String() != want {
		t.Fatalf("got:\n%swant:\n%s", out.String(), want)
	}
	// Without the leader's log end offset there is no lag to show.
	delete(states, replicaKey{3, 1})
	out.Reset()
	printReplicas(&out, partition, states)
	if !strings.Contains(out.String(), "replica 2 (follower): log start offset 0, high watermark 7, log end offset 7, lag unknown\n") {
		t.Fatalf("without the leader:\n%s", out.String())
	}
}

// replicaStates against a served node: its own replicas answer replica id
// -2 with their offsets, and a replica on a broker the cluster does not list
// is unreachable, without failing the others.
func TestReplicaStatesOfAServedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	bootstrap := "--bootstrap=" + serveNode(t)
	mustRun(t, "", "created topic lagging", "topic", "create", "lagging", "--partitions", "2", bootstrap)
	mustRun(t, "a\nb\nc\n", "", "produce", "lagging", bootstrap)
	options := clientOptions{bootstrap: strings.TrimPrefix(bootstrap, "--bootstrap="), timeout: 5e9}
	client, metadata, err := options.connect(context.Background(), []string{"lagging"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic, err := topicMetadata(metadata, "lagging")
	if err != nil {
		t.Fatal(err)
	}
	for i := range topic.Partitions {
		topic.Partitions[i].Replicas = append(topic.Partitions[i].Replicas, 9)
	}
	states := options.replicaStates(context.Background(), client, metadata, topic)
	total := int64(0)
	for _, partition := range topic.Partitions {
		own := states[replicaKey{partition.Partition, 1}]
		if own.unreachable != nil || own.failure != nil || own.logStartOffset != 0 || own.highWatermark != own.logEndOffset {
			t.Fatalf("partition %d on broker 1: %+v", partition.Partition, own)
		}
		total += own.logEndOffset
		if missing := states[replicaKey{partition.Partition, 9}]; missing.unreachable == nil {
			t.Fatalf("partition %d on unlisted broker 9: %+v", partition.Partition, missing)
		}
	}
	if total != 3 {
		t.Fatalf("log end offsets add up to %d, want the 3 records produced", total)
	}
}

// describe against three served brokers and a topic replicated on all of
// them: every broker answers for its replicas, followers included, and a
// follower's lag is the leader's log end offset less its own. (Followers
// do not fetch over TCP yet, so today they lag by all the records; the
// checks hold either way.)
func TestDescribeShowsFollowers(t *testing.T) {
	if testing.Short() {
		t.Skip("serves three nodes; skipped with -short")
	}
	brokers := serveCluster(t, 3)
	bootstrap := "--bootstrap=" + strings.Join(brokers, ",")
	mustRun(t, "", "created topic spread", "topic", "create", "spread", "--partitions", "3", "--replication-factor", "3", bootstrap)
	// The broker that created it knows the topic; the others may still be
	// applying the metadata.
	for _, broker := range brokers {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, _, err := runWithInput("", "topic", "describe", "spread", "--bootstrap="+broker); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("broker %s does not know the topic after 10 s: %v", broker, err)
			}
		}
	}
	mustRun(t, "a\nb\nc\nd\n", "", "produce", "spread", bootstrap) // acks=all
	// Followers replicate over TCP: each catches up, and learns the high
	// watermark with its next fetch.
	var described string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		described = mustRun(t, "", "topic spread: partitions 3", "topic", "describe", "spread", bootstrap)
		if allCaughtUp(described, 9) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not all catch up in 10 s (lag 0, high watermark at the log end):\n%s", described)
		}
	}
	if strings.Count(described, "partition epoch 0, ") != 3 {
		t.Fatalf("describe does not show the partition epochs:\n%s", described)
	}
	line := replicaLine
	partitions := strings.Split(described, "\n  partition ")[1:]
	if len(partitions) != 3 {
		t.Fatalf("describe shows %d partitions, want 3:\n%s", len(partitions), described)
	}
	total := int64(0)
	for _, partition := range partitions {
		replicas := line.FindAllStringSubmatch(partition, -1)
		if len(replicas) != 3 || strings.Count(partition, "(leader)") != 1 {
			t.Fatalf("want three replica lines with offsets, one of them the leader's:\n%s", described)
		}
		var leaderEnd int64
		for _, replica := range replicas {
			if replica[2] == "leader" {
				leaderEnd = number(t, replica[4])
			}
		}
		for _, replica := range replicas {
			end, highWatermark, lag := number(t, replica[4]), number(t, replica[3]), number(t, replica[5])
			if lag != leaderEnd-end || highWatermark > end {
				t.Fatalf("replica %s: high watermark %d, log end offset %d, lag %d, leader's log end offset %d:\n%s",
					replica[1], highWatermark, end, lag, leaderEnd, described)
			}
		}
		total += leaderEnd
	}
	if total != 4 {
		t.Fatalf("leaders' log end offsets add up to %d, want the 4 records produced:\n%s", total, described)
	}
}

// replicaLine is describe's line for one replica: broker, role, high
// watermark, log end offset, lag.
var replicaLine = regexp.MustCompile(`(?m)^    replica (\d+) \((leader|follower)\): log start offset 0, high watermark (\d+), log end offset (\d+), lag (\d+)$`)

// allCaughtUp reports whether describe shows count replicas, each with no
// lag and its high watermark at its log end.
func allCaughtUp(described string, count int) bool {
	replicas := replicaLine.FindAllStringSubmatch(described, -1)
	for _, replica := range replicas {
		if replica[5] != "0" || replica[3] != replica[4] {
			return false
		}
	}
	return len(replicas) == count
}

func number(t *testing.T, text string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
