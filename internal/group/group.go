package group

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// groupState is a classic group's state (Kafka's ClassicGroupState).
type groupState int8

const (
	// stateEmpty: no members; offsets may expire.
	stateEmpty groupState = iota
	// statePreparingRebalance: members are (re)joining; the join phase ends
	// when all have, or at the rebalance timeout.
	statePreparingRebalance
	// stateCompletingRebalance: the join phase is over and the group waits
	// for the leader's assignment (SyncGroup).
	stateCompletingRebalance
	// stateStable: the assignment is persisted and every member has it.
	stateStable
	// stateDead: the group is being removed.
	stateDead
)

// String is Kafka's name of the state, as DescribeGroups and ListGroups
// show it.
func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// protocol is one of a member's supported protocols (for consumers, an
// assignor) with its subscription metadata.
type protocol struct {
	name     string
	metadata []byte
}

// parked is a request held for later: a JoinGroup until the join phase
// ends, a SyncGroup until the assignment is persisted.
type parked struct {
	request RequestID
	version int16
	// held is set while the request counts against MaxParkedRequests.
	held bool
}

// release stops counting a parked request against MaxParkedRequests.
func (c *Coordinator) release(park *parked) {
	if park.held {
		park.held = false
		c.parked--
	}
}

// member is one member of a classic group.
type member struct {
	id                 string
	instanceID         string // "" for a dynamic member
	clientID           string
	clientHost         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocolType       string
	protocols          []protocol
	assignment         []byte
	join               *parked
	sync               *parked
	// isNew is set from a member's first join until the join phase ends:
	// its session runs on the new-member join timeout instead.
	isNew bool
	// heartbeatDeadlineMs is when the member is removed unless it is heard
	// from (a heartbeat, a commit, a join or sync answered).
	heartbeatDeadlineMs int64
}

// metadataFor is the member's metadata for a protocol.
func (m *member) metadataFor(name string) []byte {
	for _, protocol := range m.protocols {
		if protocol.name == name {
			return protocol.metadata
		}
	}
	return nil
}

// group is a classic group's live state.
type group struct {
	id               string
	state            groupState
	stateTimestampMs int64
	protocolType     string
	protocol         string
	generation       int32
	leader           string
	members          map[string]*member
	instances        map[string]string // group.instance.id -> member id
	// pendingMembers are the ids handed out with MEMBER_ID_REQUIRED, with
	// the time each expires unless its member joins with it.
	pendingMembers map[string]int64
	// pendingSync are the members answered at the end of the join phase
	// that have not yet sent SyncGroup.
	pendingSync map[string]bool
	// initialRebalance is set while a rebalance that began in Empty waits
	// out group.initial.rebalance.delay.ms; newMemberAdded extends it.
	initialRebalance       bool
	newMemberAdded         bool
	initialRemainingMs     int64
	joinDeadlineMs         int64 // 0: no join phase timer
	syncDeadlineMs         int64 // 0: no pending-sync timer
	syncDeadlineGeneration int32
}

func newGroup(id string, nowMs int64) *group {
	return &group{id: id, state: stateEmpty, stateTimestampMs: nowMs, members: map[string]*member{}, instances: map[string]string{},
		pendingMembers: map[string]int64{}, pendingSync: map[string]bool{}}
}

