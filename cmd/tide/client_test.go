package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/server"
	"github.com/tidelog/tide/internal/testport"
)

// runWithInput runs one tide command with stdin and returns its stdout and
// stderr apart, since produce reports on stderr and consume prints records
// on stdout.
func runWithInput(stdin string, args ...string) (string, string, error) {
	root := newRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// freeAddress is an address for a node the serve command starts
// (internal/testport says why not port 0).
func freeAddress(t testing.TB) string { return testport.Free(t) }

// serveNode runs one tide serve node in this process, through the serve
// command's own configuration, and returns its Kafka address once its
// broker is registered and unfenced; the node stops when the test ends.
func serveNode(t testing.TB) string {
	t.Helper()
	return serveCluster(t, 1)[0]
}

// serveCluster runs size nodes as serveNode runs one, brokers 1..size,
// every one a voter, and returns their Kafka addresses in broker order
// once every broker is registered and unfenced.
func serveCluster(t testing.TB, size int) []string {
	t.Helper()
	var controllers, kafka, voters, listeners []string
	for id := 1; id <= size; id++ {
		controllers, kafka = append(controllers, freeAddress(t)), append(kafka, freeAddress(t))
		voters = append(voters, fmt.Sprintf("%d@%s", id, controllers[id-1]))
		listeners = append(listeners, fmt.Sprintf("%d@%s", id, kafka[id-1]))
	}
	for id := 1; id <= size; id++ {
		command := newServeCommand()
		command.SetErr(io.Discard)
		options := serveOptions{id: id, controllers: strings.Join(voters, ","), kafkaListen: kafka[id-1], kafkaListeners: strings.Join(listeners, ","),
			dataDir: filepath.Join(t.TempDir(), fmt.Sprintf("node-%d", id)), sessionTimeout: 2 * time.Second, brokerHeartbeat: 200 * time.Millisecond,
			electionTimeout: time.Second, logLevel: "error"}
		config, err := options.serverConfig(command)
		if err != nil {
			t.Fatal(err)
		}
		node, err := server.New(config)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- node.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-stopped; err != nil {
				t.Errorf("node %d did not stop cleanly: %v", id, err)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for !brokersUnfenced(controllers, size) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d brokers did not register and unfence within 10 s", size)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return kafka
}

// brokersUnfenced reports whether some controller says brokers 1..size are
// all registered and unfenced.
func brokersUnfenced(controllers []string, size int) bool {
	for _, controller := range controllers {
		if unfencedBrokers(controller) == size {
			return true
		}
	}
	return false
}

func unfencedBrokers(controller string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	client, err := server.Dial(ctx, controller)
	if err != nil {
		return 0
	}
	defer client.Close()
	status, err := client.Status(ctx)
	if err != nil {
		return 0
	}
	unfenced := 0
	for _, broker := range status.Brokers {
		if !broker.Fenced {
			unfenced++
		}
	}
	return unfenced
}

// The console client against a served node: a topic created, listed and
// described, 100 lines produced and consumed back, the topic deleted; and
// the errors a user meets on the way.
func TestTopicProduceConsume(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a node; skipped with -short")
	}
	bootstrap := "--bootstrap=" + serveNode(t)
	mustRun(t, "", "created topic orders (partitions 2, replication factor 1)", "topic", "create", "orders", "--partitions", "2", bootstrap)
	mustRun(t, "", "orders\n", "topic", "list", bootstrap)
	var input strings.Builder
	for i := range 100 {
		fmt.Fprintf(&input, "key-%d:value %d\n", i, i)
	}
	mustRun(t, input.String(), "", "produce", "orders", "--key-separator", ":", bootstrap)
	described := mustRun(t, "", "partition 1: leader 1, leader epoch 0, partition epoch 0, replicas [1], isr [1], offline []", "topic", "describe", "orders", bootstrap)
	if !strings.Contains(described, "topic orders: partitions 2") || strings.Count(described, "earliest 0 latest ") != 2 {
		t.Fatalf("describe:\n%s", described)
	}
	checkReplicaLines(t, described, 100)
	consumed := mustRun(t, "", "", "consume", "orders", "--exit-at-end", bootstrap)
	checkSameLines(t, input.String(), consumed)
	withOffsets := mustRun(t, "", "", "consume", "orders", "--partition", "0", "--from", "1", "--format", "offsets", "--exit-at-end", bootstrap)
	if !strings.HasPrefix(withOffsets, "0\t1\tkey-") {
		t.Fatalf("consume --partition 0 --from 1 --format offsets:\n%s", withOffsets)
	}
	checkConsumePastTheEnd(t, bootstrap)
	mustRun(t, "", "created topic acked", "topic", "create", "acked", "--min-insync-replicas", "1", bootstrap)
	mustRun(t, "leader only\n", "", "produce", "acked", "--acks", "1", bootstrap)
	mustRun(t, "no one\n", "", "produce", "acked", "--acks", "0", bootstrap)
	// Nothing says when an acks=0 record is appended, so read until it is.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := mustRun(t, "", "", "consume", "acked", "--exit-at-end", bootstrap)
		if got == "leader only\nno one\n" {
			break
		}
		if time.Now().After(deadline) || got != "leader only\n" {
			t.Fatalf("consume after --acks 1 and 0: %q", got)
		}
	}
	mustRun(t, "", "orders-1: already led by its preferred replica", "topic", "elect-preferred", "orders", bootstrap)
	mustFail(t, 1, "create topic orders: TOPIC_ALREADY_EXISTS", "topic", "create", "orders", bootstrap)
	mustRun(t, "", "created topic compacted", "topic", "create", "compacted", "--config", "cleanup.policy=compact", "--config", "retention.ms=60000", bootstrap)
	mustFail(t, 1, "segment.bytes", "topic", "create", "tiny", "--config", "segment.bytes=1", bootstrap)
	mustFail(t, 2, "NAME=VALUE", "topic", "create", "tiny", "--config", "segment.bytes", bootstrap)
	checkTopicAlterConfig(t, bootstrap)
	mustFail(t, 1, "consume orders: partition 7: UNKNOWN_TOPIC_OR_PARTITION", "consume", "orders", "--partition", "7", bootstrap)
	checkConsumeUntilInterrupted(t, bootstrap)
	mustRun(t, "", "deleted topic orders", "topic", "delete", "orders", bootstrap)
	mustFail(t, 1, "delete topic orders: UNKNOWN_TOPIC_OR_PARTITION", "topic", "delete", "orders", bootstrap)
	mustFail(t, 1, "describe topic orders: UNKNOWN_TOPIC_OR_PARTITION", "topic", "describe", "orders", bootstrap)
	mustFail(t, 1, "produce to orders: UNKNOWN_TOPIC_OR_PARTITION", "produce", "orders", bootstrap)
	mustFail(t, 1, "consume orders: UNKNOWN_TOPIC_OR_PARTITION", "consume", "orders", bootstrap)
}

// checkReplicaLines checks describe's line for each partition's one
// replica, asked with replica id -2: everything acknowledged is below its
// high watermark, which is its log end offset and the partition's latest
// offset, and a leader trails itself by nothing.
func checkReplicaLines(t *testing.T, described string, records int64) {
	t.Helper()
	partition := regexp.MustCompile(`partition \d+: .*latest (\d+)\n    replica 1 \(leader\): log start offset 0, high watermark (\d+), log end offset (\d+), lag 0\n`)
	matches := partition.FindAllStringSubmatch(described, -1)
	if len(matches) != 2 {
		t.Fatalf("describe shows %d partitions with a replica line, want 2:\n%s", len(matches), described)
	}
	total := int64(0)
	for _, match := range matches {
		if match[1] != match[2] || match[2] != match[3] {
			t.Fatalf("latest %s, replica high watermark %s, log end offset %s: want all equal\n%s", match[1], match[2], match[3], described)
		}
		offset, _ := strconv.ParseInt(match[3], 10, 64)
		total += offset
	}
	if total != records {
		t.Fatalf("replica log end offsets add up to %d, want %d:\n%s", total, records, described)
	}
}

func mustRun(t *testing.T, stdin, want string, args ...string) string {
	t.Helper()
	stdout, stderr, err := runWithInput(stdin, args...)
	if err != nil || !strings.Contains(stdout, want) {
		t.Fatalf("tide %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

func mustFail(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	_, _, err := runWithInput("", args...)
	if err == nil || exitCode(err) != code || !strings.Contains(err.Error(), want) {
		t.Fatalf("tide %s: %v (exit %d), want exit %d with %q", strings.Join(args, " "), err, exitCode(err), code, want)
	}
}

// checkSameLines compares as sets of lines: records of one partition come
// back in order, but the partitions interleave as they are fetched.
func checkSameLines(t *testing.T, want, got string) {
	t.Helper()
	count := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
		count[line]++
	}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		count[line]--
	}
	for line, n := range count {
		if n != 0 {
			t.Fatalf("line %q produced and consumed %+d times apart; consumed:\n%s", line, n, got)
		}
	}
}

// Mistakes on the command line exit 2 before any connection; a bootstrap
// that accepts connections but never answers fails at --timeout, not never.
func TestClientErrors(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create"}, {"topic", "create", "a", "b"}, {"topic", "create", "a", "--partitions", "x"},
		{"topic", "create", "a", "--partitions", "0"}, {"topic", "list", "extra"}, {"topic", "elect-preferred", "a", "b"},
		{"produce"}, {"produce", "a", "--acks", "2"}, {"consume", "a", "--from", "soon"}, {"consume", "a", "--format", "xml"},
		{"topic", "list", "--timeout", "0s"}, {"topic", "list", "--bootstrap", ","},
	} {
		if _, _, err := runWithInput("", args...); err == nil || exitCode(err) != 2 {
			t.Errorf("tide %v: err %v, want a usage error (2)", args, err)
		}
	}
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	started := time.Now()
	_, _, err = runWithInput("", "topic", "list", "--bootstrap", silent.Addr().String(), "--timeout", "500ms")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "answered within 500ms") {
		t.Fatalf("a silent bootstrap: %v", err)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("a silent bootstrap took %s to fail with --timeout 500ms", took)
	}
}

