package controller

import (
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRegisterBroker(t *testing.T) {
	img := metadata.NewImage()
	records, epoch, code, err := RegisterBroker(img, 1, "a", "", metadata.NoBrokerEpoch, 0)
	if err != nil || code != 0 || epoch != 0 {
		t.Fatal(epoch, CodeName(code), err)
	}
	checkRecords(t, records, "register-broker id=1 epoch=0 incarnation=a\n")
	c := &cluster{t: t, image: img}
	c.apply(records)
	if broker, _ := img.Broker(1); !broker.Fenced {
		t.Errorf("a new registration must start fenced: %+v", broker)
	}

	// A retry of the same incarnation gets its epoch back, with no record.
	if records, epoch, code, _ := RegisterBroker(img, 1, "a", "", metadata.NoBrokerEpoch, 1); len(records) != 0 || epoch != 0 || code != 0 {
		t.Errorf("retry: %v %d %s", records, epoch, CodeName(code))
	}
	c.must(Heartbeat(img, 1, 0, false, true))
	// A new incarnation is refused while the old one is unfenced...
	if _, _, code, _ := RegisterBroker(img, 1, "b", "", metadata.NoBrokerEpoch, 2); code != kerr.DuplicateBrokerRegistration.Code {
		t.Errorf("got %s, want DUPLICATE_BROKER_REGISTRATION", CodeName(code))
	}
	// ...and accepted once it is fenced, with the offset as its new epoch.
	c.fence(1)
	records, epoch, code, err = RegisterBroker(img, 1, "b", "", 0, img.Offset()+1)
	if err != nil || code != 0 || epoch != metadata.BrokerEpoch(img.Offset()+1) {
		t.Fatal(epoch, CodeName(code), err)
	}
	c.apply(records)
	if current, _ := img.Incarnation(1); current != "b" {
		t.Errorf("incarnation %q", current)
	}

	for _, bad := range []struct {
		id          metadata.BrokerID
		incarnation string
	}{{-1, "x"}, {2, ""}} {
		if _, _, code, _ := RegisterBroker(img, bad.id, bad.incarnation, "", metadata.NoBrokerEpoch, img.Offset()+1); code != kerr.InvalidRequest.Code {
			t.Errorf("%v: got %s, want INVALID_REQUEST", bad, CodeName(code))
		}
	}
	if _, _, _, err := RegisterBroker(img, 2, "x", "", metadata.NoBrokerEpoch, img.Offset()); err == nil {
		t.Errorf("a registration at an applied offset must be an error")
	}
}

// lastReplicaStanding fences both followers of a min.insync.replicas=3
// topic, one after the other: both end up in the ELR, and the leader is
// the last replica standing.
func lastReplicaStanding(t *testing.T) (c *cluster, leader, first, second metadata.BrokerID) {
	c = newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 3, false)
	partition := c.partition("orders", 0)
	leader, first, second = partition.Replicas[0], partition.Replicas[1], partition.Replicas[2]
	c.fence(first)
	c.fence(second)
	if got := c.partition("orders", 0); got.Leader != leader || len(got.ELR) != 2 {
		t.Fatalf("setup: %v", got)
	}
	return c, leader, first, second
}

func TestRegisterBrokerUncleanRestartLeavesELR(t *testing.T) {
	for _, clean := range []bool{true, false} {
		c, _, restarted, _ := lastReplicaStanding(t)
		previous := metadata.NoBrokerEpoch
		if clean {
			previous = c.epoch(restarted)
		}
		records, _, code, err := RegisterBroker(c.image, restarted, "restarted", "", previous, c.image.Offset()+1)
		c.must(records, code, err)
		inELR := false
		for _, id := range c.partition("orders", 0).ELR {
			inELR = inELR || id == restarted
		}
		if inELR != clean {
			t.Errorf("clean=%t: restarted broker in ELR=%t: %v", clean, inELR, records)
		}
	}
}

