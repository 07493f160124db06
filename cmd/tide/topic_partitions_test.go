package main

import (
	"fmt"
	"strings"
	"testing"
)

// add-partitions and delete-records against a served node: a topic grows
// (validate-only first, which adds nothing), never shrinks; the new
// partition is described and consumable; records below an offset go, and
// an offset above the high watermark is refused.
func TestTopicAddPartitionsAndDeleteRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	bootstrap := "--bootstrap=" + serveNode(t)
	mustRun(t, "", "created topic orders (partitions 1, replication factor 1)", "topic", "create", "orders", "--partitions", "1", bootstrap)
	var input strings.Builder
	for i := range 10 {
		fmt.Fprintf(&input, "value %d\n", i)
	}
	mustRun(t, input.String(), "", "produce", "orders", bootstrap)

	mustRun(t, "", "could grow topic orders to 3 partitions", "topic", "add-partitions", "orders", "--total", "3", "--validate-only", bootstrap)
	mustRun(t, "", "topic orders: partitions 1", "topic", "describe", "orders", bootstrap)
	mustRun(t, "", "grew topic orders to 3 partitions", "topic", "add-partitions", "orders", "--total", "3", bootstrap)
	described := mustRun(t, "", "topic orders: partitions 3", "topic", "describe", "orders", bootstrap)
	if !strings.Contains(described, "partition 2: leader 1, leader epoch 0, partition epoch 0, replicas [1], isr [1]") {
		t.Fatalf("describe after growing:\n%s", described)
	}
	if got := mustRun(t, "", "", "consume", "orders", "--partition", "2", "--exit-at-end", bootstrap); got != "" {
		t.Fatalf("the new partition holds %q", got)
	}
	mustFail(t, 1, "add partitions to orders: INVALID_PARTITIONS", "topic", "add-partitions", "orders", "--total", "2", bootstrap)
	mustFail(t, 1, "add partitions to missing: UNKNOWN_TOPIC_OR_PARTITION", "topic", "add-partitions", "missing", "--total", "2", bootstrap)
	mustFail(t, 2, "--total", "topic", "add-partitions", "orders", "--total", "0", bootstrap)
	mustFail(t, 2, "--total N is required", "topic", "add-partitions", "orders", bootstrap)

	mustRun(t, "", "orders-0: log start offset 4", "topic", "delete-records", "orders", "--partition", "0", "--offset", "4", bootstrap)
	if got := mustRun(t, "", "", "consume", "orders", "--partition", "0", "--format", "offsets", "--exit-at-end", bootstrap); !strings.HasPrefix(got, "0\t4\t") {
		t.Fatalf("consume after delete-records to 4:\n%s", got)
	}
	mustFail(t, 1, "delete records of orders-0: OFFSET_OUT_OF_RANGE", "topic", "delete-records", "orders", "--partition", "0", "--offset", "11", bootstrap)
	mustRun(t, "", "orders-0: log start offset 10", "topic", "delete-records", "orders", "--partition", "0", "--offset", "-1", bootstrap)
	mustFail(t, 1, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "delete-records", "orders", "--partition", "7", "--offset", "0", bootstrap)
	mustFail(t, 2, "--offset", "topic", "delete-records", "orders", "--partition", "0", "--offset", "-2", bootstrap)
	mustFail(t, 2, "--offset O is required", "topic", "delete-records", "orders", "--partition", "0", bootstrap)
}
