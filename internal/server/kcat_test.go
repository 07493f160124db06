package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// kcat runs kcat (librdkafka) against a real tide serve process: -L lists
// the broker and the topic, -P writes 10,000 keyed messages with acks=all,
// and -C -e reads every one of them back, in order, byte for byte. kcat is
// an outside program: without it the test skips (CI installs it).
func TestKcatAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tide process; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	c := newProcessCluster(t, 1)
	c.waitFor("the broker registered and unfenced", 15*time.Second, []metadata.BrokerID{1}, allUnfenced(1))
	seed := c.kafka[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, "keyed", 1) // kcat cannot create topics

	listing := runKcat(ctx, t, kcat, nil, "-b", seed, "-L", "-t", "keyed")
	if !strings.Contains(listing, "broker 1 at "+seed) || !strings.Contains(listing, `topic "keyed" with 1 partitions`) {
		t.Fatalf("kcat -L:\n%s", listing)
	}
	var messages strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&messages, "key-%d:value %d %s\n", i, i, strings.Repeat("x", i%97))
	}
	runKcat(ctx, t, kcat, strings.NewReader(messages.String()), "-b", seed, "-P", "-t", "keyed", "-K:", "-X", "acks=all")
	read := runKcat(ctx, t, kcat, nil, "-b", seed, "-C", "-t", "keyed", "-e", "-q", "-f", `%k:%s\n`)
	if read != messages.String() {
		got, want := strings.Split(read, "\n"), strings.Split(messages.String(), "\n")
		t.Fatalf("kcat read %d lines back, wrote %d; first difference near line %d", len(got), len(want), firstDifference(got, want))
	}
}

func runKcat(ctx context.Context, t *testing.T, kcat string, stdin *strings.Reader, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
