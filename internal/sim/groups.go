package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
)

// The group workload: consumer-group clients that speak the group APIs to
// the brokers through the simulated network, as a client library does,
// so that every group API tide serves runs in the simulator through the
// front end and its coordinators, under the run's faults.
//
//   - groupMembers members of one classic group find their coordinator
//     (FindCoordinator), join (MEMBER_ID_REQUIRED, then JoinGroup again),
//     sync (the leader hands out the workload topic's partitions), then
//     heartbeat, commit, fetch their offsets, describe and list groups,
//     now and then leave, delete the group (NON_EMPTY_GROUP while the
//     other is in it) or its offsets of the workload topic, and join again.
//   - A simple consumer (generation -1, no membership, as kcat's offset
//     store or a Connect sink commits) commits increasing offsets of the
//     workload topic's partition 0 one at a time in its own group and
//     fetches them back. Its group is never reset or deleted, so what
//     OffsetFetch answers must never fall below an offset a commit was
//     acknowledged with, or below one a fetch already answered
//     (InvariantCommitLost): an OffsetCommit answered OK is a write like
//     any other (rule answer-after-commit), and a coordinator serves only
//     what the log keeps (rule load-committed-only).
//
// Its draws come from a stream of its own, so that its choices do not
// shift the faults' draws of a seed (its requests still change the
// network's timings).

// InvariantCommitLost is an acknowledged offset commit lost, or committed
// offsets going back without a reset.
const InvariantCommitLost = "offset-commit-lost"

// Settings of the group workload.
const (
	groupStream  = 0x67726f757073 // "groups"
	groupMembers = 2
	// groupActRate is the chance per tick that an idle group client acts.
	groupActRate = 0.05
	// groupRetryTicks is how long a client backs off after an error.
	groupRetryTicks = 20
	// groupSessionTimeoutMs is the members' session timeout, the least a
	// coordinator takes: heartbeats every few hundred ticks keep them in.
	groupSessionTimeoutMs = 6000
	simGroup              = "sim-group"
	simSimpleGroup        = "sim-simple"
	// offsetsTopicPartitions is __consumer_offsets' partition count in the
	// simulator: two, so that groups live on different coordinators and
	// the split of multi-group requests runs.
	offsetsTopicPartitions = 2
)

// memberPhase is where a group client is.
type memberPhase int8

const (
	phaseFind memberPhase = iota
	phaseJoin
	phaseSync
	phaseStable
	phaseLeft
)

// groupClient is one simulated group client.
type groupClient struct {
	address     address
	group       string
	simple      bool
	phase       memberPhase
	coordinator metadata.BrokerID
	memberID    string
	generation  int32
	leader      bool
	members     []string
	waiting     bool
	nextAt      int64
	// nextOffset is the next offset the simple consumer commits; floor the
	// least offset a fetch may answer (the highest acknowledged or
	// answered so far).
	nextOffset int64
	floor      int64
}

// groupLoad is the group workload's clients and its random stream.
type groupLoad struct {
	clients []*groupClient
	random  *rand.Rand
}

func newGroupLoad(w *world) *groupLoad {
	load := &groupLoad{random: rand.New(rand.NewPCG(w.options.Seed, groupStream))}
	for i := range groupMembers {
		load.clients = append(load.clients, &groupClient{address: clientAddress(1<<17 + i), group: simGroup, floor: -1})
	}
	load.clients = append(load.clients, &groupClient{address: clientAddress(1<<17 + groupMembers), group: simSimpleGroup, simple: true, floor: -1})
	return load
}

// groupStep lets each idle group client act, now and then.
func (w *world) groupStep() {
	load := w.groups
	for _, c := range load.clients {
		if c.waiting || w.now < c.nextAt || load.random.Float64() >= groupActRate {
			continue
		}
		switch c.phase {
		case phaseFind:
			w.findCoordinator(c)
		case phaseJoin:
			w.joinGroup(c)
		case phaseSync:
			w.syncGroup(c)
		case phaseLeft:
			w.afterLeave(c)
		default:
			w.stableAction(c)
		}
	}
}

// sendGroup sends a group request to the client's coordinator; answered
// gets the response, or nil when the request failed (then the client looks
// for its coordinator again).
func (w *world) sendGroup(c *groupClient, to metadata.BrokerID, request kmsg.Request, answered func(kmsg.Response)) {
	c.waiting = true
	sent := w.client(c.address).send(to, request, func(response kmsg.Response, ok bool) {
		c.waiting = false
		if !ok {
			c.retry(w, phaseFind)
			return
		}
		answered(response)
	})
	if !sent {
		c.waiting = false
		c.retry(w, phaseFind)
	}
}

// retry backs the client off and puts it in phase.
func (c *groupClient) retry(w *world, phase memberPhase) {
	c.phase, c.nextAt = phase, w.now+groupRetryTicks
}

// handleGroupCode does what a client does on a group error code and
// reports whether the code was 0.
func (c *groupClient) handleGroupCode(w *world, code int16) bool {
	switch code {
	case 0:
		return true
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		c.retry(w, phaseFind)
	case kerr.UnknownMemberID.Code:
		c.memberID = ""
		c.retry(w, phaseJoin)
	case kerr.IllegalGeneration.Code, kerr.RebalanceInProgress.Code:
		c.retry(w, phaseJoin)
	default: // COORDINATOR_LOAD_IN_PROGRESS and the rest: again later
		c.nextAt = w.now + groupRetryTicks
	}
	if c.simple && c.phase != phaseFind {
		c.phase = phaseStable // a simple consumer never joins
	}
	return false
}