// groupFromDurable makes the live group of a loaded one: Stable at its
// stored generation with its members, whose sessions start now, or Empty.
func groupFromDurable(id string, durable *durableGroup, config Config, nowMs int64) *group {
	group := newGroup(id, nowMs)
	metadata := durable.metadata
	if metadata == nil {
		return group
	}
	group.protocolType, group.generation, group.protocol, group.leader = metadata.protocolType, metadata.generation, metadata.protocol, metadata.leader
	if metadata.stateTimestampMs >= 0 {
		group.stateTimestampMs = metadata.stateTimestampMs
	}
	for _, stored := range metadata.members {
		if _, taken := group.members[stored.memberID]; taken || stored.memberID == "" || group.instances[stored.instanceID] != "" {
			continue // not a record Kafka or tide writes: the first holder of an id keeps it
		}
		member := &member{id: stored.memberID, instanceID: stored.instanceID, clientID: stored.clientID, clientHost: stored.clientHost,
			sessionTimeoutMs: stored.sessionTimeoutMs, rebalanceTimeoutMs: stored.rebalanceTimeoutMs, protocolType: metadata.protocolType,
			protocols: []protocol{{name: metadata.protocol, metadata: stored.subscription}}, assignment: stored.assignment,
			heartbeatDeadlineMs: nowMs + int64(stored.sessionTimeoutMs)}
		if member.rebalanceTimeoutMs < 0 {
			member.rebalanceTimeoutMs = member.sessionTimeoutMs
		}
		group.members[member.id] = member
		if member.instanceID != "" {
			group.instances[member.instanceID] = member.id
		}
	}
	if len(group.members) > 0 {
		group.state = stateStable
	}
	if _, ok := group.members[group.leader]; !ok {
		group.leader = ""
		if len(group.members) > 0 {
			group.leader = group.sortedMemberIDs()[0]
		}
	}
	return group
}

// earliestDeadlineMs is the group's next timer: a session, a pending
// member id, the join or the sync phase; MaxInt64 when none is set.
func (g *group) earliestDeadlineMs() int64 {
	earliest := int64(math.MaxInt64)
	for _, deadline := range g.pendingMembers {
		earliest = min(earliest, deadline)
	}
	for _, member := range g.members {
		earliest = min(earliest, member.heartbeatDeadlineMs)
	}
	for _, deadline := range []int64{g.joinDeadlineMs, g.syncDeadlineMs} {
		if deadline != 0 {
			earliest = min(earliest, deadline)
		}
	}
	return earliest
}

// transition moves the group to a state, stamping the time (the base of
// offset expiry once Empty).
func (g *group) transition(state groupState, nowMs int64) {
	g.state = state
	g.stateTimestampMs = nowMs
}

func (g *group) sortedMemberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// rebalanceTimeoutMs is the largest rebalance timeout of the members: how
// long the join and sync phases wait.
func (g *group) rebalanceTimeoutMs() int64 {
	var longest int32
	for _, member := range g.members {
		longest = max(longest, member.rebalanceTimeoutMs)
	}
	return int64(longest)
}

// canRebalance: a rebalance may start from Stable, CompletingRebalance and
// Empty.
func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

// allJoined: every member has a JoinGroup parked and no member id handed
// out is still to come back.
func (g *group) allJoined() bool {
	for _, member := range g.members {
		if member.join == nil {
			return false
		}
	}
	return len(g.pendingMembers) == 0
}

func (g *group) awaitingJoinCount() int {
	count := 0
	for _, member := range g.members {
		if member.join != nil {
			count++
		}
	}
	return count
}

