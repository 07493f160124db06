package server

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// kcatMember is one long-running `kcat -G` member: the partitions of the
// records it printed.
type kcatMember struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output strings.Builder
}

func (m *kcatMember) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.output.Write(p)
}

// partitions are the partitions of the records printed so far, each once.
func (m *kcatMember) partitions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var seen []string
	for _, line := range strings.Fields(m.output.String()) {
		if partition, _, ok := strings.Cut(line, ":"); ok && !slices.Contains(seen, partition) {
			seen = append(seen, partition)
		}
	}
	slices.Sort(seen)
	return seen
}

func (m *kcatMember) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.output.Reset()
}

// TestTwoKcatMembersSplitTheTopic: a second `kcat -G` joining the group of a
// first takes half of a 4-partition topic's partitions, and the two
// together read every partition (issue 14's must-hold), over the classic
// protocol with each of librdkafka's assignors: range (an eager rebalance:
// the first member gives up everything, then both are assigned) and
// cooperative-sticky (KIP-429's incremental rebalance: the first member
// keeps two partitions and revokes only the two the second then gets, in a
// second rebalance; kcat assigns incrementally when librdkafka says the
// protocol is COOPERATIVE).
func TestTwoKcatMembersSplitTheTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			splitWithKcat(t, kcat, strategy)
		})
	}
}

func splitWithKcat(t *testing.T, kcat, strategy string) {
	c := newGroupCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createPartitionedTopic(ctx, t, c.seeds(), "split", 4)
	start := func() *kcatMember {
		member := &kcatMember{}
		member.cmd = exec.CommandContext(ctx, kcat, "-b", c.seeds()[0], "-G", "splitters", "-q", "-u", "-f", `%p:%o\n`,
			"-X", "auto.offset.reset=earliest", "-X", "partition.assignment.strategy="+strategy, "split")
		member.cmd.Stdout = member
		if err := member.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { member.cmd.Process.Kill(); member.cmd.Wait() })
		return member
	}
	first := start()
	// Records keep coming until the first member has read from every
	// partition: it holds the whole topic.
	waitForPartitions(ctx, t, c, []*kcatMember{first}, func(p [][]string) bool { return len(p[0]) == 4 })
	second := start()
	// Once the group has rebalanced, new records reach each member from two
	// partitions only, and the two hold all four between them.
	deadline := time.Now().Add(45 * time.Second)
	for {
		first.reset()
		second.reset()
		producePartitioned(ctx, t, c.seeds(), "split", 4, 1)
		time.Sleep(time.Second)
		a, b := first.partitions(), second.partitions()
		if len(a) == 2 && len(b) == 2 && !slices.ContainsFunc(a, func(p string) bool { return slices.Contains(b, p) }) {
			// The group runs the assignor asked for: librdkafka did not
			// fall back to another.
			classicGroupDescribed(strategy)(ctx, t, c.seeds(), "splitters", 2)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 45 s the members read partitions %v and %v, want two each, all four between them", a, b)
		}
	}
}

// waitForPartitions produces one record to each partition a second until
// done holds for the members' partitions.
func waitForPartitions(ctx context.Context, t *testing.T, c *processCluster, members []*kcatMember, done func([][]string) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		producePartitioned(ctx, t, c.seeds(), "split", 4, 1)
		time.Sleep(time.Second)
		var seen [][]string
		for _, member := range members {
			seen = append(seen, member.partitions())
		}
		if done(seen) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the members read partitions %v", seen)
		}
	}
}
