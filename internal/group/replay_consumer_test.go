package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/rules"
)

// The replay property with KIP-848 members: consumer-protocol clients of
// group "cg" join, heartbeat reporting the partitions they own (having
// dropped what the last answer left out, as real clients do), leave, and
// commit offsets at their member epoch, among the classic clients, time
// passing, appends committed or failed and failovers. Checked besides the
// classic properties: a consumer group's live records equal the committed
// ones whenever none of its writes is in flight; no partition is owned by
// two members at once (reconcile.Owners and the members' current
// assignments), which with revoke-before-assign off is found.

// consumerClient is one simulated KIP-848 consumer.
type consumerClient struct {
	memberID string
	// instanceID makes the client a static member ("" for dynamic).
	instanceID string
	epoch      int32
	// owned are the partitions of topic t the client consumes now.
	owned []int32
	// inFlight is the heartbeat awaiting its answer; 0 when none.
	inFlight RequestID
	sent     int32 // the epoch the heartbeat in flight carried
}

func newConsumerClients(count int) []*consumerClient {
	var clients []*consumerClient
	for i := 0; i < count; i++ {
		client := &consumerClient{memberID: fmt.Sprintf("consumer-%d", i)}
		if i == count-1 {
			client.instanceID = "static-consumer"
		}
		clients = append(clients, client)
	}
	return clients
}

// consumerStep takes one action of a random consumer client.
func (r *replayRun) consumerStep() {
	client := r.consumers[r.random.Intn(len(r.consumers))]
	if client.inFlight != 0 {
		return // one heartbeat at a time, as clients do
	}
	switch action := r.random.Intn(100); {
	case action < 60:
		var request *kmsg.ConsumerGroupHeartbeatRequest
		if client.epoch == 0 {
			request = consumerJoin("cg", client.memberID, "t", "u")
		} else {
			owned := client.owned
			if owned == nil {
				owned = []int32{}
			}
			request = consumerBeat("cg", client.memberID, client.epoch, owned)
		}
		r.sendConsumer(client, request)
	case action < 65:
		if client.epoch > 0 {
			epoch := int32(-1)
			if client.instanceID != "" && r.random.Intn(2) == 0 {
				epoch = -2 // leaves for a while, back under the same instance id
			}
			r.sendConsumer(client, consumerBeat("cg", client.memberID, epoch, nil))
		}
	default:
		if client.epoch > 0 {
			r.commitAs(client)
		}
	}
}

func (r *replayRun) sendConsumer(client *consumerClient, request *kmsg.ConsumerGroupHeartbeatRequest) {
	if client.instanceID != "" {
		request.InstanceID = stringPointer(client.instanceID)
	}
	client.sent = request.MemberEpoch
	client.inFlight = r.h.send(request)
}

// commitAs commits offsets of the client's partitions at its epoch
// (OffsetCommit v9, as KIP-848 members must), or one time in five at the
// epoch before, as a zombie that missed a rebalance would: member epochs
// only grow, so that commit must be refused.
func (r *replayRun) commitAs(client *consumerClient) {
	r.seq++
	offsets := map[topicPartition]int64{}
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation, request.MemberID = 9, "cg", client.epoch, client.memberID
	stale := r.random.Intn(5) == 0
	if stale {
		request.Generation--
	}
	entry := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for _, partition := range client.owned {
		r.offset++
		offsets[topicPartition{"t", partition}] = r.offset
		entry.Partitions = append(entry.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: partition, Offset: r.offset, LeaderEpoch: -1})
		r.wrote("cg", topicPartition{"t", partition})
	}
	request.Topics = append(request.Topics, entry)
	r.commits[r.h.send(request)] = pendingCommit{group: "cg", offsets: offsets, seq: r.seq, stale: stale}
}

// collectConsumerAnswers applies heartbeat answers to the clients: an
// assignment replaces what they consume; a fenced or unknown member
// drops everything and rejoins; other errors (a coordinator change) are
// retried.
func (r *replayRun) collectConsumerAnswers() {
	for _, client := range r.consumers {
		if client.inFlight == 0 || !r.h.answered(client.inFlight) {
			continue
		}
		answer := r.h.answers[client.inFlight].(*kmsg.ConsumerGroupHeartbeatResponse)
		client.inFlight = 0
		switch {
		case answer.ErrorCode == kerr.FencedMemberEpoch.Code || answer.ErrorCode == kerr.UnknownMemberID.Code:
			client.epoch, client.owned = 0, nil
		case answer.ErrorCode != 0:
		case client.sent < 0:
			client.epoch, client.owned = 0, nil
		default:
			client.epoch = answer.MemberEpoch
			if answer.Assignment != nil {
				client.owned = nil
				for _, topic := range answer.Assignment.Topics {
					if topic.TopicID == testTopics["t"].ID {
						client.owned = slices.Clone(topic.Partitions)
					}
				}
			}
		}
	}
}