// validateMember is Kafka's ClassicGroup.validateMember: an instance id no
// member has is UNKNOWN_MEMBER_ID, one held under another member id is
// FENCED_INSTANCE_ID (a zombie of a replaced static member), and an
// unknown member id is UNKNOWN_MEMBER_ID.
func (g *group) validateMember(memberID, instanceID string) int16 {
	if instanceID != "" {
		holder, ok := g.instances[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if holder != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols: an empty
// group takes any non-empty protocol type with at least one protocol;
// otherwise the type must match and one of the protocols must be supported
// by every member.
func (g *group) supportsProtocols(protocolType string, protocols []protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, candidate := range protocols {
		if g.supportedByAll(candidate.name, "") {
			return true
		}
	}
	return false
}

// supportedByAll reports whether every member but except supports name.
func (g *group) supportedByAll(name, except string) bool {
	for _, member := range g.members {
		if member.id != except && member.metadataFor(name) == nil && !hasProtocol(member.protocols, name) {
			return false
		}
	}
	return true
}

func hasProtocol(protocols []protocol, name string) bool {
	for _, protocol := range protocols {
		if protocol.name == name {
			return true
		}
	}
	return false
}

// selectProtocol chooses the next generation's protocol by vote, as Kafka
// does: the candidates are the protocols every member supports; each
// member votes for the first candidate in its own order; most votes wins.
// Kafka breaks a tie in hash-map order; tide takes the candidate the
// leader (or else the smallest member id) lists first, so the choice is
// deterministic.
func (g *group) selectProtocol() string {
	ids := g.sortedMemberIDs()
	if len(ids) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, id := range ids {
		for _, protocol := range g.members[id].protocols {
			if g.supportedByAll(protocol.name, "") {
				votes[protocol.name]++
				break
			}
		}
	}
	first := g.members[ids[0]]
	if leader, ok := g.members[g.leader]; ok {
		first = leader
	}
	best, bestVotes := "", 0
	for _, protocol := range first.protocols {
		if votes[protocol.name] > bestVotes {
			best, bestVotes = protocol.name, votes[protocol.name]
		}
	}
	for _, name := range sortedKeys(votes) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// metadataValue is the group's metadata record: each member's
// subscription for the chosen protocol and its assignment, and when the
// group entered its state (the base of offset expiry once Empty).
func (g *group) metadataValue() groupMetadata {
	value := groupMetadata{protocolType: g.protocolType, generation: g.generation, protocol: g.protocol, leader: g.leader, stateTimestampMs: g.stateTimestampMs}
	for _, id := range g.sortedMemberIDs() {
		member := g.members[id]
		value.members = append(value.members, persistedMember{memberID: id, instanceID: member.instanceID, clientID: member.clientID,
			clientHost: member.clientHost, rebalanceTimeoutMs: member.rebalanceTimeoutMs, sessionTimeoutMs: member.sessionTimeoutMs,
			subscription: member.metadataFor(g.protocol), assignment: member.assignment})
	}
	return value
}

// newMemberID is prefix-UUID as Kafka forms it (the client id, or the
// instance id of a static member), with a UUID drawn not from randomness
// but from the partition, this coordinator's incarnation (when it began
// serving, and how far it loaded) and a counter: unique across the
// partition's coordinators, and the same in every run of a simulation
// seed.
func (c *Coordinator) newMemberID(prefix string) string {
	c.memberCounter++
	var seed [24]byte
	binary.BigEndian.PutUint64(seed[0:], uint64(c.partition))
	binary.BigEndian.PutUint64(seed[8:], c.incarnation)
	binary.BigEndian.PutUint64(seed[16:], c.memberCounter)
	high, low := mix(seed[:12]), mix(seed[12:])
	return fmt.Sprintf("%s-%08x-%04x-%04x-%04x-%012x", prefix, uint32(high>>32), uint16(high>>16), uint16(high)&0x0fff|0x4000,
		uint16(low>>48)&0x3fff|0x8000, low&0xffffffffffff)
}

// mix is FNV-1a over bytes followed by a splitmix64 finaliser.
func mix(data []byte) uint64 {
	hash := uint64(14695981039346656037)
	for _, b := range data {
		hash ^= uint64(b)
		hash *= 1099511628211
	}
	hash ^= hash >> 30
	hash *= 0xbf58476d1ce4e5b9
	hash ^= hash >> 27
	hash *= 0x94d049bb133111eb
	return hash ^ hash>>31
}

// answerParked answers every parked JoinGroup and SyncGroup of the group
// with one error.
func (g *group) answerParked(c *Coordinator, errorCode int16) {
	for _, id := range g.sortedMemberIDs() {
		member := g.members[id]
		if member.join != nil {
			c.answerJoinError(member.join, member.id, errorCode)
			member.join = nil
		}
		if member.sync != nil {
			c.answerSync(member.sync, errorCode, g, nil)
			member.sync = nil
		}
	}
}
