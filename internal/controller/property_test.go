package controller

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// TestRandomDecisions runs random sequences of events (registrations,
// heartbeats, session expiries, controlled shutdowns, topic creation and
// deletion, ISR proposals, preferred elections, reassignments and their
// cancellations, unregistrations) through
// the decisions, applies every record to an image, and checks after every
// record the safety rules the controller exists for:
//
//   - the leader is in the ISR, or NoBroker, or (unclean) the whole ISR;
//   - a fenced or shutting-down broker never leads and is never in an ISR;
//   - a leader change bumps the leader epoch by exactly 1, any change bumps
//     the partition epoch by exactly 1, and nothing else moves them;
//   - with unclean election off, a new leader comes from the ISR or the ELR;
//     with it on, otherwise the ISR is just the leader and it is Recovering;
//   - a broker enters an ISR only through AlterPartition (after the
//     eligibility checks) or by being elected from the ELR or uncleanly;
//   - a broker enters the ELR only from the ISR or ELR (KIP-966);
//   - rule reassignment-completes-in-isr: a change of assignment never
//     adds to the ISR, and a reassignment completes only once every
//     replica it adds is in the ISR (checkReassignmentChange);
//
// and after every decision that a leaderless partition has no candidate the
// controller could have elected. The same seed gives the same trace.
func TestRandomDecisions(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() {
		seeds = 30
	}
	seen := map[string]int{}
	for seed := uint64(1); seed <= seeds; seed++ {
		first := runRandomDecisions(t, seed, 400, seen)
		if second := runRandomDecisions(t, seed, 400, map[string]int{}); second != first {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
	t.Logf("exercised: %v", seen)
	// The runs must reach every kind of decision, or they prove little.
	for _, kind := range []string{"register-broker", "unfence-broker", "fence-broker", "begin-controlled-shutdown",
		"unregister-broker", "create-topic", "delete-topic", "election from the ISR", "election from the ELR",
		"unclean election", "no leader", "ISR expansion", "ISR shrink", "ELR growth", "recovered",
		"reassignment", "reassignment started", "reassignment completed", "reassignment cancelled", "assignment reordered"} {
		if seen[kind] == 0 {
			t.Errorf("no %s in the random runs: %v", kind, seen)
		}
	}
}

// simulation is one random run.
type simulation struct {
	t             *testing.T
	seed          uint64
	random        *rand.Rand
	image         *metadata.Image
	nowTick       int64
	lastHeartbeat map[metadata.BrokerID]int64
	incarnations  int
	trace         []string
	seen          map[string]int // what the run exercised
	// rules are the decisions' rules: all on, but for the test that shows
	// the checks catch a reassignment completed at once.
	rules rules.Rules
	// problem, when set, records the first broken rule instead of
	// failing the test (for that test).
	problem *string
}

// sessionTimeoutTicks is about two heartbeat intervals of one broker in
// these runs, so that sessions expire often but ISRs also grow back.
const sessionTimeoutTicks = 20

func runRandomDecisions(t *testing.T, seed uint64, steps int, seen map[string]int) uint64 {
	return newRandomSimulation(t, seed, seen).run(steps)
}

func newRandomSimulation(t *testing.T, seed uint64, seen map[string]int) *simulation {
	return &simulation{
		t: t, seed: seed, random: rand.New(rand.NewPCG(seed, 1)),
		image: metadata.NewImage(), lastHeartbeat: map[metadata.BrokerID]int64{}, seen: seen,
	}
}

// run takes steps random events and returns a hash of the trace.
func (s *simulation) run(steps int) uint64 {
	t, seed := s.t, s.seed
	for step := 0; step < steps; step++ {
		s.nowTick++
		event, records, err := s.randomEvent()
		if err != nil {
			t.Fatalf("seed %d step %d %s: %v", seed, step, event, err)
		}
		s.trace = append(s.trace, event)
		for _, r := range records {
			s.applyAndCheck(event, r)
		}
		if problem := checkLeaderless(s.image); problem != "" {
			t.Fatalf("seed %d step %d after %s: %s\n%s", seed, step, event, problem, s.image.Describe())
		}
	}
	hash := fnv.New64a()
	hash.Write([]byte(strings.Join(s.trace, "\n") + s.image.Describe()))
	return hash.Sum64()
}

func (s *simulation) randomBroker() metadata.BrokerID { return metadata.BrokerID(1 + s.random.IntN(5)) }

func (s *simulation) epochOf(id metadata.BrokerID) metadata.BrokerEpoch {
	broker, _ := s.image.Broker(id)
	return broker.Epoch
}

// randomEvent draws an event; the weights keep brokers mostly alive, so
// that ISRs have time to grow back between failures.
func (s *simulation) randomEvent() (string, []metadata.Record, error) {
	id := s.randomBroker()
	switch draw := s.random.IntN(100); {
	case draw < 8:
		return s.register(id)
	case draw < 45:
		return s.heartbeat(id)
	case draw < 52:
		records, err := FenceExpired(s.image, s.lastHeartbeat, s.nowTick, sessionTimeoutTicks)
		return "fence-expired", records, err
	case draw < 55:
		records, code, err := ControlledShutdown(s.image, id, s.epochOf(id))
		return fmt.Sprintf("controlled-shutdown %d %s", id, CodeName(code)), records, err
	case draw < 62:
		return s.createTopic()
	case draw < 64:
		records, code, err := DeleteTopic(s.image, randomTopicName(s.random), metadata.NoTopicID)
		return "delete-topic " + CodeName(code), records, err
	case draw < 65:
		records, code, err := UnregisterBroker(s.image, id)
		return fmt.Sprintf("unregister %d %s", id, CodeName(code)), records, err
	case draw < 70:
		return s.electPreferred()
	case draw < 75:
		return s.reassign()
	}
	return s.alterPartition()
}

func (s *simulation) electPreferred() (string, []metadata.Record, error) {
	var partitions []metadata.TopicPartition
	for _, partition := range s.image.Partitions() {
		if s.random.IntN(2) == 0 {
			partitions = append(partitions, partition.TopicPartition)
		}
	}
	records, response, err := ElectPreferred(s.image, partitions)
	return fmt.Sprintf("elect-preferred %v", response), records, err
}

func (s *simulation) register(id metadata.BrokerID) (string, []metadata.Record, error) {
	incarnation, _ := s.image.Incarnation(id)
	if s.random.IntN(3) > 0 {
		s.incarnations++
		incarnation = fmt.Sprint(s.incarnations)
	}
	previous := metadata.NoBrokerEpoch
	if s.random.IntN(2) == 0 {
		previous = s.epochOf(id)
	}
	records, epoch, code, err := RegisterBroker(s.image, id, incarnation, "", previous, s.image.Offset()+1)
	if code == 0 && err == nil {
		s.lastHeartbeat[id] = s.nowTick
	}
	return fmt.Sprintf("register %d %s epoch=%d %s", id, incarnation, epoch, CodeName(code)), records, err
}

func (s *simulation) heartbeat(id metadata.BrokerID) (string, []metadata.Record, error) {
	epoch := s.epochOf(id)
	if s.random.IntN(10) == 0 {
		epoch--
	}
	wantShutdown := s.random.IntN(15) == 0
	caughtUp := s.random.IntN(4) > 0
	records, code, err := Heartbeat(s.image, id, epoch, wantShutdown, caughtUp)
	if code == 0 {
		s.lastHeartbeat[id] = s.nowTick
	}
	return fmt.Sprintf("heartbeat %d shutdown=%t caught-up=%t %s", id, wantShutdown, caughtUp, CodeName(code)), records, err
}

func randomTopicName(random *rand.Rand) string { return []string{"a", "b", "c", "d"}[random.IntN(4)] }

func (s *simulation) createTopic() (string, []metadata.Record, error) {
	replicationFactor := 1 + s.random.IntN(3)
	request := CreateTopicRequest{
		Name: randomTopicName(s.random), Partitions: 1 + s.random.IntN(3), ReplicationFactor: replicationFactor,
		Config: metadata.TopicConfig{
			MinInsyncReplicas:     1 + s.random.IntN(replicationFactor),
			UncleanLeaderElection: s.random.IntN(3) == 0,
		},
	}
	records, code, err := CreateTopic(s.image, request, seededTopicIDs(byte(s.random.IntN(256))))
	return fmt.Sprintf("create-topic %+v %s", request, CodeName(code)), records, err
}

// alterPartition proposes a random ISR as a partition's leader would, with
// the occasional stale epoch or ineligible member.
func (s *simulation) alterPartition() (string, []metadata.Record, error) {
	partitions := s.image.Partitions()
	if len(partitions) == 0 {
		return "alter-partition none", nil, nil
	}
	partition := partitions[s.random.IntN(len(partitions))]
	if partition.Leader == metadata.NoBroker {
		return "alter-partition leaderless", nil, nil
	}
	item := AlterPartitionItem{
		TopicPartition: partition.TopicPartition,
		LeaderEpoch:    partition.LeaderEpoch, PartitionEpoch: partition.PartitionEpoch - metadata.PartitionEpoch(s.random.IntN(5)/4),
		NewISR:              []BrokerIDAndEpoch{{ID: partition.Leader, Epoch: s.epochOf(partition.Leader)}},
		LeaderRecoveryState: partition.LeaderRecoveryState,
	}
	if partition.LeaderRecoveryState == metadata.Recovering && s.random.IntN(2) == 0 {
		item.LeaderRecoveryState = metadata.Recovered
	}
	for _, replica := range partition.Replicas {
		if replica != partition.Leader && s.random.IntN(2) == 0 {
			item.NewISR = append(item.NewISR, BrokerIDAndEpoch{ID: replica, Epoch: s.epochOf(replica) - metadata.BrokerEpoch(s.random.IntN(8)/7)})
		}
	}
	request := AlterPartitionRequest{BrokerID: partition.Leader, BrokerEpoch: s.epochOf(partition.Leader),
		Partitions: []AlterPartitionItem{item}}
	records, response, err := AlterPartition(s.image, request)
	return fmt.Sprintf("alter-partition %+v -> %+v", request, response), records, err
}

// applyAndCheck applies one record and checks the change it made.
func (s *simulation) applyAndCheck(event string, r metadata.Record) {
	before := s.image.Clone()
	applied, err := s.image.Apply(metadata.Entry{Offset: s.image.Offset() + 1, Record: r})
	if err != nil || !applied {
		s.t.Fatalf("seed %d: %s: record %v: applied=%t %v", s.seed, event, r, applied, err)
	}
	if problem := checkImage(s.image); problem != "" {
		s.t.Fatalf("seed %d: %s: after %v: %s\n%s", s.seed, event, r, problem, s.image.Describe())
	}
	change, ok := r.(metadata.PartitionChange)
	if !ok {
		s.seen[strings.Fields(r.String())[0]]++
		return
	}
	old, _ := before.Partition(change.TopicPartition)
	config, _ := s.image.TopicConfig(change.Topic)
	problem := checkChange(old, change, config, strings.HasPrefix(event, "alter-partition"))
	if problem == "" {
		problem = checkReassignmentChange(old, change)
	}
	if problem != "" && s.problem != nil {
		if *s.problem == "" {
			*s.problem = fmt.Sprintf("%s: %v -> %v: %s", event, old, r, problem)
		}
	} else if problem != "" {
		s.t.Fatalf("seed %d: %s: %v -> %v: %s", s.seed, event, old, r, problem)
	}
	s.seen[classifyReassignment(old, change)]++
	s.seen[classifyChange(old, change)]++
	if len(change.ELR) > len(old.ELR) {
		s.seen["ELR growth"]++
	}
}

// classifyChange names what a partition change did, for the coverage count.
func classifyChange(old metadata.PartitionState, change metadata.PartitionChange) string {
	switch {
	case change.Leader == metadata.NoBroker && old.Leader != metadata.NoBroker:
		return "no leader"
	case change.Leader != old.Leader && old.InISR(change.Leader):
		return "election from the ISR"
	case change.Leader != old.Leader && slices.Contains(old.ELR, change.Leader):
		return "election from the ELR"
	case change.Leader != old.Leader:
		return "unclean election"
	case len(change.ISR) > len(old.ISR):
		return "ISR expansion"
	case len(change.ISR) < len(old.ISR):
		return "ISR shrink"
	case change.LeaderRecoveryState != old.LeaderRecoveryState:
		return "recovered"
	}
	return "other"
}

// checkImage checks the state rules on every partition.
func checkImage(img *metadata.Image) string {
	for _, partition := range img.Partitions() {
		if partition.Leader != metadata.NoBroker && !partition.InISR(partition.Leader) {
			return fmt.Sprintf("%s: leader outside the ISR", partition.TopicPartition)
		}
		for _, member := range partition.ISR {
			broker, ok := img.Broker(member)
			if !ok || broker.Fenced || broker.ShuttingDown {
				return fmt.Sprintf("%s: ISR member %d is unregistered, fenced or shutting down", partition.TopicPartition, member)
			}
			if slices.Contains(partition.ELR, member) {
				return fmt.Sprintf("%s: %d in both ISR and ELR", partition.TopicPartition, member)
			}
		}
	}
	return ""
}

// checkChange checks one partition change against the state before it.
func checkChange(old metadata.PartitionState, change metadata.PartitionChange, config metadata.TopicConfig, fromAlter bool) string {
	leaderChanged := change.Leader != old.Leader
	switch {
	case change.PartitionEpoch != old.PartitionEpoch+1:
		return "partition epoch did not go up by exactly 1"
	case leaderChanged && change.LeaderEpoch != old.LeaderEpoch+1:
		return "leader changed, leader epoch did not go up by exactly 1"
	case !leaderChanged && change.LeaderEpoch != old.LeaderEpoch:
		return "leader epoch moved without a leader change"
	case fromAlter && leaderChanged && (change.Replicas == nil || !old.Reassigning()):
		return "AlterPartition changed the leader other than by completing a reassignment"
	}
	unclean := change.LeaderRecoveryState == metadata.Recovering
	if leaderChanged && change.Leader != metadata.NoBroker {
		clean := old.InISR(change.Leader) || slices.Contains(old.ELR, change.Leader)
		if !clean && !(config.UncleanLeaderElection && unclean && len(change.ISR) == 1) {
			return "new leader from outside the ISR and ELR"
		}
	}
	for _, member := range change.ISR {
		joined := !old.InISR(member)
		if joined && !fromAlter && !(member == change.Leader && leaderChanged) {
			return fmt.Sprintf("%d joined the ISR without AlterPartition or an election", member)
		}
	}
	for _, member := range change.ELR {
		if !old.InISR(member) && !slices.Contains(old.ELR, member) {
			return fmt.Sprintf("%d joined the ELR from outside the ISR and ELR", member)
		}
	}
	return ""
}

// checkLeaderless checks that a partition without a leader has no
// candidate: no active ISR member, no active ELR member when the ISR is
// empty, and, if unclean election is on, no active replica at all.
func checkLeaderless(img *metadata.Image) string {
	for _, partition := range img.Partitions() {
		if partition.Leader != metadata.NoBroker {
			continue
		}
		config, _ := img.TopicConfig(partition.Topic)
		for _, replica := range partition.Replicas {
			candidate := partition.InISR(replica) || (len(partition.ISR) == 0 && slices.Contains(partition.ELR, replica))
			if img.Active(replica) && (candidate || config.UncleanLeaderElection) {
				return fmt.Sprintf("%s is leaderless but %d could lead", partition.TopicPartition, replica)
			}
		}
	}
	return ""
}
