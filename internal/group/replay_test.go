package group

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/rules"
)

// The replay property: over random sequences of group requests (JoinGroup
// v0-v9, LeaveGroup v1 and v4, OffsetFetch v7 and v8), timer
// ticks, appends committed and appends failed (a leadership change that
// truncates what was not committed), the durable state the coordinator
// answers from always equals the state a fresh coordinator Loads from the
// committed records; every OffsetCommit answered OK is in that replay
// (unless a later write to the same partition was handled); and at a
// leadership change, what a new coordinator would load equals what the
// log keeps. Each legacy rule breaks one of these.

// replayClient is one simulated consumer of a group.
type replayClient struct {
	group      string
	instanceID string
	memberID   string
	generation int32
	members    []string // the members, when this client led the last join
	joining    bool
}

// pendingCommit is an OffsetCommit in flight, remembered so its answer can
// be checked against the replay.
type pendingCommit struct {
	group   string
	offsets map[topicPartition]int64
	seq     int
	// stale is set for a commit at an epoch behind the member's: it must
	// be refused.
	stale bool
}

// pendingSync is a SyncGroup in flight.
type pendingSync struct {
	client     *replayClient
	generation int32
}

// ackedOffset is the last commit answered OK for a partition, and the
// sequence number of the request.
type ackedOffset struct {
	offset int64
	seq    int
}

type replayRun struct {
	random  *rand.Rand
	h       *harness
	clients []*replayClient
	// consumers are the KIP-848 clients of group "cg"
	// (replay_consumer_test.go).
	consumers []*consumerClient
	// consumerShare is the percentage of steps taken by consumers.
	consumerShare int
	joins         map[RequestID]*replayClient
	commits       map[RequestID]pendingCommit
	syncs         map[RequestID]pendingSync
	// owners maps each assignment handed out, by group and generation,
	// to the client that got it: no partition may have two owners in a
	// generation.
	owners     map[string]map[int32]map[string]*replayClient
	syncCursor int
	acked      map[string]map[topicPartition]ackedOffset
	lastSeen   map[string]map[topicPartition]int // the last request seq that wrote each partition
	seq        int
	offset     int64
	failure    string
	// ackedOnly leaves out the comparison of live and replayed state, to
	// show the check of acknowledged commits catches early answers alone.
	ackedOnly bool
	// ownersOnly keeps only the check of assignments' owners.
	ownersOnly bool
	// expiring runs with a short offsets retention: offsets expire
	// unannounced, so an acknowledged commit may be gone.
	expiring bool
}

func newReplayRun(t testing.TB, seed int64, config Config) *replayRun {
	run := &replayRun{random: rand.New(rand.NewSource(seed)), h: newHarness(t, config), joins: map[RequestID]*replayClient{},
		commits: map[RequestID]pendingCommit{}, syncs: map[RequestID]pendingSync{}, owners: map[string]map[int32]map[string]*replayClient{}, acked: map[string]map[topicPartition]ackedOffset{}, lastSeen: map[string]map[topicPartition]int{}}
	run.h.autoCommit = false
	for i := 0; i < 5; i++ {
		client := &replayClient{group: fmt.Sprintf("g%d", i%2)}
		if i == 4 {
			client.instanceID = "static-4"
		}
		run.clients = append(run.clients, client)
	}
	run.consumers, run.consumerShare = newConsumerClients(3), 30
	return run
}

// step takes one random action.
func (r *replayRun) step() {
	if r.random.Intn(100) < r.consumerShare {
		r.consumerStep()
		r.collectAnswers()
		return
	}
	client := r.clients[r.random.Intn(len(r.clients))]
	switch action := r.random.Intn(100); {
	case action < 15:
		r.join(client)
	case action < 27:
		r.sync(client)
	case action < 35:
		r.heartbeat(client)
	case action < 38:
		if r.random.Intn(2) == 0 {
			r.h.send(&kmsg.LeaveGroupRequest{Version: 1, Group: client.group, MemberID: client.memberID})
		} else {
			r.h.send(&kmsg.LeaveGroupRequest{Version: 4, Group: client.group, Members: []kmsg.LeaveGroupRequestMember{{MemberID: client.memberID}}})
		}
		client.memberID, client.generation = "", 0
	case action < 55:
		r.commit(client.group, client.generation, client.memberID)
	case action < 62:
		r.commit("simple", -1, "")
	case action < 66:
		if r.random.Intn(2) == 0 {
			r.h.send(&kmsg.OffsetFetchRequest{Version: 7, Group: client.group, RequireStable: r.random.Intn(2) == 0})
		} else {
			r.h.send(&kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: client.group}, {Group: "simple"}}, RequireStable: true})
		}
	case action < 68:
		r.deleteGroup(client.group)
	case action < 70:
		r.deleteOffsets(client.group)
	case action < 82:
		r.h.advance(int64(r.random.Intn(8000)))
	case action < 95:
		r.commitSome()
	case action < 98:
		r.leadershipChange()
	default:
		r.checkReplay("checkpoint")
	}
	r.collectAnswers()
}

