package reconcile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/group/assignor"
	"github.com/tidelog/tide/internal/rules"
)

// This file is a small simulation of KIP-848 members heartbeating to a
// coordinator over a network that delays and loses messages. The
// coordinator is a minimal one built from this package and the uniform
// assignor; each client consumes the partitions its last answer gave it
// and revokes what the answer left out. After every step the simulation
// checks that no partition is consumed by two clients at once. With
// revoke-before-assign off it must find a step where one is.

const (
	simulationTicks     = 1500
	healTicks           = 600
	requestTimeoutTicks = 12
	maximumClients      = 6
	lossPercent         = 10
	maximumDelayTicks   = 8
	heartbeatPercent    = 30
	omitOwnedPercent    = 15
	joinPerMille        = 15
	leavePerMille       = 4
)

// request is a heartbeat: member id, epoch and owned partitions (nil when
// the client leaves the field null).
type request struct {
	client   *client
	sequence int
	memberID string
	epoch    int32
	owned    assignor.Assignment
}

type response struct {
	sequence int
	err      error
	epoch    int32
	assigned assignor.Assignment
}

type message struct {
	due      int
	request  *request
	response *response
	client   *client
}

type client struct {
	name      string
	memberID  string
	topics    []string
	epoch     int32
	owned     assignor.Assignment // consumed now
	leaving   bool                // sending epoch -1 until answered
	rejoin    bool                // after the leave is answered, join again
	gone      bool
	sequence  int // of the request in flight, 0 when none
	sentAt    int
	incarnate int // counts member ids
}

type coordinator struct {
	in          rules.Rules
	partitions  map[string]int32
	groupEpoch  int32
	targetEpoch int32
	target      map[string]assignor.Assignment
	members     map[string]Member
	topics      map[string][]string
	owners      *Owners
}

type simulation struct {
	random      *rand.Rand
	now         int
	healed      bool
	coordinator *coordinator
	clients     []*client
	network     []message
	sequence    int
}

func newSimulation(seed uint64, in rules.Rules) *simulation {
	random := rand.New(rand.NewPCG(seed, 848))
	partitions := map[string]int32{}
	for t := range 1 + random.IntN(3) {
		partitions[fmt.Sprintf("topic-%d", t)] = int32(3 + random.IntN(10))
	}
	return &simulation{random: random, coordinator: &coordinator{in: in, partitions: partitions,
		target: map[string]assignor.Assignment{}, members: map[string]Member{}, topics: map[string][]string{}, owners: NewOwners()}}
}

// run steps the simulation and returns the first violation, or "".
func (s *simulation) run() string {
	for s.now = 0; s.now < simulationTicks+healTicks; s.now++ {
		s.healed = s.now >= simulationTicks
		s.maybeChangeMembership()
		for _, c := range s.clients {
			s.maybeSend(c)
		}
		// Clients take partitions only in receive, during deliver; it
		// is enough to look after a step that delivered an answer.
		if !s.deliver() {
			continue
		}
		if violation := s.twoOwners(); violation != "" {
			return fmt.Sprintf("tick %d: %s", s.now, violation)
		}
	}
	return s.converged()
}

func (s *simulation) maybeChangeMembership() {
	if s.healed {
		return
	}
	live := 0
	for _, c := range s.clients {
		if !c.gone {
			live++
		}
	}
	if live < maximumClients && s.random.IntN(1000) < joinPerMille {
		c := &client{name: fmt.Sprintf("client-%d", len(s.clients)), owned: assignor.Assignment{}}
		for topic := range s.coordinator.partitions {
			if topic == "topic-0" || s.random.IntN(3) != 0 {
				c.topics = append(c.topics, topic)
			}
		}
		slices.Sort(c.topics)
		c.memberID = c.name + "/0"
		s.clients = append(s.clients, c)
	}
	for _, c := range s.clients {
		if !c.gone && !c.leaving && s.random.IntN(1000) < leavePerMille {
			c.owned, c.leaving = assignor.Assignment{}, true // stop consuming, then say so
		}
	}
}

