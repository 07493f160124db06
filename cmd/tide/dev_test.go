package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncBuffer is a bytes.Buffer that tide dev writes while the test reads.
type syncBuffer struct {
	mutex  sync.Mutex
	buffer bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mutex.Lock()
	defer b.mutex.Unlock()
	return b.buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mutex.Lock()
	defer b.mutex.Unlock()
	return b.buffer.String()
}

// devRun is one tide dev running in the test process, through the root
// command as a user runs it.
type devRun struct {
	t              *testing.T
	cancel         context.CancelFunc
	stdout, stderr *syncBuffer
	done           chan error
	stopped        bool
}

// startDev runs tide dev with args and waits for it to print "ready"; the
// cluster stops when the test ends, if the test has not stopped it.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &devRun{t: t, cancel: cancel, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	root := newRootCommand()
	root.SetOut(run.stdout)
	root.SetErr(run.stderr)
	root.SetArgs(append([]string{"dev"}, args...))
	go func() { run.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		if !run.stopped {
			run.stop()
		}
	})
	deadline := time.After(30 * time.Second)
	for !strings.Contains(run.stdout.String(), "\nready in ") {
		select {
		case err := <-run.done:
			run.stopped = true
			t.Fatalf("tide dev %v exited before it was ready: %v\n%s%s", args, err, run.stdout, run.stderr)
		case <-deadline:
			t.Fatalf("tide dev %v was not ready within 30 s:\n%s%s", args, run.stdout, run.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return run
}

// stop cancels the command's context, as the first Ctrl-C does, and
// returns what it exited with.
func (r *devRun) stop() error {
	r.t.Helper()
	r.cancel()
	return r.wait()
}

func (r *devRun) wait() error {
	r.t.Helper()
	r.stopped = true
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		r.t.Fatalf("tide dev did not stop within 30 s:\n%s%s", r.stdout, r.stderr)
		return nil
	}
}

// bootstrap is the address the banner gives.
func (r *devRun) bootstrap() string {
	for _, line := range strings.Split(r.stdout.String(), "\n") {
		if address, ok := strings.CutPrefix(line, "bootstrap: "); ok {
			return address
		}
	}
	r.t.Fatalf("no bootstrap line in:\n%s", r.stdout)
	return ""
}

// Three brokers in one process: every one in Metadata, an RF 1 topic
// spread over them produced to and consumed back, the default replication
// factor of 3 for a topic created without one, a clean stop, and a restart
// from --dir that finds the topic and its records.
func TestDevThreeBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	dir := t.TempDir()
	run := startDev(t, "--kafka-port", "0", "--dir", dir)
	bootstrap := run.bootstrap()
	checkBrokers(t, bootstrap, 3)
	checkDefaultReplicationFactor(t, bootstrap, 3)
	input := devRecords(60)
	createVisibleTopic(t, bootstrap, "orders", "3", "1")
	mustRun(t, input, "", "produce", "orders", "--key-separator", ":", "--bootstrap", bootstrap)
	checkSameLines(t, input, consumeAll(t, bootstrap, "orders", input))
	described := mustRun(t, "", "", "topic", "describe", "orders", "--bootstrap", bootstrap)
	for id := 1; id <= 3; id++ {
		if !strings.Contains(described, fmt.Sprintf("leader %d,", id)) {
			t.Fatalf("the partitions are not spread over the three brokers:\n%s", described)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("tide dev did not exit cleanly: %v\n%s", err, run.stderr)
	}
	if strings.Contains(run.stderr.String(), "level=INFO") {
		t.Fatalf("without --verbose tide dev logged at info:\n%s", run.stderr)
	}
	if !strings.Contains(run.stdout.String(), "stopped; the data stays in "+dir) {
		t.Fatalf("no word of where the data stays:\n%s", run.stdout)
	}
	for id := 1; id <= 3; id++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d", id), "partitions")); err != nil {
			t.Fatalf("node %d's data: %v", id, err)
		}
	}

	// Without --brokers, the restart takes the three the directory holds.
	again := startDev(t, "--kafka-port", "0", "--dir", dir)
	if !strings.HasPrefix(again.stdout.String(), "tide dev: 3 brokers") {
		t.Fatalf("the restart did not find three brokers:\n%s", again.stdout)
	}
	checkSameLines(t, input, consumeAll(t, again.bootstrap(), "orders", input))
	if err := again.stop(); err != nil {
		t.Fatalf("the restarted cluster did not exit cleanly: %v\n%s", err, again.stderr)
	}
}

