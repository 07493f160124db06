package controller

import (
	"slices"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// alterFixture is a five-replica partition (min.insync.replicas 3) after a
// failover: replicas r[0..4]; r[1] leads in leader epoch 1; r[0] restarted
// (new incarnation, old epoch kept in oldEpoch) and is out of the ISR; r[2]
// is fenced; r[3] is shutting down and in the ELR; ISR [r1 r4].
type alterFixture struct {
	c        *cluster
	r        []metadata.BrokerID
	oldEpoch metadata.BrokerEpoch
}

func newAlterFixture(t *testing.T) alterFixture {
	c := newCluster(t)
	c.register(1, 2, 3, 4, 5)
	c.createTopic("orders", 1, 5, 3, false)
	r := c.partition("orders", 0).Replicas
	oldEpoch := c.epoch(r[0])
	c.fence(r[0])
	c.register(r[0])
	c.fence(r[2])
	c.must(ControlledShutdown(c.image, r[3], c.epoch(r[3])))
	got := c.partition("orders", 0)
	if got.Leader != r[1] || got.LeaderEpoch != 1 || got.PartitionEpoch != 3 ||
		!slices.Equal(got.ISR, []metadata.BrokerID{r[1], r[4]}) || !slices.Equal(got.ELR, []metadata.BrokerID{r[3]}) {
		t.Fatalf("setup: %v", got)
	}
	return alterFixture{c: c, r: r, oldEpoch: oldEpoch}
}

// request is the leader's well-formed proposal of the given ISR.
func (f alterFixture) request(isr ...metadata.BrokerID) AlterPartitionRequest {
	item := AlterPartitionItem{
		TopicPartition: metadata.TopicPartition{Topic: "orders"},
		LeaderEpoch:    1, PartitionEpoch: 3,
	}
	for _, id := range isr {
		item.NewISR = append(item.NewISR, BrokerIDAndEpoch{ID: id, Epoch: f.c.epoch(id)})
	}
	return AlterPartitionRequest{BrokerID: f.r[1], BrokerEpoch: f.c.epoch(f.r[1]), Partitions: []AlterPartitionItem{item}}
}

func TestAlterPartitionCodes(t *testing.T) {
	f := newAlterFixture(t)
	r := f.r
	tests := []struct {
		name    string
		request AlterPartitionRequest
		edit    func(*AlterPartitionRequest)
		want    int16
	}{
		{"stale requester epoch", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.BrokerEpoch-- }, kerr.StaleBrokerEpoch.Code},
		{"unknown requester", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.BrokerID = 9 }, kerr.StaleBrokerEpoch.Code},
		{"unknown partition", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.Partitions[0].Partition = 1 },
			kerr.UnknownTopicOrPartition.Code},
		{"leader epoch ahead", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.Partitions[0].LeaderEpoch = 2 },
			kerr.NotController.Code},
		{"partition epoch ahead", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.Partitions[0].PartitionEpoch = 4 },
			kerr.NotController.Code},
		{"deposed leader", f.request(r[0], r[4]), func(q *AlterPartitionRequest) {
			q.BrokerID, q.BrokerEpoch, q.Partitions[0].LeaderEpoch = r[0], f.c.epoch(r[0]), 0
		}, kerr.FencedLeaderEpoch.Code},
		{"not the leader", f.request(r[1], r[4]), func(q *AlterPartitionRequest) {
			q.BrokerID, q.BrokerEpoch = r[4], f.c.epoch(r[4])
		}, kerr.InvalidRequest.Code},
		{"older partition epoch", f.request(r[1], r[4]), func(q *AlterPartitionRequest) { q.Partitions[0].PartitionEpoch = 2 },
			kerr.InvalidUpdateVersion.Code},
		{"not a replica", f.request(r[1], r[4]), func(q *AlterPartitionRequest) {
			q.Partitions[0].NewISR = append(q.Partitions[0].NewISR, BrokerIDAndEpoch{ID: 9})
		}, kerr.InvalidRequest.Code},
		{"duplicate member", f.request(r[1], r[4], r[4]), nil, kerr.InvalidRequest.Code},
		{"without the leader", f.request(r[4]), nil, kerr.InvalidRequest.Code},
		{"recovering with two", f.request(r[1], r[4]), func(q *AlterPartitionRequest) {
			q.Partitions[0].LeaderRecoveryState = metadata.Recovering
		}, kerr.InvalidRequest.Code},
		{"back to recovering", f.request(r[1]), func(q *AlterPartitionRequest) {
			q.Partitions[0].LeaderRecoveryState = metadata.Recovering
		}, kerr.InvalidRequest.Code},
		{"fenced member", f.request(r[1], r[2], r[4]), nil, kerr.IneligibleReplica.Code},
		{"shutting-down member", f.request(r[1], r[3], r[4]), nil, kerr.IneligibleReplica.Code},
		{"member of an earlier incarnation", f.request(r[0], r[1], r[4]), func(q *AlterPartitionRequest) {
			q.Partitions[0].NewISR[0].Epoch = f.oldEpoch
		}, kerr.IneligibleReplica.Code},
		{"member epoch unchecked", f.request(r[0], r[1], r[4]), func(q *AlterPartitionRequest) {
			q.Partitions[0].NewISR[0].Epoch = metadata.NoBrokerEpoch
		}, 0},
		{"expand", f.request(r[0], r[1], r[4]), nil, 0},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if test.edit != nil {
				test.edit(&test.request)
			}
			records, response, err := AlterPartition(f.c.image, test.request)
			if err != nil {
				t.Fatal(err)
			}
			code := response.ErrorCode
			if code == 0 {
				code = response.Partitions[0].ErrorCode
			}
			if code != test.want {
				t.Fatalf("got %s, want %s", CodeName(code), CodeName(test.want))
			}
			if (code == 0) != (len(records) == 1) {
				t.Errorf("got %d records with %s", len(records), CodeName(code))
			}
		})
	}
}