// Without --exit-at-end consume follows the log past its end until
// interrupted, and an interruption is a clean exit with what was read
// printed.
func checkConsumeUntilInterrupted(t *testing.T, bootstrap string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	root := newRootCommand()
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"consume", "orders", bootstrap})
	started := time.Now()
	err := root.ExecuteContext(ctx)
	if lines := strings.Count(stdout.String(), "\n"); err != nil || lines != 100 || time.Since(started) < time.Second {
		t.Fatalf("consume until interrupted: %v after %s, printed %d lines", err, time.Since(started), lines)
	}
}

// checkTopicAlterConfig changes the configs of the topic "compacted"
// (created with cleanup.policy=compact and retention.ms=60000) and finds
// the change in describe --configs; an invalid value, an unknown topic
// and a bad command line get their exits.
func checkTopicAlterConfig(t *testing.T, bootstrap string) {
	t.Helper()
	mustRun(t, "", "altered configs of topic compacted (1 set, 1 deleted)",
		"topic", "alter-config", "compacted", "--set", "retention.ms=120000", "--delete", "cleanup.policy", bootstrap)
	described := mustRun(t, "", "", "topic", "describe", "compacted", "--configs", bootstrap)
	for _, want := range []string{"config retention.ms=120000 (DYNAMIC_TOPIC_CONFIG)", "config cleanup.policy=delete (DEFAULT_CONFIG)"} {
		if !strings.Contains(described, want) {
			t.Fatalf("describe --configs has no %q:\n%s", want, described)
		}
	}
	mustFail(t, 1, "for configuration retention.ms", "topic", "alter-config", "compacted", "--set", "retention.ms=soon", bootstrap)
	mustFail(t, 1, "alter configs of topic missing: UNKNOWN_TOPIC_OR_PARTITION", "topic", "alter-config", "missing", "--set", "retention.ms=1", bootstrap)
	mustFail(t, 2, "at least one --set or --delete", "topic", "alter-config", "compacted", bootstrap)
	mustFail(t, 2, "NAME=VALUE", "topic", "alter-config", "compacted", "--set", "retention.ms", bootstrap)
}