// One broker, stopped by a real SIGINT as a user's Ctrl-C: a clean exit.
func TestDevOneBrokerInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	// No --dir: the cluster's temporary directory is removed on this
	// clean exit (it was once left behind on every run).
	t.Setenv("TMPDIR", t.TempDir())
	run := startDev(t, "--brokers", "1", "--kafka-port", "0", "--verbose")
	data := regexp.MustCompile(`(?m)^data: (\S+) \(a new temporary directory, removed on a clean exit; --keep keeps it\)$`).FindStringSubmatch(run.stdout.String())
	if data == nil {
		t.Fatalf("the banner does not say the temporary directory goes:\n%s", run.stdout)
	}
	bootstrap := run.bootstrap()
	if !strings.Contains(run.stderr.String(), "level=INFO") {
		t.Fatalf("--verbose logged no info:\n%s", run.stderr)
	}
	checkBrokers(t, bootstrap, 1)
	// A controller listener given as the bootstrap is named as one, not
	// taken for a broker wanting TLS (franz-go's guess).
	controller := regexp.MustCompile(`controller ([0-9.:]+)`).FindStringSubmatch(run.stdout.String())
	if controller == nil {
		t.Fatalf("no controller listener in the banner:\n%s", run.stdout)
	}
	mustFail(t, 1, "--bootstrap "+controller[1]+" is node 1's controller listener, not a Kafka listener: give a broker's Kafka address, such as node 1's "+bootstrap,
		"topic", "list", "--bootstrap", controller[1], "--timeout", "5s")
	checkDefaultReplicationFactor(t, bootstrap, 1)
	createVisibleTopic(t, bootstrap, "single", "1", "1")
	checkDevMetrics(t, run.stdout.String())
	input := devRecords(10)
	mustRun(t, input, "", "produce", "single", "--key-separator", ":", "--bootstrap", bootstrap)
	checkSameLines(t, input, consumeAll(t, bootstrap, "single", input))
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := run.wait(); err != nil {
		t.Fatalf("tide dev after SIGINT: %v\n%s", err, run.stderr)
	}
	if !strings.Contains(run.stderr.String(), "stopping every broker") {
		t.Fatalf("no word of the shutdown on stderr:\n%s", run.stderr)
	}
	if _, err := os.Stat(data[1]); !os.IsNotExist(err) || !strings.Contains(run.stdout.String(), "stopped; removed the temporary data directory "+data[1]) {
		t.Fatalf("the temporary directory %s is still there (%v):\n%s", data[1], err, run.stdout)
	}
}

// Past three brokers the rest are brokers only, not voters, each still
// with its controller listener; every one registers and is in Metadata.
func TestDevBrokersBeyondTheVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster; skipped with -short")
	}
	run := startDev(t, "--brokers", "4", "--kafka-port", "0", "--dir", t.TempDir())
	if !strings.Contains(run.stdout.String(), "voters of the metadata quorum: 1, 2, 3\n") {
		t.Fatalf("the voters are not the first three:\n%s", run.stdout)
	}
	checkBrokers(t, run.bootstrap(), 4)
	checkDefaultReplicationFactor(t, run.bootstrap(), 3)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// An RF 3 topic written with acks=all and read back: its followers fetch