func (w *world) findCoordinator(c *groupClient) {
	load := w.groups
	request := kmsg.NewPtrFindCoordinatorRequest()
	request.Version = int16(load.random.IntN(7))
	request.CoordinatorKey, request.CoordinatorKeys = c.group, []string{c.group}
	to := metadata.BrokerID(1 + load.random.IntN(len(w.brokers)))
	w.sendGroup(c, to, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.FindCoordinatorResponse)
		code, node := response.ErrorCode, response.NodeID
		if response.Version >= 4 && len(response.Coordinators) == 1 {
			code, node = response.Coordinators[0].ErrorCode, response.Coordinators[0].NodeID
		}
		if code != 0 || node < 1 {
			c.retry(w, phaseFind)
			return
		}
		c.coordinator, c.phase = metadata.BrokerID(node), phaseJoin
		if c.simple {
			c.phase = phaseStable
		}
	})
}

func (w *world) joinGroup(c *groupClient) {
	load := w.groups
	request := kmsg.NewPtrJoinGroupRequest()
	request.Version = int16(4 + load.random.IntN(6))
	request.Group, request.MemberID, request.ProtocolType = c.group, c.memberID, "consumer"
	request.SessionTimeoutMillis, request.RebalanceTimeoutMillis = groupSessionTimeoutMs, 3000
	subscription := kmsg.NewConsumerMemberMetadata()
	subscription.Topics = []string{workloadTopic}
	protocol := kmsg.NewJoinGroupRequestProtocol()
	protocol.Name, protocol.Metadata = "range", subscription.AppendTo(nil)
	request.Protocols = append(request.Protocols, protocol)
	w.sendGroup(c, c.coordinator, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.JoinGroupResponse)
		if response.ErrorCode == kerr.MemberIDRequired.Code {
			c.memberID, c.nextAt = response.MemberID, w.now // join again at once, with the id
			return
		}
		if !c.handleGroupCode(w, response.ErrorCode) {
			return
		}
		c.memberID, c.generation, c.leader = response.MemberID, response.Generation, response.LeaderID == response.MemberID
		c.members = c.members[:0]
		for _, member := range response.Members {
			c.members = append(c.members, member.MemberID)
		}
		c.phase, c.nextAt = phaseSync, w.now
	})
}

func (w *world) syncGroup(c *groupClient) {
	request := kmsg.NewPtrSyncGroupRequest()
	request.Version = int16(w.groups.random.IntN(6))
	request.Group, request.MemberID, request.Generation = c.group, c.memberID, c.generation
	request.ProtocolType, request.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if c.leader {
		request.GroupAssignment = w.assignPartitions(c.members)
	}
	w.sendGroup(c, c.coordinator, request, func(answer kmsg.Response) {
		if c.handleGroupCode(w, answer.(*kmsg.SyncGroupResponse).ErrorCode) {
			c.phase = phaseStable
		}
	})
}

// assignPartitions deals the workload topic's partitions out to members
// in turn, as a range assignor would for one topic.
func (w *world) assignPartitions(members []string) []kmsg.SyncGroupRequestGroupAssignment {
	var assignments []kmsg.SyncGroupRequestGroupAssignment
	for i, member := range members {
		assignment := kmsg.NewConsumerMemberAssignment()
		topic := kmsg.NewConsumerMemberAssignmentTopic()
		topic.Topic = workloadTopic
		for p := i; p < w.shape.partitions; p += len(members) {
			topic.Partitions = append(topic.Partitions, int32(p))
		}
		assignment.Topics = append(assignment.Topics, topic)
		entry := kmsg.NewSyncGroupRequestGroupAssignment()
		entry.MemberID, entry.MemberAssignment = member, assignment.AppendTo(nil)
		assignments = append(assignments, entry)
	}
	return assignments
}

// stableAction is a member's (or the simple consumer's) next request.
func (w *world) stableAction(c *groupClient) {
	draw := w.groups.random.IntN(20)
	switch {
	case c.simple && draw < 10:
		w.commitOffset(c)
	case c.simple || draw < 3:
		w.fetchOffsets(c)
	case draw < 10:
		w.heartbeat(c)
	case draw < 14:
		w.commitOffset(c)
	case draw < 16:
		w.describeGroups(c)
	case draw < 18:
		w.listGroups(c)
	default:
		w.leaveGroup(c)
	}
}

func (w *world) heartbeat(c *groupClient) {
	request := kmsg.NewPtrHeartbeatRequest()
	request.Version = int16(w.groups.random.IntN(5))
	request.Group, request.MemberID, request.Generation = c.group, c.memberID, c.generation
	w.sendGroup(c, c.coordinator, request, func(answer kmsg.Response) {
		c.handleGroupCode(w, answer.(*kmsg.HeartbeatResponse).ErrorCode)
	})
}

// groupConfig is the brokers' coordinators' configuration: Kafka's, with
// the run's rules, no initial rebalance delay (a member that joins first
// is not made to wait three virtual seconds for the other), and KIP-848
// timers short enough for a run (groups_consumer.go).
func (w *world) groupConfig() *group.Config {
	config := group.DefaultConfig()
	config.InitialRebalanceDelayMs, config.Rules = 0, w.rules
	config.ConsumerHeartbeatIntervalMs, config.ConsumerSessionTimeoutMs = consumerHeartbeatIntervalMs, consumerSessionTimeoutMs
	return &config
}

// String names a group client in traces.
func (c *groupClient) String() string { return fmt.Sprintf("%s(%s)", c.group, c.address) }
