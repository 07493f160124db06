package server

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// auto.create.topics.enable (on by default, as in Kafka): franz-go with
// AllowAutoTopicCreation produces to a topic that does not exist; its
// Metadata creates it with num.partitions (1) and the default replication
// factor, and the records are there to read.
func TestFranzGoAutoCreatesTopic(t *testing.T) {
	seed := startInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fresh-franz"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 5 {
		if err := client.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("v", i+1))).FirstErr(); err != nil {
			t.Fatalf("produce %d to a topic that did not exist: %v", i, err)
		}
	}
	details, err := kadm.NewClient(client).ListTopics(ctx, "fresh-franz")
	if err != nil || details["fresh-franz"].Err != nil || len(details["fresh-franz"].Partitions) != 1 {
		t.Fatalf("the auto-created topic: %+v, %v", details, err)
	}
	if got := consumeRecords(ctx, t, seed, "fresh-franz", 5); len(got) != 5 {
		t.Fatalf("read %d records back, want 5", len(got))
	}
}

// kcat -P to a topic that does not exist creates it (librdkafka asks for
// the topic's Metadata with allow_auto_topic_creation), and -C reads the
// messages back: the "kcat hangs until its message timeout" no
// longer happens. Skipped without kcat, as TestKcatAgainstServe.
func TestKcatAutoCreatesTopic(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	messages := "one\ntwo\nthree\n"
	began := time.Now()
	runKcat(ctx, t, kcat, strings.NewReader(messages), "-b", seed, "-P", "-t", "fresh-kcat", "-X", "acks=all",
		"-X", "message.timeout.ms=10000")
	t.Logf("kcat -P to a new topic took %s", time.Since(began))
	read := runKcat(ctx, t, kcat, nil, "-b", seed, "-C", "-t", "fresh-kcat", "-e", "-q")
	if read != messages {
		t.Fatalf("kcat read back %q, wrote %q", read, messages)
	}
}