// from the leaders over TCP, and every replica stays in the ISR.
func TestDevReplicationFactorThree(t *testing.T) {
	run := startDev(t, "--kafka-port", "0", "--dir", t.TempDir())
	bootstrap := run.bootstrap()
	createVisibleTopic(t, bootstrap, "replicated", "3", "3")
	input := devRecords(60)
	mustRun(t, input, "", "produce", "replicated", "--key-separator", ":", "--acks", "all", "--bootstrap", bootstrap)
	checkSameLines(t, input, consumeAll(t, bootstrap, "replicated", input))
	described := mustRun(t, "", "", "topic", "describe", "replicated", "--bootstrap", bootstrap)
	if strings.Count(described, "isr [") != 3 || strings.Contains(described, "isr [1]") {
		t.Fatalf("the ISR is not every replica:\n%s", described)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Mistakes on the command line exit 2 before anything starts; a port in
// use exits 1 with one line that names it.
func TestDevErrors(t *testing.T) {
	held := t.TempDir()
	for id := 1; id <= 3; id++ {
		os.MkdirAll(filepath.Join(held, fmt.Sprintf("node-%d", id)), 0o755)
	}
	for _, args := range [][]string{
		{"dev", "--brokers", "0"}, {"dev", "--brokers", "10"}, {"dev", "--brokers", "x"}, {"dev", "--kafka-port", "-1"},
		{"dev", "--kafka-port", "65535"}, {"dev", "--kafka-port", "9092", "--controller-port", "9094"},
		{"dev", "--no-such-flag"}, {"dev", "extra"}, {"dev", "--dir", held, "--brokers", "1"},
	} {
		if _, _, err := runWithInput("", args...); err == nil || exitCode(err) != 2 {
			t.Errorf("tide %v: err %v, want a usage error (2)", args, err)
		}
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := fmt.Sprint(busy.Addr().(*net.TCPAddr).Port)
	free := fmt.Sprint(portOf(t, freeAddress(t)))
	for _, args := range [][]string{
		{"dev", "--brokers", "1", "--kafka-port", port, "--controller-port", free, "--dir", t.TempDir()},
		{"dev", "--brokers", "1", "--kafka-port", free, "--controller-port", port, "--dir", t.TempDir()},
	} {
		_, _, err := runWithInput("", args...)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "127.0.0.1:"+port+" is in use") || strings.Contains(err.Error(), "\n") {
			t.Errorf("tide %v with port %s taken: %v (exit %d), want one line naming the port, exit 1", args, port, err, exitCode(err))
		}
	}
}

func portOf(t *testing.T, address string) int {
	t.Helper()
	tcp, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	return tcp.Port
}

func devRecords(count int) string {
	var input strings.Builder
	for i := range count {
		fmt.Fprintf(&input, "key-%d:value %d\n", i, i)
	}
	return input.String()
}

// createVisibleTopic creates a topic and waits until the bootstrap broker
// lists it: CreateTopics answers once the controller's broker has it, and
// the others learn of it with their next heartbeat.
func createVisibleTopic(t *testing.T, bootstrap, name, partitions, replicationFactor string) {
	t.Helper()
	mustRun(t, "", "created topic "+name, "topic", "create", name, "--partitions", partitions,
		"--replication-factor", replicationFactor, "--bootstrap", bootstrap)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		stdout, _, err := runWithInput("", "topic", "describe", name, "--bootstrap", bootstrap)
		if err == nil && !strings.Contains(stdout, "leader -1") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not led on the bootstrap broker within 10 s: %v\n%s", name, err, stdout)
		}
	}
}

// consumeAll reads the topic to its end until it has every line of want:
// after a restart the partitions' leaders come back one by one.
func consumeAll(t *testing.T, bootstrap, topic, want string) string {
	t.Helper()
	lines := strings.Count(want, "\n")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		stdout, stderr, err := runWithInput("", "consume", topic, "--exit-at-end", "--bootstrap", bootstrap)
		if err == nil && strings.Count(stdout, "\n") == lines {
			return stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume %s: %v, %d of %d lines\n%s", topic, err, strings.Count(stdout, "\n"), lines, stderr)
		}
	}
}

