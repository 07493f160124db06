package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupCommands drives tide group against a tide dev broker with a real
// group: a franz-go consumer reads a topic and commits; list and describe
// show it with its committed offsets and lag; offsets reset refuses the
// group while a member is in it, plans with --dry-run, then moves the
// offsets; delete removes it.
func TestGroupCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	run := startDev(t, "--brokers", "1", "--kafka-port", "0", "--dir", t.TempDir())
	bootstrap := run.bootstrap()
	flag := "--bootstrap=" + bootstrap
	createVisibleTopic(t, bootstrap, "events", "2", "1")
	var input strings.Builder
	for i := range 20 {
		fmt.Fprintf(&input, "k%d:v%d\n", i, i)
	}
	mustRun(t, input.String(), "", "produce", "events", "--key-separator", ":", flag)
	member := consumeInGroup(t, bootstrap, "readers", 20)
	mustFail(t, 1, "the group has members (state Stable)", "group", "offsets", "reset", "readers", "--topic", "events", "--to-earliest", flag)
	member.Close() // leaves the group
	waitForGroupState(t, flag, "readers", "Empty")

	described := mustRun(t, "", "group readers: state Empty, protocol type consumer", "group", "describe", "readers", flag)
	if committed := sumColumn(t, described, 2); committed != 20 {
		t.Fatalf("describe: committed offsets add up to %d, want 20:\n%s", committed, described)
	}
	planned := mustRun(t, "", "dry run: nothing committed", "group", "offsets", "reset", "readers", "--topic", "events", "--to-earliest", "--dry-run", flag)
	if moved := sumColumn(t, planned, 3); moved != 0 {
		t.Fatalf("the plan to the earliest offsets: %d, want 0:\n%s", moved, planned)
	}
	if lag := sumColumn(t, mustRun(t, "", "", "group", "describe", "readers", flag), 4); lag != 0 {
		t.Fatalf("a dry run changed the offsets: lag %d", lag)
	}
	mustRun(t, "", "committed 2 offsets for group readers", "group", "offsets", "reset", "readers", "--topic", "events", "--to-earliest", flag)
	if lag := sumColumn(t, mustRun(t, "", "", "group", "describe", "readers", flag), 4); lag != 20 {
		t.Fatalf("after the reset to the earliest offsets the lag is %d, want 20", lag)
	}
	mustRun(t, "", "deleted group readers", "group", "delete", "readers", flag)
	if listed := mustRun(t, "", "GROUP", "group", "list", flag); strings.Contains(listed, "readers") {
		t.Fatalf("the deleted group is still listed:\n%s", listed)
	}
	mustFail(t, 1, "GROUP_ID_NOT_FOUND", "group", "delete", "readers", flag)
}

// consumeInGroup joins group with a franz-go consumer, reads want records
// of events and commits them; the consumer stays in the group until closed.
func consumeInGroup(t *testing.T, bootstrap, group string, want int) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for read := 0; read < want; {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records in the group", read, want)
		}
		read += fetches.NumRecords()
	}
	if err := client.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return client
}

func waitForGroupState(t *testing.T, flag, group, state string) {
	t.Helper()
	pattern := regexp.MustCompile(`(?m)^` + group + `\s+` + state + `\s`)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if pattern.MatchString(mustRun(t, "", "", "group", "list", flag)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s never reached state %s", group, state)
		}
	}
}

// sumColumn adds up a numeric column of a table's lines for topic events
// ("-" counts as 0).
func sumColumn(t *testing.T, table string, column int) int {
	t.Helper()
	total := 0
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		if len(fields) <= column || fields[0] != "events" {
			continue
		}
		if n, err := strconv.Atoi(fields[column]); err == nil {
			total += n
		}
	}
	return total
}