func (r *replayRun) join(client *replayClient) {
	if client.joining {
		return
	}
	request := joinRequestFor(int16(r.random.Intn(10)), client.group, client.memberID)
	if client.instanceID != "" {
		request.Version = 9
		request.InstanceID = stringPointer(client.instanceID)
	}
	client.joining = true
	r.joins[r.h.send(request)] = client
}

func (r *replayRun) sync(client *replayClient) {
	if client.memberID == "" || client.generation == 0 {
		return
	}
	assignments := map[string]string{}
	for i, member := range client.members {
		assignments[member] = fmt.Sprintf("partition-%d", i)
	}
	request := syncRequestFor(client.group, client.memberID, client.generation, assignments)
	if client.instanceID != "" {
		request.InstanceID = stringPointer(client.instanceID)
	}
	r.syncs[r.h.send(request)] = pendingSync{client: client, generation: client.generation}
}

// collectSyncs checks, in the order answers came out, that no assignment
// handed out in a generation went to two clients (a static member replaced
// under a new member id is the same client). A group deleted starts its
// generations again.
func (r *replayRun) collectSyncs() {
	for _, group := range sortedKeys(r.owners) {
		if _, live := r.h.coordinator.groups[group]; !live {
			delete(r.owners, group) // deleted, by a request or by expiry
		}
	}
	for ; r.syncCursor < len(r.h.answerOrder); r.syncCursor++ {
		id := r.h.answerOrder[r.syncCursor]
		if deleted, ok := r.h.answers[id].(*kmsg.DeleteGroupsResponse); ok {
			for _, group := range deleted.Groups {
				if group.ErrorCode == 0 {
					delete(r.owners, group.Group)
				}
			}
		}
		sync, ok := r.syncs[id]
		if !ok {
			continue
		}
		delete(r.syncs, id)
		response := r.h.answers[id].(*kmsg.SyncGroupResponse)
		assignment := string(response.MemberAssignment)
		if response.ErrorCode != 0 || assignment == "" {
			continue
		}
		byGeneration := r.owners[sync.client.group]
		if byGeneration == nil {
			byGeneration = map[int32]map[string]*replayClient{}
			r.owners[sync.client.group] = byGeneration
		}
		if byGeneration[sync.generation] == nil {
			byGeneration[sync.generation] = map[string]*replayClient{}
		}
		if owner, ok := byGeneration[sync.generation][assignment]; ok && owner != sync.client && r.failure == "" {
			r.failure = fmt.Sprintf("%s generation %d: %s handed to two members", sync.client.group, sync.generation, assignment)
		}
		byGeneration[sync.generation][assignment] = sync.client
	}
}

func (r *replayRun) heartbeat(client *replayClient) {
	request := kmsg.NewPtrHeartbeatRequest()
	request.Version, request.Group, request.MemberID, request.Generation = 4, client.group, client.memberID, client.generation
	if client.instanceID != "" {
		request.InstanceID = stringPointer(client.instanceID)
	}
	r.h.send(request)
}

func (r *replayRun) commit(group string, generation int32, memberID string) {
	r.seq++
	offsets := map[topicPartition]int64{}
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.Generation, request.MemberID = 8, group, generation, memberID
	for _, topic := range []string{"t", "u"} {
		entry := kmsg.OffsetCommitRequestTopic{Topic: topic}
		for partition := int32(0); partition < 2; partition++ {
			if r.h.coordinator.Unloaded() || r.random.Intn(2) == 0 {
				continue
			}
			r.offset++
			offsets[topicPartition{topic, partition}] = r.offset
			entry.Partitions = append(entry.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: partition, Offset: r.offset, LeaderEpoch: -1})
			r.wrote(group, topicPartition{topic, partition})
		}
		request.Topics = append(request.Topics, entry)
	}
	r.commits[r.h.send(request)] = pendingCommit{group: group, offsets: offsets, seq: r.seq}
}

// wrote notes that a request now in flight may change a partition's
// committed offset.
func (r *replayRun) wrote(group string, partition topicPartition) {
	if r.lastSeen[group] == nil {
		r.lastSeen[group] = map[topicPartition]int{}
	}
	r.lastSeen[group][partition] = r.seq
}

func (r *replayRun) deleteGroup(group string) {
	r.seq++
	for _, topic := range []string{"t", "u"} {
		for partition := int32(0); partition < 2; partition++ {
			r.wrote(group, topicPartition{topic, partition})
		}
	}
	r.h.send(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{group}})
}