// maybeSend sends a heartbeat when none is in flight; an unanswered one
// times out, and its answer, if it ever comes, is dropped with the
// connection.
func (s *simulation) maybeSend(c *client) {
	if c.gone {
		return
	}
	if c.sequence != 0 {
		if s.now-c.sentAt < requestTimeoutTicks {
			return
		}
		c.sequence = 0
	}
	if !c.leaving && s.random.IntN(100) >= heartbeatPercent {
		return
	}
	s.sequence++
	c.sequence, c.sentAt = s.sequence, s.now
	r := &request{client: c, sequence: s.sequence, memberID: c.memberID, epoch: c.epoch, owned: c.owned.Normalized()}
	if c.leaving {
		r.epoch = -1
	} else if c.epoch > 0 && s.random.IntN(100) < omitOwnedPercent {
		r.owned = nil
	}
	s.send(message{request: r})
}

func (s *simulation) send(m message) {
	if !s.healed && s.random.IntN(100) < lossPercent {
		return
	}
	m.due = s.now + 1 + s.random.IntN(maximumDelayTicks)
	s.network = append(s.network, m)
}

// deliver hands over the messages due and reports whether a client got
// an answer.
func (s *simulation) deliver() (answered bool) {
	var later []message
	count := len(s.network)
	for _, m := range s.network[:count] {
		switch {
		case m.due > s.now:
			later = append(later, m)
		case m.request != nil:
			answer := s.coordinator.heartbeat(m.request)
			s.send(message{response: &answer, client: m.request.client})
		default:
			m.client.receive(*m.response)
			answered = true
		}
	}
	s.network = append(later, s.network[count:]...)
	return answered
}

// receive applies an answer to the request in flight: revoke what it does
// not list, then take what it adds.
func (c *client) receive(answer response) {
	if answer.sequence != c.sequence {
		return // the request timed out; its connection is gone
	}
	c.sequence = 0
	switch {
	case c.leaving && answer.epoch != -1:
		// the answer to a heartbeat sent before the client decided to
		// leave: it consumes nothing now and sends the leave next
	case c.leaving:
		c.leaving, c.epoch = false, 0
		c.gone = !c.rejoin
		c.rejoin = false
		c.incarnate++
		c.memberID = fmt.Sprintf("%s/%d", c.name, c.incarnate)
	case errors.Is(answer.err, kerr.FencedMemberEpoch) || errors.Is(answer.err, kerr.UnknownMemberID):
		c.owned, c.leaving, c.rejoin = assignor.Assignment{}, true, true // partitions lost
	case answer.err != nil:
		panic(answer.err)
	default:
		c.epoch = answer.epoch
		c.owned = answer.assigned.Normalized()
	}
}

// heartbeat is the minimal coordinator: epoch checks, group epoch bumps on
// membership changes, the uniform target, then reconciliation.
func (g *coordinator) heartbeat(r *request) response {
	answer := response{sequence: r.sequence}
	member, known := g.members[r.memberID]
	switch {
	case r.epoch == -1:
		if known {
			g.owners.Remove(r.memberID, member)
			delete(g.members, r.memberID)
			delete(g.topics, r.memberID)
			g.groupEpoch++
		}
		answer.epoch = -1
		return answer
	case r.epoch == 0 && !known:
		member = Member{State: Stable, Assigned: assignor.Assignment{}, PendingRevocation: assignor.Assignment{}}
		g.members[r.memberID], g.topics[r.memberID] = member, r.client.topics
		g.groupEpoch++
	case !known:
		answer.err = kerr.UnknownMemberID
		return answer
	case r.epoch != 0:
		if err := ValidateEpoch(member, r.epoch, r.owned); err != nil {
			answer.err = err
			return answer
		}
	}
	g.maybeUpdateTarget()
	next, err := Next(member, Heartbeat{TargetEpoch: g.targetEpoch, Target: g.target[r.memberID], Owned: r.owned,
		Owners: g.owners, MemberID: r.memberID}, g.in)
	if err != nil {
		answer.err = err
		return answer
	}
	if taken := g.owners.Update(r.memberID, member, next); len(taken) > 0 && g.in.On(rules.RevokeBeforeAssign) {
		panic(fmt.Sprintf("coordinator: %s claimed partitions another member owns: %v", r.memberID, taken))
	}
	g.members[r.memberID] = next
	answer.epoch, answer.assigned = next.MemberEpoch, next.Assigned
	return answer
}

