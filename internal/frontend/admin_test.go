package frontend

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/fetcher"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/wire"
)

func newTestFrontEnd(t *testing.T) *FrontEnd {
	t.Helper()
	lifecycle, err := broker.NewLifecycle(broker.LifecycleConfig{ID: 1, Incarnation: "b1-1", SessionLeaseMs: 1000, PreviousEpoch: metadata.NoBrokerEpoch,
		Voters: []metadata.BrokerID{1}, HeartbeatTicks: 10, RequestTimeoutTicks: 20,
		NewNode: func(metadata.BrokerEpoch) *broker.Node { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	wireConfig := wire.DefaultConfig()
	wireConfig.Random = rand.NewChaCha8([32]byte{'f'})
	fe, err := New(Config{ID: 1, ClusterID: "c", Advertised: "127.0.0.1:9092", DefaultPartitions: 1, DefaultReplicationFactor: 1,
		AutoCreateTopics: true, MaxWaitingFetches: 10, Wire: wireConfig,
		Fetcher: fetcher.Config{Broker: 1, MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 1 << 20, FetchTimeoutTicks: 100,
			RequestTimeoutTicks: 50, MaxResponseBytes: 2 << 20}}, lifecycle)
	if err != nil {
		t.Fatal(err)
	}
	return fe
}

func createRequests(out Outbox) []quorum.Request {
	var creates []quorum.Request
	for _, outgoing := range out.Controller {
		if outgoing.Request.CreateTopic != nil {
			creates = append(creates, outgoing.Request)
		}
	}
	return creates
}

// Rule one-auto-create-per-name: the many Metadata refreshes of a producer
// waiting for a new topic forward one CreateTopic, until it is answered;
// MaxAutoCreatesInFlight bounds the names under way at once.
func TestAutoCreateOncePerNameAndBounded(t *testing.T) {
	fe := newTestFrontEnd(t)
	b := (*backend)(fe)
	topic := controller.CreateTopicRequest{Name: "fresh", Partitions: 1, ReplicationFactor: 1}
	for range 5 {
		b.AutoCreateTopic(topic)
	}
	creates := createRequests(fe.Flush())
	if len(creates) != 1 || creates[0].CreateTopic.Name != "fresh" {
		t.Fatalf("five refreshes forwarded %v, want one CreateTopic", creates)
	}
	fe.HandleControllerAnswer(quorum.Answer{ID: creates[0].ID, ErrorCode: kerr.TopicAlreadyExists.Code})
	b.AutoCreateTopic(topic)
	if again := createRequests(fe.Flush()); len(again) != 1 {
		t.Fatalf("after the answer: %d CreateTopics, want the name asked again", len(again))
	}
	for i := range 2 * MaxAutoCreatesInFlight {
		b.AutoCreateTopic(controller.CreateTopicRequest{Name: fmt.Sprintf("t%d", i), Partitions: 1, ReplicationFactor: 1})
	}
	if many := createRequests(fe.Flush()); len(many) != MaxAutoCreatesInFlight-1 {
		t.Fatalf("%d names under way, want the limit %d", len(many)+1, MaxAutoCreatesInFlight)
	}
}
