package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A live min.insync.replicas change holds at once: raised above the ISR,
// acks=all is NOT_ENOUGH_REPLICAS and the high watermark stops; lowered
// again, the high watermark moves on and the waiting produce is answered.
func TestSetTopicConfigAppliesMinInsyncReplicasAtOnce(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 1
	r := leaderReplica(t, config, 0, 1)
	r.SetTopicConfig(2, false)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all under a raised min.insync.replicas: %+v", answers)
	}
	r.SetTopicConfig(1, false)
	r.HandleProduce(ProduceRequest{ID: 2, Batches: producerBatch(1), Acks: AcksLeader, TimeoutTicks: 100})
	r.HandleProduce(ProduceRequest{ID: 3, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	answers := produceAnswers(r.Ready())
	if len(answers) != 2 || answers[1].ErrorCode != 0 || r.HighWatermark() != 2 {
		t.Fatalf("after lowering it again: %+v, high watermark %d", answers, r.HighWatermark())
	}
	r.SetTopicConfig(2, false)
	r.HandleProduce(ProduceRequest{ID: 4, Batches: producerBatch(1), Acks: AcksLeader, TimeoutTicks: 100})
	r.Ready()
	if r.HighWatermark() != 2 {
		t.Fatalf("the high watermark moved to %d with an ISR below min.insync.replicas", r.HighWatermark())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("min.insync.replicas 0 did not panic")
		}
	}()
	r.SetTopicConfig(0, false)
}