func (r *replayRun) deleteOffsets(group string) {
	r.seq++
	r.wrote(group, topicPartition{"u", 0})
	r.wrote(group, topicPartition{"u", 1})
	r.h.send(&kmsg.OffsetDeleteRequest{Group: group, Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}})
}

// commitSome reports a prefix of the appends in flight committed.
func (r *replayRun) commitSome() {
	count := r.random.Intn(len(r.h.inFlight) + 1)
	for _, id := range r.h.inFlight[:count] {
		r.h.markCommitted(id)
		r.h.coordinator.AppendDone(id, 0)
	}
	r.h.inFlight = r.h.inFlight[count:]
	r.h.drain()
}

// leadershipChange is what a new coordinator would load now (the log to
// its end when rule load-committed-only is off), then the appends in
// flight fail and leave the log: the loaded state must be what the log
// keeps.
func (r *replayRun) leadershipChange() {
	loaded := describeDurable(r.h.replay(!r.h.config.Rules.On(rules.LoadCommittedOnly)))
	r.h.failAll(kerr.NotLeaderForPartition.Code)
	r.collectAnswers()
	if kept := describeDurable(r.h.replay(false)); loaded != kept && r.failure == "" && !r.ackedOnly && !r.ownersOnly {
		r.failure = fmt.Sprintf("a new coordinator loaded\n%s\nbut the log keeps\n%s", loaded, kept)
	}
	r.checkReplay("after a leadership change")
	if r.h.coordinator.Unloaded() || r.random.Intn(2) == 0 {
		// The leadership moves: the old coordinator answers what it held
		// NOT_COORDINATOR, and a new one loads the log and serves on.
		r.h.failover()
		r.collectAnswers()
	}
}

// collectAnswers updates the clients from join answers, records the
// commits answered OK and checks the assignments handed out.
func (r *replayRun) collectAnswers() {
	r.collectSyncs()
	r.collectConsumerAnswers()
	r.checkConsumerGroups("after a step")
	for id, client := range r.joins {
		response, ok := r.h.answers[id]
		if !ok {
			continue
		}
		delete(r.joins, id)
		client.joining = false
		join := response.(*kmsg.JoinGroupResponse)
		switch join.ErrorCode {
		case 0:
			client.memberID, client.generation, client.members = join.MemberID, join.Generation, nil
			for _, member := range join.Members {
				client.members = append(client.members, member.MemberID)
			}
		case kerr.MemberIDRequired.Code:
			client.memberID = join.MemberID
		default:
			client.memberID, client.generation = "", 0
		}
	}
	for id, commit := range r.commits {
		response, ok := r.h.answers[id]
		if !ok {
			continue
		}
		delete(r.commits, id)
		for _, topic := range response.(*kmsg.OffsetCommitResponse).Topics {
			for _, partition := range topic.Partitions {
				key := topicPartition{topic.Topic, partition.Partition}
				if partition.ErrorCode != 0 {
					continue
				}
				if commit.stale && r.failure == "" {
					r.failure = fmt.Sprintf("a commit of %s at a stale member epoch was accepted", commit.group)
				}
				if r.acked[commit.group] == nil {
					r.acked[commit.group] = map[topicPartition]ackedOffset{}
				}
				if previous, ok := r.acked[commit.group][key]; !ok || previous.seq < commit.seq {
					r.acked[commit.group][key] = ackedOffset{offset: commit.offsets[key], seq: commit.seq}
				}
			}
		}
	}
}

// checkReplay compares the live durable view with a replay of the
// committed log, and checks every acknowledged commit is in the replay.
func (r *replayRun) checkReplay(when string) {
	if r.failure != "" || r.ownersOnly {
		return
	}
	replayed := r.h.replay(false)
	live, loaded := describeDurable(r.h.coordinator), describeDurable(replayed)
	if live != loaded && !r.ackedOnly {
		r.failure = fmt.Sprintf("%s: the live state\n%s\ndiffers from the replay\n%s", when, live, loaded)
		return
	}
	for _, group := range sortedKeys(r.acked) {
		for partition, acked := range r.acked[group] {
			if r.lastSeen[group][partition] != acked.seq || r.expiring {
				continue
			}
			var got committedOffset
			found := false
			if durable := replayed.durable[group]; durable != nil {
				got, found = durable.offsets[partition]
			}
			if !found || got.offset != acked.offset {
				r.failure = fmt.Sprintf("%s: commit of %s %s/%d = %d answered OK, the replay has %d (found %t)", when, group,
					partition.topic, partition.partition, acked.offset, got.offset, found)
				return
			}
		}
	}
}

// runReplayProperty runs one seed; it returns the first violation.
func runReplayProperty(t testing.TB, seed int64, steps int, config Config) string {
	return newReplayRun(t, seed, config).run(steps)
}

