package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/metadata"
)

// The official Java client (org.apache.kafka:kafka-clients), unchanged,
// against three tide serve processes: interop/java's TideInterop creates a
// topic with replication factor 3 and min.insync.replicas 2 with the Admin
// client, describes it, lists topics, describes the cluster and the topic's
// config; produces 1000 keyed records with headers over 3 partitions with
// an idempotent acks=all producer; and reads them all back with
// assign+seekToBeginning consumers (no group: tide has no coordinator) at
// read_uncommitted and read_committed, record by record. The test then
// checks that every replica holds what the client was told was written,
// and runs it all again on a second topic with partition 0's leader killed
// while the producer is sending (javaThroughLeaderKill).
//
// Where kafka-clients comes from, in order: TIDE_KAFKA_CLIENTS_CLASSPATH (a
// Java classpath holding kafka-clients and its runtime dependencies), else
// Maven resolving interop/java/pom.xml. The test skips when java or javac
// is missing, when TIDE_SKIP_JAVA=1, when mvn is missing, and when Maven
// cannot download the client (no Maven registry reachable); any other
// Maven, javac or client failure fails it. The first Maven resolution
// downloads the client into ~/.m2 and may take minutes (javaResolveTimeout);
// later ones are offline and take seconds.
func TestJavaClientAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes and a JVM; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	if os.Getenv("TIDE_SKIP_JAVA") == "1" {
		t.Skip("TIDE_SKIP_JAVA=1 (.ci/run sets it when Maven could not resolve kafka-clients)")
	}
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Java client test needs a JDK (17 or newer)", tool)
		}
	}
	began := time.Now()
	classes := buildJavaInterop(t)
	t.Logf("TideInterop built in %s", time.Since(began).Round(time.Millisecond))

	c := newProcessCluster(t, 3)
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("three brokers registered and unfenced everywhere", 30*time.Second, all, allUnfenced(3))
	bootstrap := strings.Join([]string{c.kafka[1], c.kafka[2], c.kafka[3]}, ",")
	const topic, partitions, records = "java-interop", 3, 1000

	ran := time.Now()
	summary := runJavaInterop(t, classes, nil, "--bootstrap", bootstrap, "--topic", topic,
		"--partitions", strconv.Itoa(partitions), "--replication-factor", "3", "--min-insync-replicas", "2",
		"--records", strconv.Itoa(records), "--timeout-seconds", "120")
	t.Logf("TideInterop ran in %s: %s", time.Since(ran).Round(time.Millisecond), summary)
	for partition, count := range parseJavaSummary(t, summary, partitions, records) {
		c.waitReplicasAgree(topic, partition, count, 20*time.Second, all...)
	}

	c.javaThroughLeaderKill(t, classes, bootstrap)
}

// javaThroughLeaderKill runs TideInterop again on a new topic with its
// sends paced (about 15 s for 1000 records) and kills partition 0's leader
// with kill -9 two seconds in. The idempotent producer must ride through
// the failover (NOT_LEADER_OR_FOLLOWER, a metadata refresh, retries that
// the new leader's producer state deduplicates), so every partition's
// acknowledged offsets still run 0, 1, 2, ... with no gap and no duplicate,
// and the consumers, with a dead broker in their bootstrap list, read
// everything back. The two survivors must then agree on every partition.
func (c *processCluster) javaThroughLeaderKill(t *testing.T, classes, bootstrap string) {
	const topic, partitions, records = "java-failover", 3, 1000
	var killed metadata.BrokerID
	ran := time.Now()
	summary := runJavaInterop(t, classes, func(line string) {
		if !strings.HasPrefix(line, "tide-interop producing") {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		view, err := c.partitionMetadata(ctx, 1, topic, 0)
		if err != nil || view.leader <= 0 {
			t.Fatalf("%s-0 has no leader to kill: %+v, %v", topic, view, err)
		}
		time.Sleep(2 * time.Second)
		killed = view.leader
		c.kill(killed)
		t.Logf("broker %d, the leader of %s-0, killed %s after the first send", killed, topic, 2*time.Second)
	}, "--bootstrap", bootstrap, "--topic", topic, "--partitions", strconv.Itoa(partitions),
		"--replication-factor", "3", "--min-insync-replicas", "2", "--records", strconv.Itoa(records),
		"--pace-ms", "15", "--timeout-seconds", "150")
	t.Logf("TideInterop through a leader kill ran in %s: %s", time.Since(ran).Round(time.Millisecond), summary)
	if killed == metadata.NoBroker {
		t.Fatal("TideInterop never said it was producing, so no leader was killed")
	}
	for partition, count := range parseJavaSummary(t, summary, partitions, records) {
		c.waitReplicasAgree(topic, partition, count, 30*time.Second, c.running()...)
	}
}

// javaResolveTimeout bounds the Maven run that resolves kafka-clients: the
// first one on a machine downloads it and its dependencies.
const javaResolveTimeout = 10 * time.Minute

// buildJavaInterop compiles interop/java's one class with javac against
// kafka-clients and returns the classpath to run it with.
func buildJavaInterop(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "interop", "java"))
	if err != nil {
		t.Fatal(err)
	}
	dependencies := os.Getenv("TIDE_KAFKA_CLIENTS_CLASSPATH")
	if dependencies == "" {
		dependencies = resolveWithMaven(t, root)
	}
	classes := filepath.Join(t.TempDir(), "classes")
	source := filepath.Join(root, "src", "main", "java", "dev", "tide", "interop", "TideInterop.java")
	javac := exec.Command("javac", "-Xlint:all", "-Werror", "-d", classes, "-cp", dependencies, source)
	if out, err := javac.CombinedOutput(); err != nil {
		t.Fatalf("javac TideInterop: %v\n%s", err, out)
	}
	return classes + string(os.PathListSeparator) + dependencies
}

