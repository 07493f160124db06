package server

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaGroupHandler collects what a sarama consumer group session
// consumes, marking each message, until it has want messages.
type saramaGroupHandler struct {
	mu    sync.Mutex
	first map[int32]int64
	count int
	want  int
	done  chan struct{}
	once  sync.Once
}

func newSaramaGroupHandler(want int) *saramaGroupHandler {
	return &saramaGroupHandler{first: map[int32]int64{}, want: want, done: make(chan struct{})}
}

func (*saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		h.mu.Lock()
		if _, seen := h.first[message.Partition]; !seen {
			h.first[message.Partition] = message.Offset
		}
		h.count++
		count := h.count
		h.mu.Unlock()
		session.MarkMessage(message, "")
		if count >= h.want {
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

// consumeSaramaGroup runs a sarama ConsumerGroup until it has consumed want
// messages, then closes it, which commits the marked offsets; it returns
// the first offset consumed per partition.
func consumeSaramaGroup(t *testing.T, seeds []string, group, topic string, want int) map[int32]int64 {
	t.Helper()
	config := saramaConfig(sarama.V2_8_0_0)
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	consumers, err := sarama.NewConsumerGroup(seeds, group, config)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	handler := newSaramaGroupHandler(want)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			if err := consumers.Consume(ctx, []string{topic}, handler); err != nil && ctx.Err() == nil {
				t.Logf("Consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	select {
	case <-handler.done:
	case <-time.After(20 * time.Second):
		t.Errorf("sarama consumed %d of %d messages in 20 s", handler.count, want)
	}
	cancel()
	<-stopped
	if err := consumers.Close(); err != nil {
		t.Fatalf("ConsumerGroup.Close: %v", err)
	}
	handler.mu.Lock()
	defer handler.mu.Unlock()
	if handler.count != want {
		t.Fatalf("consumed %d messages, want %d", handler.count, want)
	}
	return handler.first
}

// sarama's ConsumerGroup and its offset manager on a tide serve process:
// a group reads every message of a 3-partition topic and commits as it
// goes; ClusterAdmin lists the group and its committed offsets; after more
// messages, a new session of the same group starts exactly at the
// committed offsets.
func TestSaramaConsumerGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newGroupCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createPartitionedTopic(ctx, t, c.seeds(), "sarama-groups", 3)
	producePartitioned(ctx, t, c.seeds(), "sarama-groups", 3, 10)
	first := consumeSaramaGroup(t, c.seeds(), "sarama-app", "sarama-groups", 30)
	for partition := range int32(3) {
		if first[partition] != 0 {
			t.Fatalf("partition %d started at %d, want 0", partition, first[partition])
		}
	}
	admin, err := sarama.NewClusterAdmin(c.seeds(), saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groups, err := admin.ListConsumerGroups()
	if err != nil || groups["sarama-app"] != "consumer" {
		t.Fatalf("ListConsumerGroups: %v, %v", groups, err)
	}
	offsets, err := admin.ListConsumerGroupOffsets("sarama-app", map[string][]int32{"sarama-groups": {0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	for partition := range int32(3) {
		if block := offsets.GetBlock("sarama-groups", partition); block == nil || block.Err != sarama.ErrNoError || block.Offset != 10 {
			t.Fatalf("committed offset of partition %d: %+v", partition, block)
		}
	}
	producePartitioned(ctx, t, c.seeds(), "sarama-groups", 3, 5)
	resumed := consumeSaramaGroup(t, c.seeds(), "sarama-app", "sarama-groups", 15)
	for partition := range int32(3) {
		if resumed[partition] != 10 {
			t.Fatalf("partition %d resumed at %d, committed 10", partition, resumed[partition])
		}
	}
}

// kcat (librdkafka's balanced consumer, -G) on a tide serve process reads
// every record of a 3-partition topic through its group, and a second run
// of the same group, after more records, reads only the new ones: the
// first committed its offsets. kcat is an outside program: without it the
// test skips (CI installs it).
func TestKcatGroupConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	c := newGroupCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createPartitionedTopic(ctx, t, c.seeds(), "kcat-groups", 3)
	producePartitioned(ctx, t, c.seeds(), "kcat-groups", 3, 20)
	read := func() []string {
		out := runKcat(ctx, t, kcat, nil, "-b", c.seeds()[0], "-G", "kcat-app", "-e", "-q", "-f", `%p:%o:%s\n`,
			"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", "-X", "auto.offset.reset=earliest", "kcat-groups")
		return strings.Fields(out)
	}
	if lines := read(); len(lines) != 60 {
		t.Fatalf("kcat -G read %d records, want 60:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	producePartitioned(ctx, t, c.seeds(), "kcat-groups", 3, 2)
	lines := read()
	if len(lines) != 6 {
		t.Fatalf("the second kcat -G read %d records, want the 6 new ones:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, line := range lines {
		if fields := strings.SplitN(line, ":", 3); len(fields) != 3 || (fields[1] != "20" && fields[1] != "21") {
			t.Fatalf("the second kcat -G read %q, an old record", line)
		}
	}
}
