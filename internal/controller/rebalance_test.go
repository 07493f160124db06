package controller

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
)

// failBack fences a broker, registers it again (a fresh incarnation, out
// of every ISR) and has the leaders of the partitions it replicates add it
// back to their ISR: what a restart leaves behind, every partition it
// preferred led by another broker.
func (c *cluster) failBack(id metadata.BrokerID) {
	c.t.Helper()
	c.fence(id)
	c.register(id)
	byLeader := map[metadata.BrokerID][]AlterPartitionItem{}
	for _, partition := range c.image.Partitions() {
		if !partition.IsReplica(id) || partition.InISR(id) || partition.Leader == metadata.NoBroker {
			continue
		}
		item := AlterPartitionItem{TopicPartition: partition.TopicPartition, LeaderEpoch: partition.LeaderEpoch,
			PartitionEpoch: partition.PartitionEpoch, LeaderRecoveryState: partition.LeaderRecoveryState}
		for _, member := range append(append([]metadata.BrokerID(nil), partition.ISR...), id) {
			item.NewISR = append(item.NewISR, BrokerIDAndEpoch{ID: member, Epoch: c.epoch(member)})
		}
		byLeader[partition.Leader] = append(byLeader[partition.Leader], item)
	}
	for leader, items := range byLeader {
		records, response, err := AlterPartition(c.image, AlterPartitionRequest{
			BrokerID: leader, BrokerEpoch: c.epoch(leader), Partitions: items})
		if err != nil || response.ErrorCode != 0 {
			c.t.Fatalf("alter-partition: %s %v", CodeName(response.ErrorCode), err)
		}
		c.apply(records)
	}
}

// preferredLeaders counts the partitions led by their preferred replica.
func (c *cluster) preferredLeaders() int {
	n := 0
	for _, partition := range c.image.Partitions() {
		if partition.Leader == partition.Replicas[0] {
			n++
		}
	}
	return n
}

func TestRebalanceElectsPreferredLeadersBack(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 6, 3, 1, false)
	c.failBack(1)
	if got := c.preferredLeaders(); got != 4 {
		t.Fatalf("after broker 1 failed back, %d partitions led by their preferred replica, want 4", got)
	}
	records, more, err := Rebalance(c.image, DefaultLeaderImbalancePercentage)
	if err != nil || more {
		t.Fatal(more, err)
	}
	c.apply(records)
	if got := c.preferredLeaders(); got != 6 || len(records) != 2 {
		t.Errorf("after the rebalance %d preferred leaders (want 6), %d records (want 2)", got, len(records))
	}
	// Balanced: nothing to do, nothing written.
	if records, _, err := Rebalance(c.image, 0); err != nil || len(records) != 0 {
		t.Errorf("balanced cluster: %d records, %v", len(records), err)
	}
}

func TestRebalanceKeepsToTheImbalancePercentage(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 6, 3, 1, false)
	c.failBack(1)
	// Broker 1 prefers 2 partitions and leads neither: ratio 100%.
	if records, _, _ := Rebalance(c.image, 100); len(records) != 0 {
		t.Errorf("at 100%%, a ratio of 100%% is not above it: got %d records", len(records))
	}
	// Give one back by hand: ratio 50%, which 50 tolerates and 49 does not.
	first := metadata.TopicPartition{Topic: "orders"}
	for _, partition := range c.image.Partitions() {
		if partition.Replicas[0] == 1 {
			first = partition.TopicPartition
			break
		}
	}
	records, _, err := ElectPreferred(c.image, []metadata.TopicPartition{first})
	if err != nil {
		t.Fatal(err)
	}
	c.apply(records)
	if records, _, _ := Rebalance(c.image, 50); len(records) != 0 {
		t.Errorf("ratio 50%% at 50: got %d records", len(records))
	}
	if records, _, _ := Rebalance(c.image, 49); len(records) != 1 {
		t.Errorf("ratio 50%% at 49: got %d records, want 1", len(records))
	}
	if _, _, err := Rebalance(c.image, 101); err == nil {
		t.Error("a percentage of 101 was taken")
	}
}

func TestRebalanceElectsOnlyEligibleISRMembers(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 6, 3, 1, false)
	// Broker 1 is back but not yet in any ISR: electing it would truncate
	// committed records on the others.
	c.fence(1)
	c.register(1)
	if records, _, _ := Rebalance(c.image, 0); len(records) != 0 {
		t.Errorf("out of the ISR: got %d records", len(records))
	}
	// In the ISR again, then fenced: not eligible either (and fencing
	// takes it out of the ISR, which the rule must not undo).
	c.failBack(1)
	c.fence(1)
	if records, _, _ := Rebalance(c.image, 0); len(records) != 0 {
		t.Errorf("fenced: got %d records", len(records))
	}
}

func TestRebalanceBoundsOneDecision(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2)
	c.createTopic("orders", 2*MaxRebalanceElections+100, 2, 1, false)
	c.failBack(1)
	records, more, err := Rebalance(c.image, 0)
	if err != nil || !more || len(records) != MaxRebalanceElections {
		t.Fatalf("first decision: %d records, more %v, %v", len(records), more, err)
	}
	c.apply(records)
	records, more, err = Rebalance(c.image, 0)
	if err != nil || more || len(records) == 0 || len(records) > MaxRebalanceElections {
		t.Fatalf("second decision: %d records, more %v, %v", len(records), more, err)
	}
	c.apply(records)
	if got, want := c.preferredLeaders(), len(c.image.Partitions()); got != want {
		t.Errorf("%d of %d partitions led by their preferred replica", got, want)
	}
}