// checkBrokers asks the bootstrap broker for Metadata: every broker must
// be listed, at the addresses dev printed.
func checkBrokers(t *testing.T, bootstrap string, count int) {
	t.Helper()
	client := devClient(t, bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	response, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, broker := range response.Brokers {
		ids = append(ids, broker.NodeID)
		if broker.Host != "127.0.0.1" {
			t.Fatalf("broker %d at %s, want 127.0.0.1", broker.NodeID, broker.Host)
		}
	}
	slices.Sort(ids)
	var want []int32
	for id := int32(1); id <= int32(count); id++ {
		want = append(want, id)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("metadata lists brokers %v, want %v", ids, want)
	}
}

// checkDefaultReplicationFactor asks to create a topic without partitions
// or replication factor (-1, KIP-464), validate only, and reads back what
// the broker would give it.
func checkDefaultReplicationFactor(t *testing.T, bootstrap string, want int16) {
	t.Helper()
	client := devClient(t, bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	request := kmsg.NewPtrCreateTopicsRequest()
	request.ValidateOnly, request.TimeoutMillis = true, 10000
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = "defaults", -1, -1
	request.Topics = append(request.Topics, entry)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	topic := response.Topics[0]
	if topic.ErrorCode != 0 || topic.ReplicationFactor != want || topic.NumPartitions != 1 {
		t.Fatalf("a topic without a replication factor: %v, factor %d and %d partitions, want %d and 1",
			kerr.ErrorForCode(topic.ErrorCode), topic.ReplicationFactor, topic.NumPartitions, want)
	}
}

func devClient(t *testing.T, bootstrap string) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// TestDevHelperProcess is tide's main in a child process for the signal
// tests: it runs the arguments in TIDE_DEV_HELPER_ARGS and exits as main
// does. Without the variable it does nothing.
func TestDevHelperProcess(t *testing.T) {
	args := os.Getenv("TIDE_DEV_HELPER_ARGS")
	if args == "" {
		t.Skip("the child process of TestDevSignals")
	}
	root := newRootCommand()
	root.SetArgs(strings.Fields(args))
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "tide: %v\n", err)
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

// SIGTERM stops the cluster cleanly (exit 0); a second SIGINT during the
// shutdown exits at once with 1. Signals to a process of its own, so that
// os.Exit ends the child, not the test.
func TestDevSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs clusters; skipped with -short")
	}
	child := startDevProcess(t, "--brokers 1 --kafka-port 0 --dir "+t.TempDir())
	child.Process.Signal(syscall.SIGTERM)
	if err := waitProcess(t, child, 30*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	child = startDevProcess(t, "--kafka-port 0 --dir "+t.TempDir())
	child.Process.Signal(syscall.SIGINT)
	time.Sleep(100 * time.Millisecond) // the first begins the shutdown
	began := time.Now()
	child.Process.Signal(syscall.SIGINT)
	err := waitProcess(t, child, 30*time.Second)
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("after a second SIGINT: %v, want exit status 1", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("the second SIGINT took %s to exit", took)
	}
}

// startDevProcess runs tide dev in a child process and waits for ready.
func startDevProcess(t *testing.T, args string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestDevHelperProcess$")
	child.Env = append(os.Environ(), "TIDE_DEV_HELPER_ARGS=dev "+args)
	stdout := &syncBuffer{}
	child.Stdout, child.Stderr = stdout, stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stdout.String(), "\nready in "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tide dev %s in a child process was not ready within 30 s:\n%s", args, stdout)
		}
	}
	return child
}

func waitProcess(t *testing.T, child *exec.Cmd, timeout time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Fatalf("the child process did not exit within %s", timeout)
		return nil
	}
}

// checkDevMetrics scrapes the metrics URL the banner printed and finds the
// broker's partition count there.
func checkDevMetrics(t *testing.T, banner string) {
	t.Helper()
	url := regexp.MustCompile(`metrics (http://\S+/metrics)`).FindStringSubmatch(banner)
	if url == nil {
		t.Fatalf("no metrics URL in the banner:\n%s", banner)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		response, err := http.Get(url[1])
		if err != nil {
			t.Fatalf("scrape %s: %v", url[1], err)
		}
		body, _ := io.ReadAll(response.Body)
		response.Body.Close()
		if strings.Contains(string(body), "\nkafka_server_replicamanager_partition_count 1\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not count the broker's one partition:\n%s", url[1], body)
		}
	}
}
