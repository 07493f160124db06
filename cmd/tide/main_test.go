package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

func run(args ...string) (string, error) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVersionAndHelp(t *testing.T) {
	out, err := run("version")
	if err != nil || !strings.HasPrefix(out, "tide ") {
		t.Fatalf("version: %q %v", out, err)
	}
	out, err = run("--help")
	if err != nil || !strings.Contains(out, "never loses an") || !strings.Contains(out, "Kafka") {
		t.Fatalf("help does not say what tide is: %q %v", out, err)
	}
}

func TestBadCommandLineIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"log", "inspect"}, {"version", "--no-such-flag"}} {
		_, err := run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("tide %v: err %v, exit code %d, want a usage error (2)", args, err, exitCode(err))
		}
	}
	if _, err := run("no-such-command"); err == nil {
		t.Error("an unknown command succeeded")
	}
	properties := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(properties, []byte("node.id=1\nno.such.setting=3\n"), 0o644)
	for _, args := range [][]string{{"serve"}, {"serve", "--id", "1", "--controllers", "1@nohost", "--data-dir", t.TempDir()},
		{"serve", "--config", properties}, {"serve", "--config", "/no/such/file"},
		// Free ports: were the bad value accepted, the node would serve
		// rather than fail the test on a busy port.
		{"serve", "--id", "1", "--controllers", "1@" + freeAddress(t), "--kafka-listen", freeAddress(t), "--data-dir", t.TempDir(), "--default-replication-factor", "-1"},
		{"serve", "--id", "1", "--controllers", "1@" + freeAddress(t), "--kafka-listen", freeAddress(t), "--data-dir", t.TempDir(), "--leader-imbalance-percentage", "0"},
		{"serve", "--id", "1", "--controllers", "1@" + freeAddress(t), "--kafka-listen", freeAddress(t), "--data-dir", t.TempDir(), "--leader-imbalance-check-interval", "0s"},
		{"dev", "--kafka-port", "0", "--leader-imbalance-percentage", "101"}} {
		if _, err := run(args...); err == nil || exitCode(err) != 2 {
			t.Errorf("tide %v: err %v, want a usage error (2)", args, err)
		}
	}
}

func TestLogInspect(t *testing.T) {
	dir := t.TempDir()
	l, err := commitlog.Open(commitlog.Config{FS: disk.OS(), Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		// Stamped as a leader stamps a producer's batch.
		batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: bytes.Repeat([]byte("x"), 200)}}})
		record.SetBaseOffset(batch, l.LogEndOffset())
		record.SetPartitionLeaderEpoch(batch, record.LeaderEpoch(i/20))
		if _, err := l.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := run("log", "inspect", dir)
	if err != nil || !strings.Contains(out, "leader epochs: 0@0 1@20") || strings.Contains(out, "damaged") {
		t.Fatalf("inspect of a healthy log: %v\n%s", err, out)
	}
	segment := filepath.Join(dir, "00000000000000000000.log")
	data, _ := os.ReadFile(segment)
	data[300] ^= 0xff
	os.WriteFile(segment, data, 0o644)
	out, err = run("log", "inspect", dir)
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "damaged at byte") {
		t.Fatalf("inspect of a damaged log: %v\n%s", err, out)
	}
	// A directory that is not there is an error, exit 1, not a silent 0.
	missing := filepath.Join(t.TempDir(), "no-such-partition")
	if _, err := run("log", "inspect", missing); err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "no-such-partition") {
		t.Fatalf("inspect of a missing directory: %v (exit %d)", err, exitCode(err))
	}
}

func TestSimCommand(t *testing.T) {
	out, err := run("sim", "--seeds", "3")
	if err != nil || !strings.Contains(out, "3 seeds") || !strings.Contains(out, "violations: none") {
		t.Fatalf("tide sim --seeds 3: %v\n%s", err, out)
	}
	out, err = run("sim", "--seeds", "80", "--legacy", "kafka-4414")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "reproduce: go run ./cmd/tide sim --seed") {
		t.Fatalf("tide sim --legacy kafka-4414 should find the failure and exit 1: %v\n%s", err, out)
	}
	if _, err := run("sim", "--legacy", "kafka-0"); err == nil || exitCode(err) != 2 {
		t.Fatalf("an unknown rule must be a usage error: %v", err)
	}
	if _, err := run("sim", "--without", "meteor"); err == nil || exitCode(err) != 2 {
		t.Fatalf("an unknown fault kind must be a usage error: %v", err)
	}
	out, err = run("sim", "--seeds", "100", "--legacy", "kafka-1211", "--shrink")
	if exitCode(err) != 1 || !strings.Contains(out, "shrunk: seed ") || !strings.Contains(out, "--legacy kafka-1211 --without") {
		t.Fatalf("tide sim --shrink should print the shrunk run and its command: %v\n%s", err, out)
	}
	out, err = run("sim", "--seed", "5", "--json")
	if err != nil || !strings.Contains(out, `"seed":5`) {
		t.Fatalf("tide sim --seed 5 --json: %v\n%s", err, out)
	}
}

