package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidelog/tide/internal/metadata"
)

// min.insync.replicas changed on a live topic holds at once on three tide
// serve processes: raised to 3 while a follower is down, acks=all is
// NOT_ENOUGH_REPLICAS; lowered to 2, the same producer gets its acks.
func TestKgoLiveMinInsyncReplicasOnThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tide processes; skipped with -short")
	}
	t.Parallel() // its own processes; see TestMain
	c := newProcessCluster(t, 3)
	all := []metadata.BrokerID{1, 2, 3}
	c.waitFor("three brokers unfenced", 30*time.Second, all, allUnfenced(3))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seeds := []string{c.kafka[1], c.kafka[2], c.kafka[3]}
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if created, err := admin.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "guarded"); err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	produce := func() error {
		return client.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("v")}).FirstErr()
	}
	for began := time.Now(); produce() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Since(began) > 10*time.Second {
			t.Fatal("no acks=all produce to the new topic within 10 s")
		}
	}
	details, err := admin.ListTopics(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	leader := metadata.BrokerID(details["guarded"].Partitions[0].Leader)
	follower := metadata.BrokerID(1)
	for follower == leader || follower == c.active() {
		follower++
	}
	c.kill(follower)
	c.waitFor("the follower fenced", 15*time.Second, []metadata.BrokerID{leader}, brokerFenced(follower, true))
	raise := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("3")}}
	if responses, err := admin.AlterTopicConfigs(ctx, raise, "guarded"); err != nil || responses[0].Err != nil {
		t.Fatalf("raising min.insync.replicas: %v %+v", err, responses)
	}
	if err := produce(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with two in-sync replicas of min.insync.replicas 3: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	lower := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}
	if responses, err := admin.AlterTopicConfigs(ctx, lower, "guarded"); err != nil || responses[0].Err != nil {
		t.Fatalf("lowering min.insync.replicas: %v %+v", err, responses)
	}
	if err := produce(); err != nil {
		t.Fatalf("acks=all after lowering min.insync.replicas to 2: %v", err)
	}
}