// checkConsumePastTheEnd: --from past a partition's end with --exit-at-end
// says where the partition ends rather than printing nothing and nothing
// else (issue 16's rough edge).
func checkConsumePastTheEnd(t *testing.T, bootstrap string) {
	t.Helper()
	stdout, stderr, err := runWithInput("", "consume", "orders", "--partition", "0", "--from", "999", "--exit-at-end", bootstrap)
	if err != nil || stdout != "" || !regexp.MustCompile(`partition 0: --from 999 is past the end: the partition ends at offset \d+ \(its high watermark\), nothing to read`).MatchString(stderr) {
		t.Fatalf("consume --from 999 --exit-at-end: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

func TestStartOffsetStaysInsideThePartition(t *testing.T) {
	bounds := struct{ earliest, latest int64 }{10, 20}
	for _, test := range []struct {
		from      int64
		exitAtEnd bool
		want      int64
		note      string
	}{
		{-2, false, 10, ""}, {-1, false, 20, ""}, {15, false, 15, ""}, {20, true, 20, ""},
		{3, false, 10, "below the log start offset 10"},
		{99, true, 20, "ends at offset 20 (its high watermark), nothing to read"},
		{99, false, 20, "waiting there for new records"},
	} {
		got, note := startOffset(test.from, bounds, test.exitAtEnd)
		if got != test.want || (test.note == "") != (note == "") || !strings.Contains(note, test.note) {
			t.Errorf("from %d exit-at-end %v: got %d %q, want %d %q", test.from, test.exitAtEnd, got, note, test.want, test.note)
		}
	}
}