// A broker that registered again but never got unfenced served nothing, so
// the next incarnation may vouch for the log of the last one that served: a
// broker that crashed before it heard its newest epoch can only name that
// one. An epoch from before the last one that served is not vouching.
func TestRegisterBrokerMayVouchForTheLastEpochThatServed(t *testing.T) {
	for _, c := range []struct {
		name  string
		vouch func(served, unserved metadata.BrokerEpoch) metadata.BrokerEpoch
		inELR bool
	}{
		{"the last epoch that served", func(served, _ metadata.BrokerEpoch) metadata.BrokerEpoch { return served }, true},
		{"the registration that never served", func(_, unserved metadata.BrokerEpoch) metadata.BrokerEpoch { return unserved }, true},
		{"an epoch before the one that served", func(served, _ metadata.BrokerEpoch) metadata.BrokerEpoch { return served - 1 }, false},
		{"an epoch from the future", func(_, unserved metadata.BrokerEpoch) metadata.BrokerEpoch { return unserved + 1 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cluster, _, restarted, _ := lastReplicaStanding(t)
			served := cluster.epoch(restarted)
			// A registration that never gets unfenced...
			records, unserved, code, err := RegisterBroker(cluster.image, restarted, "never-served", "", served, cluster.image.Offset()+1)
			cluster.must(records, code, err)
			// ...then another incarnation vouching.
			records, _, code, err = RegisterBroker(cluster.image, restarted, "restarted", "", c.vouch(served, unserved), cluster.image.Offset()+1)
			cluster.must(records, code, err)
			inELR := false
			for _, id := range cluster.partition("orders", 0).ELR {
				inELR = inELR || id == restarted
			}
			if inELR != c.inELR {
				t.Errorf("in ELR=%t, want %t", inELR, c.inELR)
			}
		})
	}
}

func TestHeartbeat(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2)
	c.createTopic("orders", 1, 2, 1, false)
	records, _, code, err := RegisterBroker(c.image, 3, "c", "", metadata.NoBrokerEpoch, c.image.Offset()+1)
	c.must(records, code, err)
	tests := []struct {
		name         string
		id           metadata.BrokerID
		epoch        metadata.BrokerEpoch
		wantShutdown bool
		caughtUp     bool
		want         int16
		records      int
	}{
		{"unknown broker", 9, 0, false, true, kerr.StaleBrokerEpoch.Code, 0},
		{"wrong epoch", 1, c.epoch(1) + 1, false, true, kerr.StaleBrokerEpoch.Code, 0},
		{"alive", 1, c.epoch(1), false, true, 0, 0},
		{"fenced, behind", 3, c.epoch(3), false, false, 0, 0},
		{"fenced, caught up", 3, c.epoch(3), false, true, 0, 1},
		{"fenced, wants shutdown", 3, c.epoch(3), true, true, 0, 0},
		{"leader wants shutdown", c.partition("orders", 0).Leader, c.epoch(c.partition("orders", 0).Leader),
			true, false, 0, 2},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			records, code, err := Heartbeat(c.image, test.id, test.epoch, test.wantShutdown, test.caughtUp)
			if err != nil || code != test.want || len(records) != test.records {
				t.Fatalf("got %s %v %v", CodeName(code), err, records)
			}
		})
	}
}

func TestHeartbeatCompletesControlledShutdown(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2)
	c.must(ControlledShutdown(c.image, 1, c.epoch(1)))
	if records, code, _ := Heartbeat(c.image, 1, c.epoch(1), false, true); len(records) != 0 || code != 0 {
		t.Errorf("a shutting-down broker that does not ask again changes nothing: %v", records)
	}
	records, code, err := Heartbeat(c.image, 1, c.epoch(1), true, true)
	checkRecords(t, records, "fence-broker id=1 epoch=0\n")
	c.must(records, code, err)
	// Fenced now, it is not unfenced again, and a restart may register.
	if records, _, _ := Heartbeat(c.image, 1, c.epoch(1), false, true); len(records) != 0 {
		t.Errorf("a shut-down broker was unfenced: %v", records)
	}
	if _, _, code, _ := RegisterBroker(c.image, 1, "restarted", "", 0, c.image.Offset()+1); code != 0 {
		t.Errorf("restart refused: %s", CodeName(code))
	}
}

func TestFenceExpired(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3, 4)
	c.createTopic("orders", 4, 3, 2, false)
	if _, err := FenceExpired(c.image, nil, 0, 0); err == nil {
		t.Errorf("a zero session timeout must be an error")
	}
	last := map[metadata.BrokerID]int64{1: 90, 2: 89, 3: 100}
	// At tick 100 with a timeout of 10, broker 2 (last seen at 89) and
	// broker 4 (never seen) have expired; broker 1 (at 90) has not.
	records, err := FenceExpired(c.image, last, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	c.apply(records)
	fenced := records[len(records)-2:]
	checkRecords(t, fenced, "fence-broker id=2 epoch=2\nfence-broker id=4 epoch=6\n")
	for _, partition := range c.image.Partitions() {
		for _, id := range append([]metadata.BrokerID{partition.Leader}, partition.ISR...) {
			if id == 2 || id == 4 {
				t.Errorf("fenced broker still leads or in ISR: %v", partition)
			}
		}
		if partition.Leader == metadata.NoBroker {
			t.Errorf("partition left leaderless with brokers 1 and 3 alive: %v", partition)
		}
	}
	if again, _ := FenceExpired(c.image, last, 100, 10); len(again) != 0 {
		t.Errorf("fenced twice: %v", again)
	}
}

