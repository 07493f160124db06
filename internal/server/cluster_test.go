package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/testport"
)

// processCluster is real `tide serve` processes on 127.0.0.1.
type processCluster struct {
	t           *testing.T
	binary      string
	controllers map[metadata.BrokerID]string
	voters      string
	// kafka are the brokers' Kafka listeners; each broker is told only
	// its own and learns the others' from their registrations.
	kafka     map[metadata.BrokerID]string
	dirs      map[metadata.BrokerID]string
	processes map[metadata.BrokerID]*exec.Cmd
	logs      map[metadata.BrokerID]*os.File
	// prepare, when set, is called with each node's command before it
	// starts (blackhole_test.go runs every node under a uid of its own).
	prepare func(c *processCluster, id metadata.BrokerID, cmd *exec.Cmd)
}

// buildTide returns the tide binary the process tests run, built once for
// the whole test binary (a link takes seconds, and a dozen tests start
// processes) into a directory TestMain removes at the end.
func buildTide(t *testing.T) string {
	t.Helper()
	tideBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "tide-server-test-")
		if err != nil {
			tideBinary.err = err
			return
		}
		tideBinary.dir, tideBinary.path = dir, filepath.Join(dir, "tide")
		build := exec.Command("go", "build", "-o", tideBinary.path, "github.com/tidelog/tide/cmd/tide")
		if out, err := build.CombinedOutput(); err != nil {
			tideBinary.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if tideBinary.err != nil {
		t.Fatalf("building tide: %v", tideBinary.err)
	}
	return tideBinary.path
}

var tideBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// TestMain runs the package's tests and removes the shared binary.
//
// The tests that only drive processes of their own (a cluster of tide
// serve nodes and clients talking to it) run in parallel with each other,
// go test's -parallel at a time: most of their time is spent waiting for
// sessions to expire and elections to end. The rest stay serial, because
// they change or measure the test process itself (a lowered RLIMIT_NOFILE,
// heap bounds, in-process servers timed to the millisecond) or time a
// fault to the session timeout (the blackhole test): go test runs them
// all before it lets the parallel ones go on.
func TestMain(m *testing.M) {
	code := m.Run()
	if tideBinary.dir != "" {
		os.RemoveAll(tideBinary.dir)
	}
	os.Exit(code)
}

// freePort is an address for a server started in another process
// (internal/testport says why not port 0).
func freePort(t testing.TB) string { return testport.Free(t) }

func newProcessCluster(t *testing.T, size int) *processCluster {
	return newPreparedProcessCluster(t, size, nil)
}

// newPreparedProcessCluster is newProcessCluster with prepare called on
// each node's command before it starts.
func newPreparedProcessCluster(t *testing.T, size int, prepare func(*processCluster, metadata.BrokerID, *exec.Cmd)) *processCluster {
	c := &processCluster{t: t, binary: buildTide(t), controllers: map[metadata.BrokerID]string{}, kafka: map[metadata.BrokerID]string{},
		dirs: map[metadata.BrokerID]string{}, processes: map[metadata.BrokerID]*exec.Cmd{}, logs: map[metadata.BrokerID]*os.File{}, prepare: prepare}
	var voters []string
	for id := metadata.BrokerID(1); int(id) <= size; id++ {
		c.controllers[id], c.kafka[id] = freePort(t), freePort(t)
		c.dirs[id] = filepath.Join(t.TempDir(), fmt.Sprintf("node-%d", id))
		voters = append(voters, fmt.Sprintf("%d@%s", id, c.controllers[id]))
	}
	c.voters = strings.Join(voters, ",")
	t.Cleanup(c.stopAll)
	for id := range c.controllers {
		c.start(id)
	}
	return c
}

func (c *processCluster) start(id metadata.BrokerID) {
	log, err := os.OpenFile(filepath.Join(c.dirs[id]+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.binary, "serve", "--id", fmt.Sprint(id), "--controllers", c.voters, "--data-dir", c.dirs[id],
		"--kafka-listen", c.kafka[id],
		"--session-timeout", "2s", "--heartbeat-interval", "200ms", "--election-timeout", "1s")
	cmd.Stdout, cmd.Stderr = log, log
	if c.prepare != nil {
		c.prepare(c, id, cmd)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.processes[id], c.logs[id] = cmd, log
}

func (c *processCluster) kill(id metadata.BrokerID) {
	c.processes[id].Process.Signal(syscall.SIGKILL)
	c.processes[id].Wait()
	delete(c.processes, id)
}

func (c *processCluster) stopAll() {
	for id, cmd := range c.processes {
		cmd.Process.Signal(syscall.SIGCONT)
		if err := terminate(cmd); err != nil {
			c.t.Errorf("node %d: %v", id, err)
		}
		c.logs[id].Close()
	}
	if c.t.Failed() {
		for id := range c.dirs {
			text, _ := os.ReadFile(c.dirs[id] + ".log")
			c.t.Logf("node %d log (tail):\n%s", id, tail(string(text), 30))
		}
	}
}

// terminate stops a process with SIGTERM (a controlled shutdown) and waits
// for it to exit cleanly, killing it after 15 s.
func terminate(cmd *exec.Cmd) error {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("did not stop cleanly: %w", err)
		}
		return nil
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		return fmt.Errorf("ignored SIGTERM")
	}
}