// checkConsumerGroups checks no partition of the consumer groups has two
// owners, and (unless only owners are checked) that a group without
// writes in flight is what its committed records say.
func (r *replayRun) checkConsumerGroups(when string) {
	if r.failure != "" {
		return
	}
	coordinator := r.h.coordinator
	for _, id := range sortedKeys(coordinator.consumerGroups) {
		group := coordinator.consumerGroups[id]
		if owners := twoOwners(group); owners != "" {
			r.failure = fmt.Sprintf("%s: consumer group %s: %s", when, id, owners)
			return
		}
		if r.ownersOnly || r.ackedOnly || coordinator.hasPendingWritesFor(id) || coordinator.Unloaded() {
			continue
		}
		var durable map[consumerKey][]byte
		if entry := coordinator.durable[id]; entry != nil {
			durable = entry.consumer
		}
		live := coordinator.recordSet(group)
		if !sameRecordSets(live, durable) {
			r.failure = fmt.Sprintf("%s: consumer group %s live records\n%s\ndiffer from the committed\n%s", when, id,
				describeRecordSet(live), describeRecordSet(durable))
			return
		}
	}
}

func sameRecordSets(a, b map[consumerKey][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for key, value := range a {
		if other, ok := b[key]; !ok || string(other) != string(value) {
			return false
		}
	}
	return true
}

func describeRecordSet(set map[consumerKey][]byte) string {
	var out strings.Builder
	for _, recordType := range []int16{3, 4, 5, 6, 7, 8} {
		for _, key := range sortedConsumerKeys(set, recordType) {
			fmt.Fprintf(&out, "%d %s %x\n", recordType, key.member, set[key])
		}
	}
	return out.String()
}

// TestReplayPropertyCatchesTwoOwnersWithoutRevokeBeforeAssign: with the
// rule off, a member is given a partition another still owns, and the
// two-owners check finds it.
func TestReplayPropertyCatchesTwoOwnersWithoutRevokeBeforeAssign(t *testing.T) {
	config := DefaultConfig()
	config.Rules = config.Rules.Without(rules.RevokeBeforeAssign)
	for seed := int64(1); seed <= 100; seed++ {
		if failure := runReplayProperty(t, seed, 400, config); failure != "" {
			if !strings.Contains(failure, "owned by") {
				t.Fatalf("seed %d: %s", seed, failure)
			}
			t.Logf("seed %d: %s", seed, failure)
			return
		}
	}
	t.Fatal("no seed found two owners of a partition with revoke-before-assign off")
}

// TestReplayPropertyMostlyConsumers runs the property with six KIP-848
// clients taking 80% of the steps: more members, more rebalances, more
// partitions changing hands.
func TestReplayPropertyMostlyConsumers(t *testing.T) {
	for seed := int64(1); seed <= 100; seed++ {
		run := newReplayRun(t, seed, DefaultConfig())
		run.consumers, run.consumerShare = newConsumerClients(6), 80
		if failure := run.run(400); failure != "" {
			t.Fatalf("seed %d: %s", seed, failure)
		}
	}
}

// settleConsumers is the liveness phase: with no more failures, every
// consumer client heartbeats (rejoining when it must) once a second until
// the group is Stable with every client a member, every member at the
// assignment epoch, every partition of t and u owned, and each client
// consuming exactly what its member is assigned. It fails the run if that
// takes more than two minutes (sessions of members whose clients lost an
// answer end after 45 s).
func (r *replayRun) settleConsumers() {
	for round := 0; round < 120 && r.failure == ""; round++ {
		for _, client := range r.consumers {
			if client.inFlight != 0 {
				continue
			}
			if client.epoch == 0 {
				r.sendConsumer(client, consumerJoin("cg", client.memberID, "t", "u"))
			} else {
				r.sendConsumer(client, consumerBeat("cg", client.memberID, client.epoch, append([]int32{}, client.owned...)))
			}
		}
		r.h.commitAll()
		r.collectAnswers()
		if problem := r.unsettled(); problem == "" {
			return
		}
		r.h.advance(1000)
		r.h.commitAll()
		r.collectAnswers()
	}
	if r.failure == "" {
		r.failure = "consumer group cg did not settle: " + r.unsettled()
	}
}

// unsettled says why the consumer group is not settled, "" when it is.
func (r *replayRun) unsettled() string {
	group := r.h.coordinator.consumerGroups["cg"]
	if group == nil || len(group.members) != len(r.consumers) {
		return "not every client is a member"
	}
	if group.state() != "Stable" {
		return "state " + group.state()
	}
	owned := 0
	for _, client := range r.consumers {
		member := group.members[client.memberID]
		if member == nil || !slices.Equal(member.current.Assigned["t"], client.owned) {
			return fmt.Sprintf("client %s consumes %v, its member is assigned %v", client.memberID, client.owned, member)
		}
		owned += member.current.Assigned.Count()
	}
	if owned != int(testTopics["t"].Partitions+testTopics["u"].Partitions) {
		return fmt.Sprintf("%d partitions owned", owned)
	}
	return ""
}