func (g *coordinator) maybeUpdateTarget() {
	if g.groupEpoch == g.targetEpoch {
		return
	}
	spec := specOf(g)
	target, err := assignor.UniformAssignor{}.Assign(spec)
	if err != nil {
		panic(err)
	}
	g.target, g.targetEpoch = target, g.groupEpoch
}

// specOf is the assignor's input: the members in id order, each holding
// its part of the previous target.
func specOf(g *coordinator) assignor.Spec {
	spec := assignor.Spec{Partitions: g.partitions}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		spec.Members = append(spec.Members, assignor.Member{ID: id, Topics: g.topics[id], Current: g.target[id]})
	}
	return spec
}

// twoOwners returns a partition two clients consume at once, or "".
func (s *simulation) twoOwners() string {
	owners := map[topicPartition]string{}
	for _, c := range s.clients {
		for topic, partitions := range c.owned {
			for _, partition := range partitions {
				key := topicPartition{topic, partition}
				if other, ok := owners[key]; ok {
					return fmt.Sprintf("%s-%d consumed by %s and %s at once", topic, partition, other, c.memberID)
				}
				owners[key] = c.memberID
			}
		}
	}
	return ""
}

// converged returns "" when, after the healing phase, every partition a
// client subscribes to is consumed by one of them and every member is
// stable at the target epoch.
func (s *simulation) converged() string {
	wanted := map[string]bool{}
	for _, c := range s.clients {
		if c.gone {
			continue
		}
		for _, topic := range c.topics {
			for partition := range s.coordinator.partitions[topic] {
				wanted[fmt.Sprintf("%s-%d", topic, partition)] = true
			}
		}
	}
	for _, c := range s.clients {
		for _, topic := range c.owned.Topics() {
			for _, partition := range c.owned[topic] {
				delete(wanted, fmt.Sprintf("%s-%d", topic, partition))
			}
		}
	}
	if len(wanted) > 0 {
		return fmt.Sprintf("after healing, %d partitions have no consumer", len(wanted))
	}
	for id, member := range s.coordinator.members {
		if member.State != Stable || member.MemberEpoch != s.coordinator.targetEpoch {
			return fmt.Sprintf("after healing, member %s is %s at epoch %d, target %d", id, member.State, member.MemberEpoch, s.coordinator.targetEpoch)
		}
	}
	return ""
}

// simulationSeeds is 300, or 60 with -short (CI's race detector run).
func simulationSeeds() uint64 {
	if testing.Short() {
		return 60
	}
	return 300
}

// TestNoPartitionHasTwoOwners runs 300 seeded simulations: none may show a
// partition consumed by two members at once, and each must converge once
// the network heals.
func TestNoPartitionHasTwoOwners(t *testing.T) {
	for seed := range simulationSeeds() {
		if violation := newSimulation(seed, rules.Rules{}).run(); violation != "" {
			t.Fatalf("seed %d: %s", seed, violation)
		}
	}
}

// TestWithoutRevokeBeforeAssignTwoMembersOwnAPartition switches the rule
// off: the same simulations must find two owners, or the check proves
// nothing.
func TestWithoutRevokeBeforeAssignTwoMembersOwnAPartition(t *testing.T) {
	legacy := rules.Rules{}.Without(rules.RevokeBeforeAssign)
	found, seeds := 0, simulationSeeds()
	for seed := range seeds {
		if violation := newSimulation(seed, legacy).run(); strings.Contains(violation, "at once") {
			found++
		}
	}
	t.Logf("two owners found in %d of %d runs", found, seeds)
	if found < int(seeds) {
		t.Fatalf("two owners found in only %d of %d runs with revoke-before-assign off", found, seeds)
	}
}
