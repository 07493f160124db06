package main

import (
	"strings"
	"testing"
	"time"
)

// reassign and reassignments on a tide dev cluster of three brokers: a
// partition on brokers 1 and 2 moves to 3 and 1, the move ends (nothing
// listed, describe shows the new replicas), every record is still
// readable; refusals keep Kafka's codes, and bad flags are usage errors.
func TestTopicReassign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	run := startDev(t, "--kafka-port", "0")
	bootstrap := "--bootstrap=" + run.bootstrap()
	createVisibleTopic(t, run.bootstrap(), "orders", "1", "2")
	mustRun(t, devRecords(20), "", "produce", "orders", "--key-separator", ":", bootstrap)
	described := mustRun(t, "", "", "topic", "describe", "orders", bootstrap)
	// The partition's replicas are two of the three brokers; the move
	// swaps one of them for the third, which becomes the preferred leader.
	target := "3,1"
	switch {
	case strings.Contains(described, "replicas [2,3]"), strings.Contains(described, "replicas [3,2]"):
		target = "1,2"
	case strings.Contains(described, "replicas [3,1]"), strings.Contains(described, "replicas [1,3]"):
		target = "2,3"
	}
	mustRun(t, "", "moving orders-0 to replicas", "topic", "reassign", "orders", "--partition", "0", "--replicas", target, bootstrap)
	want := "replicas [" + target + "]"
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		listed := mustRun(t, "", "", "topic", "reassignments", "orders", bootstrap)
		described = mustRun(t, "", "", "topic", "describe", "orders", bootstrap)
		if strings.Contains(listed, "no partition is being moved") && strings.Contains(described, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move did not finish within 20 s:\n%s\n%s", listed, described)
		}
	}
	got := mustRun(t, "", "", "consume", "orders", "--exit-at-end", bootstrap)
	if lines := strings.Count(got, "\n"); lines != 20 {
		t.Fatalf("read %d records after the move, want 20:\n%s", lines, got)
	}
	mustFail(t, 1, "NO_REASSIGNMENT_IN_PROGRESS", "topic", "reassign", "orders", "--partition", "0", "--cancel", bootstrap)
	mustFail(t, 1, "INVALID_REPLICA_ASSIGNMENT", "topic", "reassign", "orders", "--partition", "0", "--replicas", "1,2,3", bootstrap)
	mustFail(t, 1, "INVALID_REPLICA_ASSIGNMENT", "topic", "reassign", "orders", "--partition", "0", "--replicas", "1,9", bootstrap)
	mustFail(t, 1, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "reassign", "orders", "--partition", "4", "--replicas", "1,2", bootstrap)
	mustFail(t, 2, "give --replicas", "topic", "reassign", "orders", "--partition", "0", bootstrap)
	mustFail(t, 2, "give --replicas", "topic", "reassign", "orders", "--replicas", "1,x", bootstrap)
	mustFail(t, 2, "give --replicas", "topic", "reassign", "orders", "--replicas", "1,2", "--cancel", bootstrap)
	mustRun(t, "", "no partition is being moved", "topic", "reassignments", bootstrap)
}
