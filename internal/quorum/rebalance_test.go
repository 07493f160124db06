package quorum

import (
	"testing"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// The active controller elects preferred leaders back on its own, every
// LeaderRebalanceTicks, once the broker that lost them is an eligible ISR
// member again; with the rebalance off, leadership stays where it moved.
func TestActiveControllerRebalancesLeaders(t *testing.T) {
	for _, interval := range []int64{0, 20} {
		c := newTestCluster(t, 3, func(config *Config) {
			config.LeaderRebalanceTicks, config.LeaderImbalancePercentage = interval, controller.DefaultLeaderImbalancePercentage
		})
		epochs := map[metadata.BrokerID]metadata.BrokerEpoch{}
		for _, id := range []metadata.BrokerID{1, 2, 3} {
			epochs[id] = c.register(id, "first")
		}
		createTopic(c, "events", 6, 3)
		active := c.active()
		heartbeat := func(ids ...metadata.BrokerID) {
			for _, id := range ids {
				c.request(active.id, Request{From: id, Heartbeat: &HeartbeatRequest{Epoch: epochs[id], AppliedOffset: active.q.Image().Offset()}})
			}
		}
		// Broker 3 misses its session and is fenced, then restarts.
		for range 60 {
			heartbeat(1, 2)
			c.tick(1)
		}
		epochs[3] = c.register(3, "second")
		// Its leaders add it back to their ISRs.
		for _, p := range active.q.Image().Partitions() {
			item := controller.AlterPartitionItem{TopicPartition: p.TopicPartition, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, LeaderRecoveryState: p.LeaderRecoveryState}
			for _, id := range []metadata.BrokerID{1, 2, 3} {
				item.NewISR = append(item.NewISR, controller.BrokerIDAndEpoch{ID: id, Epoch: epochs[id]})
			}
			answer := c.request(active.id, Request{From: p.Leader, AlterPartition: &controller.AlterPartitionRequest{
				BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], Partitions: []controller.AlterPartitionItem{item}}})
			if answer.AlterPartition == nil || answer.AlterPartition.ErrorCode != 0 {
				t.Fatalf("alter-partition %v: %+v", p.TopicPartition, answer)
			}
		}
		for range 25 {
			heartbeat(1, 2, 3)
			c.tick(1)
		}
		preferred := 0
		for _, p := range active.q.Image().Partitions() {
			if p.Leader == p.Replicas[0] {
				preferred++
			}
		}
		if want := map[int64]int{0: 4, 20: 6}[interval]; preferred != want {
			t.Errorf("rebalance every %d ticks: %d of 6 partitions led by their preferred replica, want %d", interval, preferred, want)
		}
		c.requireSameImages()
	}
}