// mavenOffline matches what Maven prints when it cannot reach a registry
// (or reached one that lacks the artifact): a machine without one skips.
var mavenOffline = regexp.MustCompile(`(?m)^.*(Could not resolve|Could not transfer|Failed to read artifact descriptor|` +
	`No plugin found for prefix|Unknown host|resolve host|Network is unreachable|Connection refused|transfer failed).*$`)

// terminalEscapes are the colour codes Maven prints even in batch mode.
var terminalEscapes = regexp.MustCompile("\x1b\\[[0-9;]*m")

// resolveWithMaven asks Maven for the runtime classpath of
// interop/java/pom.xml (kafka-clients, its dependencies and an slf4j
// binding).
func resolveWithMaven(t *testing.T, root string) string {
	t.Helper()
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		t.Skip("mvn is not installed and TIDE_KAFKA_CLIENTS_CLASSPATH is not set: nothing to take kafka-clients from")
	}
	output := filepath.Join(t.TempDir(), "classpath.txt")
	ctx, cancel := context.WithTimeout(context.Background(), javaResolveTimeout)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "-f", filepath.Join(root, "pom.xml"),
		"dependency:build-classpath", "-DincludeScope=runtime", "-Dmdep.outputFile="+output)
	out, err := cmd.CombinedOutput()
	out = terminalEscapes.ReplaceAll(out, nil)
	if ctx.Err() != nil {
		t.Fatalf("mvn dependency:build-classpath did not finish in %s (a slow first download?)\n%s", javaResolveTimeout, tail(string(out), 20))
	}
	if err != nil {
		if line := mavenOffline.Find(out); line != nil {
			t.Skipf("Maven could not download kafka-clients or its plugin (no Maven registry reachable?); "+
				"set TIDE_KAFKA_CLIENTS_CLASSPATH to a classpath holding kafka-clients to run this test. Maven said:\n%s", line)
		}
		t.Fatalf("mvn dependency:build-classpath: %v\n%s", err, tail(string(out), 20))
	}
	classpath, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Maven resolved kafka-clients in %s", time.Since(began).Round(time.Millisecond))
	return strings.TrimSpace(string(classpath))
}

// runJavaInterop runs TideInterop and returns its summary line (its last);
// a non-zero exit fails the test with what the program printed. onLine, if
// not nil, sees each line of its stdout as it comes, while it runs.
func runJavaInterop(t *testing.T, classpath string, onLine func(string), args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// TIDE_JAVA_OPTIONS adds JVM options after the defaults, for example
	// -Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug
	// to see the versions the client negotiates; its stderr is then logged
	// whole.
	command := []string{"-cp", classpath, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}
	extra := strings.Fields(os.Getenv("TIDE_JAVA_OPTIONS"))
	command = append(append(append(command, extra...), "dev.tide.interop.TideInterop"), args...)
	cmd := exec.CommandContext(ctx, "java", command...)
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting java: %v", err)
	}
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		stdout.WriteString(lines.Text() + "\n")
		if onLine != nil {
			onLine(lines.Text())
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("starting java: %v", err)
	}
	if err != nil || ctx.Err() != nil {
		t.Fatalf("TideInterop: %v\nstdout:\n%s\nstderr (tail):\n%s", err, stdout.String(), tail(stderr.String(), 60))
	}
	switch {
	case len(extra) > 0:
		t.Logf("TideInterop's stderr:\n%s", stderr.String())
	case stderr.Len() > 0:
		t.Logf("TideInterop's warnings (tail):\n%s", tail(stderr.String(), 20))
	}
	printed := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return printed[len(printed)-1]
}

// parseJavaSummary checks TideInterop's "tide-interop ok" line and returns
// how many records each partition got.
func parseJavaSummary(t *testing.T, summary string, partitions, records int) map[int32]int64 {
	t.Helper()
	fields := map[string]string{}
	words := strings.Fields(summary)
	if len(words) < 2 || words[0] != "tide-interop" || words[1] != "ok" {
		t.Fatalf("TideInterop printed %q, want a line beginning \"tide-interop ok\"", summary)
	}
	for _, word := range words[2:] {
		name, value, _ := strings.Cut(word, "=")
		fields[name] = value
	}
	want := strconv.Itoa(records)
	for _, name := range []string{"produced", "consumed-read-uncommitted", "consumed-read-committed"} {
		if fields[name] != want {
			t.Fatalf("TideInterop: %s=%s, want %s", name, fields[name], want)
		}
	}
	perPartition := map[int32]int64{}
	var total int64
	for _, entry := range strings.Split(fields["per-partition"], ",") {
		partition, count, _ := strings.Cut(entry, ":")
		p, err1 := strconv.ParseInt(partition, 10, 32)
		n, err2 := strconv.ParseInt(count, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("TideInterop: per-partition=%q does not parse", fields["per-partition"])
		}
		perPartition[int32(p)] = n
		total += n
	}
	if len(perPartition) != partitions || total != int64(records) {
		t.Fatalf("TideInterop: per-partition=%s, want %d partitions adding up to %d", fields["per-partition"], partitions, records)
	}
	return perPartition
}