func tail(text string, lines int) string {
	all := strings.Split(strings.TrimSpace(text), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func (c *processCluster) status(id metadata.BrokerID) (Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	client, err := Dial(ctx, c.controllers[id])
	if err != nil {
		return Status{}, err
	}
	defer client.Close()
	return client.Status(ctx)
}

// waitFor polls every running node's status until check holds for all of
// them (or for the one named), or fails after timeout.
func (c *processCluster) waitFor(what string, timeout time.Duration, ids []metadata.BrokerID, check func(Status) bool) time.Duration {
	c.t.Helper()
	began := time.Now()
	for time.Since(began) < timeout {
		ok := true
		for _, id := range ids {
			status, err := c.status(id)
			if err != nil || !check(status) {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(began)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("after %s, still not: %s", timeout, what)
	return 0
}

func (c *processCluster) active() metadata.BrokerID {
	for id := range c.processes {
		if status, err := c.status(id); err == nil && status.Active {
			return id
		}
	}
	return metadata.NoBroker
}

func (c *processCluster) running() []metadata.BrokerID {
	var ids []metadata.BrokerID
	for id := range c.processes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (c *processCluster) createTopic(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answer, err := AdminRequest(ctx, c.controllers, quorum.Request{CreateTopic: &controller.CreateTopicRequest{Name: name, Partitions: 3, ReplicationFactor: 3}})
	if err != nil || answer.ErrorCode != 0 {
		c.t.Fatalf("creating %s: %v, code %s", name, err, controller.CodeName(answer.ErrorCode))
	}
}

func hasTopics(names ...string) func(Status) bool {
	return func(s Status) bool {
		for _, name := range names {
			if !slices.Contains(s.Topics, name) {
				return false
			}
		}
		return true
	}
}

func allUnfenced(count int) func(Status) bool {
	return func(s Status) bool {
		unfenced := 0
		for _, b := range s.Brokers {
			if !b.Fenced {
				unfenced++
			}
		}
		return unfenced == count
	}
}

func brokerFenced(id metadata.BrokerID, fenced bool) func(Status) bool {
	return func(s Status) bool {
		for _, b := range s.Brokers {
			if b.ID == int32(id) {
				return b.Fenced == fenced
			}
		}
		return false
	}
}

// Three tide serve processes form a quorum; the active controller is
// killed with kill -9 and another takes over within seconds; metadata
// written before and after is on every node; the killed node restarts from
// its data and catches up; Kafka clients reach a partition on each broker
// through any of them; a broker stopped with SIGSTOP for longer than
// its session is fenced, and unfenced when it resumes.
func TestThreeServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 3)
	all := []metadata.BrokerID{1, 2, 3}
	formed := c.waitFor("three brokers registered and unfenced everywhere", 30*time.Second, all, allUnfenced(3))
	t.Logf("quorum formed and brokers unfenced in %s", formed.Round(time.Millisecond))
	c.createTopic("before")
	c.waitFor("topic before on every node", 10*time.Second, all, hasTopics("before"))
	c.kafkaAcrossBrokers(t)

	old := c.active()
	if old == metadata.NoBroker {
		t.Fatal("no active controller")
	}
	c.kill(old)
	began := time.Now()
	for c.active() == metadata.NoBroker {
		if time.Since(began) > 15*time.Second {
			t.Fatal("no new active controller within 15 s of kill -9")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("node %d killed; node %d active %s later", old, c.active(), time.Since(began).Round(time.Millisecond))
	c.createTopic("after")
	c.waitFor("both topics on the survivors", 10*time.Second, c.running(), hasTopics("before", "after"))

	c.start(old)
	c.waitFor("the restarted node caught up", 30*time.Second, all, hasTopics("before", "after"))
	c.waitFor("every broker unfenced again", 30*time.Second, all, allUnfenced(3))

	var paused metadata.BrokerID
	for _, id := range all {
		if id != c.active() {
			paused = id
		}
	}
	c.processes[paused].Process.Signal(syscall.SIGSTOP)
	others := slices.DeleteFunc(slices.Clone(all), func(id metadata.BrokerID) bool { return id == paused })
	fencedAfter := c.waitFor(fmt.Sprintf("broker %d fenced while stopped", paused), 15*time.Second, others, brokerFenced(paused, true))
	t.Logf("broker %d stopped; fenced after %s", paused, fencedAfter.Round(time.Millisecond))
	c.processes[paused].Process.Signal(syscall.SIGCONT)
	unfencedAfter := c.waitFor(fmt.Sprintf("broker %d unfenced after resuming", paused), 15*time.Second, all, brokerFenced(paused, false))
	t.Logf("broker %d resumed; unfenced after %s", paused, unfencedAfter.Round(time.Millisecond))
}