func TestControlledShutdown(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 3, 3, 2, false)
	// A failover hands leadership away from a preferred leader...
	preferred := c.partition("orders", 0).Replicas[0]
	c.fence(preferred)
	c.register(preferred)
	c.apply(mustAlter(c, "orders", 0, c.partition("orders", 0).Replicas...))
	leader := c.partition("orders", 0).Leader
	if leader == preferred {
		t.Fatalf("setup: %v", c.partition("orders", 0))
	}
	// ...and a controlled shutdown of the current leader hands it back to
	// the preferred replica, the first eligible ISR member in assignment
	// order (KAFKA-3670).
	records, code, err := ControlledShutdown(c.image, leader, c.epoch(leader))
	c.must(records, code, err)
	if last := records[len(records)-1]; last != (metadata.BeginControlledShutdown{ID: leader, Epoch: c.epoch(leader)}) {
		t.Errorf("BeginControlledShutdown must come last, after the leaderships moved: %v", records)
	}
	for _, partition := range c.image.Partitions() {
		if partition.Leader == leader || partition.InISR(leader) {
			t.Errorf("shutting-down broker still leads or in ISR: %v", partition)
		}
	}
	if got := c.partition("orders", 0); got.Leader != preferred {
		t.Errorf("got leader %d, want the preferred %d", got.Leader, preferred)
	}
	if records, code, _ := ControlledShutdown(c.image, leader, c.epoch(leader)); len(records) != 0 || code != 0 {
		t.Errorf("repeated shutdown: %v %s", records, CodeName(code))
	}
	if _, code, _ := ControlledShutdown(c.image, 1, c.epoch(1)+1); code != kerr.StaleBrokerEpoch.Code {
		t.Errorf("got %s, want STALE_BROKER_EPOCH", CodeName(code))
	}
}

func mustAlter(c *cluster, topic string, index int32, isr ...metadata.BrokerID) []metadata.Record {
	records, _ := c.alter(topic, index, isr...)
	return records
}

func TestShutdownOfLastReplica(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		c := newCluster(t)
		c.register(1, 2)
		c.createTopic("orders", 1, 2, 1, unclean)
		leader := c.partition("orders", 0).Leader
		other := c.partition("orders", 0).Replicas[1]
		c.apply(mustAlter(c, "orders", 0, leader))
		c.must(ControlledShutdown(c.image, leader, c.epoch(leader)))
		got := c.partition("orders", 0)
		if !unclean {
			// No clean candidate: offline, with the old leader remembered
			// in the ELR so it can lead again when it returns.
			if got.Leader != metadata.NoBroker || len(got.ISR) != 0 || len(got.ELR) != 1 || got.ELR[0] != leader ||
				got.LeaderEpoch != 1 {
				t.Errorf("clean: %v", got)
			}
			continue
		}
		if got.Leader != other || len(got.ISR) != 1 || len(got.ELR) != 0 || got.LeaderRecoveryState != metadata.Recovering {
			t.Errorf("unclean: %v %v", got, got.LeaderRecoveryState)
		}
	}
}

func TestUnregisterBroker(t *testing.T) {
	c, leader, first, second := lastReplicaStanding(t)
	if _, code, _ := UnregisterBroker(c.image, 9); code != kerr.BrokerIDNotRegistered.Code {
		t.Errorf("got %s, want BROKER_ID_NOT_REGISTERED", CodeName(code))
	}
	for _, id := range []metadata.BrokerID{leader, second} {
		c.must(UnregisterBroker(c.image, id))
	}
	got := c.partition("orders", 0)
	if got.Leader != metadata.NoBroker || len(got.ISR) != 0 || len(got.ELR) != 1 || got.ELR[0] != first {
		t.Errorf("got %v", got)
	}
	if _, ok := c.image.Broker(leader); ok {
		t.Errorf("broker %d still registered", leader)
	}
}