func TestAlterPartitionUnregisteredMember(t *testing.T) {
	f := newAlterFixture(t)
	f.c.must(UnregisterBroker(f.c.image, f.r[2]))
	request := f.request(f.r[1], f.r[2], f.r[4])
	request.Partitions[0].NewISR[1].Epoch = metadata.NoBrokerEpoch
	_, response, _ := AlterPartition(f.c.image, request)
	if code := response.Partitions[0].ErrorCode; code != kerr.IneligibleReplica.Code {
		t.Errorf("got %s, want INELIGIBLE_REPLICA", CodeName(code))
	}
}

func TestAlterPartitionChanges(t *testing.T) {
	f := newAlterFixture(t)
	r := f.r
	// Same ISR in another order: success, current state, no record.
	records, response, err := AlterPartition(f.c.image, f.request(r[4], r[1]))
	if err != nil || len(records) != 0 || response.Partitions[0].ErrorCode != 0 ||
		response.Partitions[0].Partition.PartitionEpoch != 3 {
		t.Fatalf("no-op: %v %+v %v", records, response, err)
	}
	// Shrink to the leader alone: r4 joins r3 in the ELR (the ISR is below
	// min.insync.replicas 3), the partition epoch goes up, the leader epoch
	// does not.
	records, response, err = AlterPartition(f.c.image, f.request(r[1]))
	if err != nil {
		t.Fatal(err)
	}
	f.c.apply(records)
	got := response.Partitions[0].Partition
	if got.LeaderEpoch != 1 || got.PartitionEpoch != 4 || !slices.Equal(got.ISR, []metadata.BrokerID{r[1]}) ||
		!slices.Equal(got.ELR, []metadata.BrokerID{r[3], r[4]}) {
		t.Errorf("shrink: %v", got)
	}
	// r4 rejoins: it leaves the ELR.
	request := f.request(r[1], r[4])
	request.Partitions[0].PartitionEpoch = 4
	records, response, _ = AlterPartition(f.c.image, request)
	f.c.apply(records)
	if got := response.Partitions[0].Partition; !slices.Equal(got.ISR, []metadata.BrokerID{r[1], r[4]}) ||
		!slices.Equal(got.ELR, []metadata.BrokerID{r[3]}) {
		t.Errorf("expand: %v", got)
	}
	// r0 rejoins: the ISR reaches min.insync.replicas and the ELR empties.
	request = f.request(r[0], r[1], r[4])
	request.Partitions[0].PartitionEpoch = 5
	records, response, _ = AlterPartition(f.c.image, request)
	f.c.apply(records)
	if got := response.Partitions[0].Partition; len(got.ISR) != 3 || len(got.ELR) != 0 || got.PartitionEpoch != 6 {
		t.Errorf("full: %v", got)
	}
}

func TestAlterPartitionSecondItemSeesFirst(t *testing.T) {
	f := newAlterFixture(t)
	request := f.request(f.r[1])
	request.Partitions = append(request.Partitions, request.Partitions[0])
	records, response, err := AlterPartition(f.c.image, request)
	if err != nil || len(records) != 1 {
		t.Fatal(records, err)
	}
	// The second proposal was built on partition epoch 3, superseded by the
	// first: the compare-and-set refuses it.
	if code := response.Partitions[1].ErrorCode; code != kerr.InvalidUpdateVersion.Code {
		t.Errorf("got %s, want INVALID_UPDATE_VERSION", CodeName(code))
	}
}

func TestAlterPartitionRecovery(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2)
	c.createTopic("orders", 1, 2, 1, true)
	partition := c.partition("orders", 0)
	leader, other := partition.Leader, partition.Replicas[1]
	c.apply(mustAlter(c, "orders", 0, leader))
	c.fence(leader)
	// The unclean election made other a Recovering leader: it may not grow
	// the ISR until it reports Recovered.
	if got := c.partition("orders", 0); got.Leader != other || got.LeaderRecoveryState != metadata.Recovering {
		t.Fatalf("setup: %v", got)
	}
	c.register(leader)
	_, response, _ := AlterPartition(c.image, AlterPartitionRequest{BrokerID: other, BrokerEpoch: c.epoch(other),
		Partitions: []AlterPartitionItem{{TopicPartition: partition.TopicPartition, LeaderEpoch: 1, PartitionEpoch: 2,
			NewISR:              []BrokerIDAndEpoch{{ID: other, Epoch: c.epoch(other)}, {ID: leader, Epoch: c.epoch(leader)}},
			LeaderRecoveryState: metadata.Recovering}}})
	if code := response.Partitions[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("got %s, want INVALID_REQUEST", CodeName(code))
	}
	records, response, _ := AlterPartition(c.image, AlterPartitionRequest{BrokerID: other, BrokerEpoch: c.epoch(other),
		Partitions: []AlterPartitionItem{{TopicPartition: partition.TopicPartition, LeaderEpoch: 1, PartitionEpoch: 2,
			NewISR: []BrokerIDAndEpoch{{ID: other, Epoch: c.epoch(other)}}, LeaderRecoveryState: metadata.Recovered}}})
	c.apply(records)
	if got := c.partition("orders", 0); len(records) != 1 || got.LeaderRecoveryState != metadata.Recovered {
		t.Errorf("recovered: %v %+v", got, response)
	}
}