func (run *replayRun) run(steps int) string {
	for i := 0; i < steps && run.failure == ""; i++ {
		run.step()
		if err := run.h.coordinator.CheckInvariants(); err != nil && run.failure == "" {
			run.failure = fmt.Sprintf("step %d: %v", i, err)
		}
	}
	run.h.commitAll()
	run.collectAnswers()
	run.checkReplay("at the end")
	if !run.ackedOnly && !run.ownersOnly {
		run.settleConsumers()
	}
	// Once the clients fall silent, every session and phase times out:
	// no request may be left without an answer.
	for i := 0; i < 4; i++ {
		run.h.advance(int64(run.h.config.NewMemberJoinTimeoutMs))
		run.h.commitAll()
	}
	for id := RequestID(1); id <= run.h.nextRequest && run.failure == "" && !run.ownersOnly; id++ {
		if !run.h.answered(id) {
			run.failure = fmt.Sprintf("request %d was never answered", id)
		}
	}
	if coordinator := run.h.coordinator; run.failure == "" && (coordinator.parked != 0 || len(coordinator.pendingByGroup) != 0) {
		run.failure = fmt.Sprintf("%d requests still counted as parked, appends in flight for %v", coordinator.parked, coordinator.pendingByGroup)
	}
	return run.failure
}

// TestReplayProperty runs many seeds of hundreds of steps with every rule
// on.
func TestReplayProperty(t *testing.T) {
	seeds, steps := 300, 400
	if testing.Short() {
		seeds = 50
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		if failure := runReplayProperty(t, seed, steps, DefaultConfig()); failure != "" {
			t.Fatalf("seed %d: %s", seed, failure)
		}
	}
}

// TestReplayPropertyWithExpiry runs the property with offsets retained for
// 30 s and checked every second, so expiry's tombstones (and the deletion
// of groups left with nothing) interleave with everything else.
func TestReplayPropertyWithExpiry(t *testing.T) {
	config := DefaultConfig()
	config.OffsetsRetentionMs, config.OffsetsRetentionCheckIntervalMs = 30000, 1000
	for seed := int64(1); seed <= 100; seed++ {
		run := newReplayRun(t, seed, config)
		run.expiring = true
		if failure := run.run(400); failure != "" {
			t.Fatalf("seed %d: %s", seed, failure)
		}
	}
}

// TestReplayPropertyCatchesEachLegacyRule switches each group rule off and
// searches seeds for the failure it prevents: answering commits before
// they are committed loses an acknowledged commit; loading past the high
// watermark serves state the log then loses.
func TestReplayPropertyCatchesEachLegacyRule(t *testing.T) {
	for _, rule := range []rules.Rule{rules.AnswerAfterCommit, rules.LoadCommittedOnly} {
		config := DefaultConfig()
		config.Rules = config.Rules.Without(rule)
		found := false
		for seed := int64(1); seed <= 100 && !found; seed++ {
			if failure := runReplayProperty(t, seed, 400, config); failure != "" {
				t.Logf("%s: seed %d: %s", rule, seed, strings.SplitN(failure, "\n", 2)[0])
				found = true
			}
		}
		if !found {
			t.Errorf("no seed found the failure rule %s prevents", rule)
		}
	}
}

// TestAcknowledgedCommitCheckCatchesEarlyAnswers: with
// answer-after-commit off, the check that every commit answered OK
// survives in the replay finds a lost commit on its own.
func TestAcknowledgedCommitCheckCatchesEarlyAnswers(t *testing.T) {
	config := DefaultConfig()
	config.Rules = config.Rules.Without(rules.AnswerAfterCommit)
	for seed := int64(1); seed <= 100; seed++ {
		run := newReplayRun(t, seed, config)
		run.ackedOnly = true
		if failure := run.run(400); failure != "" {
			if !strings.Contains(failure, "answered OK") {
				t.Fatalf("seed %d: %s", seed, failure)
			}
			t.Logf("seed %d: %s", seed, failure)
			return
		}
	}
	t.Fatal("no seed lost an acknowledged commit with answer-after-commit off")
}

// TestTwoOwnersCheckCatchesEarlyAssignments: with answer-after-commit off,
// a SyncGroup's assignment goes out before it is committed; a leadership
// change loses it, the new coordinator runs the same generation again, and
// the check of owners finds one assignment handed to two members.
func TestTwoOwnersCheckCatchesEarlyAssignments(t *testing.T) {
	config := DefaultConfig()
	config.Rules = config.Rules.Without(rules.AnswerAfterCommit)
	for seed := int64(1); seed <= 300; seed++ {
		run := newReplayRun(t, seed, config)
		run.ownersOnly = true
		if failure := run.run(400); failure != "" {
			if !strings.Contains(failure, "handed to two members") {
				t.Fatalf("seed %d: %s", seed, failure)
			}
			t.Logf("seed %d: %s", seed, failure)
			return
		}
	}
	t.Fatal("no seed handed an assignment to two members with answer-after-commit off")
}