func TestScenarioCommand(t *testing.T) {
	out, err := run("scenario", "list")
	if err != nil || !strings.Contains(out, "kafka-7128") || !strings.Contains(out, "kafka-1211") {
		t.Fatalf("scenario list: %v\n%s", err, out)
	}
	out, err = run("scenario", "run", "kafka-7128")
	if err != nil || !strings.Contains(out, "verdict: safe") || !strings.Contains(out, "r2: [hw=5, leo=10]") {
		t.Fatalf("scenario run kafka-7128: %v\n%s", err, out)
	}
	out, err = run("scenario", "run", "kafka-7128", "--legacy")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "verdict: committed offsets 5..9 lost") {
		t.Fatalf("scenario run kafka-7128 --legacy: %v\n%s", err, out)
	}
	if _, err := run("scenario", "run", "no-such-seed"); err == nil || exitCode(err) != 2 {
		t.Fatalf("an unknown scenario must be a usage error: %v", err)
	}
}

// A properties file sets what the command line leaves unset, with Kafka's
// names; the command line wins.
func TestServePropertiesFile(t *testing.T) {
	dir := t.TempDir()
	properties := filepath.Join(dir, "server.properties")
	text := "# a node\nnode.id=2\ncontroller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094\nlog.dirs=" + dir +
		"\nbroker.session.timeout.ms=4000\nbroker.heartbeat.interval.ms=250\ntide.kafka.listeners=1@127.0.0.1:9092,2@127.0.0.1:9192\n" +
		"num.partitions=3\ndefault.replication.factor=2\nauto.create.topics.enable=false\n" +
		"auto.leader.rebalance.enable=false\nleader.imbalance.check.interval.seconds=30\nleader.imbalance.per.broker.percentage=25\n"
	if err := os.WriteFile(properties, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	command := newServeCommand()
	if err := command.Flags().Parse([]string{"--config", properties, "--id", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := applyProperties(command.Flags(), properties); err != nil {
		t.Fatal(err)
	}
	options := reread(command.Flags(), serveOptions{})
	config, err := options.serverConfig(command)
	if err != nil {
		t.Fatal(err)
	}
	if config.ID != 1 || len(config.Controllers) != 2 || config.DataDir != dir ||
		config.SessionTimeout.Milliseconds() != 4000 || config.BrokerHeartbeat.Milliseconds() != 250 || len(config.KafkaListeners) != 2 ||
		config.DefaultPartitions != 3 || config.DefaultReplicationFactor != 2 || !config.DisableAutoCreateTopics ||
		!config.NoAutoLeaderRebalance || config.LeaderImbalanceCheckInterval != 30*time.Second || config.LeaderImbalancePercentage != 25 {
		t.Fatalf("got %+v", config)
	}
}

// Auto topic creation is on unless asked off, on serve's flags as in
// Kafka; --default-partitions still works, as the former --num-partitions.
func TestServeAutoCreateFlags(t *testing.T) {
	for _, test := range []struct {
		args       []string
		disabled   bool
		partitions int
	}{
		{nil, false, 1},
		{[]string{"--auto-create-topics=false", "--num-partitions", "4"}, true, 4},
		{[]string{"--default-partitions", "5"}, false, 5},
	} {
		command := newServeCommand()
		command.SetErr(io.Discard)
		args := append([]string{"--id", "1", "--controllers", "1@127.0.0.1:9093", "--kafka-listen", "127.0.0.1:9092", "--data-dir", t.TempDir()}, test.args...)
		if err := command.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		config, err := reread(command.Flags(), serveOptions{}).serverConfig(command)
		if err != nil {
			t.Fatal(err)
		}
		if config.DisableAutoCreateTopics != test.disabled || config.DefaultPartitions != test.partitions {
			t.Errorf("%v: auto creation off %t, %d partitions; want %t, %d", test.args, config.DisableAutoCreateTopics,
				config.DefaultPartitions, test.disabled, test.partitions)
		}
	}
}
