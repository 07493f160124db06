package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// The KIP-848 members of the group workload: consumerMembers clients of
// one consumer group (sim-consumers) speak ConsumerGroupHeartbeat to the
// brokers through the simulated network, as franz-go's and the Java
// client's consumer protocol does: they join (member epoch 0, a member id
// they make up from v1 on, KIP-1082), heartbeat at the interval the
// coordinator gives, take the assignment each answer carries (the
// server-side assignor's), release what it no longer holds and say so in
// their next heartbeat, fetch the committed offsets of what they gain,
// consume (their position moves on), commit with their member epoch,
// describe the group (ConsumerGroupDescribe), leave (epoch -1), crash (a
// new process, a new member id, answers to the old one dropped) and pause
// (a zombie that wakes up after its session may have expired).
//
// What the checker makes of it:
//
//   - InvariantTwoOwners: a member owns a partition from the heartbeat
//     answer that assigns it until it sends the heartbeat that no longer
//     lists it (or crashes, leaves, or learns it was fenced). When a
//     partition is assigned to a member while another owns it, the other
//     is suspected; if the other's next request, sent while it still owns
//     the partition, is accepted (a heartbeat or a commit answered 0: the
//     coordinator still takes it as a member at its epoch), two live
//     members owned the partition at once: rule revoke-before-assign
//     broken. A zombie the coordinator fenced meanwhile is answered
//     FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID and is excused, as Kafka's
//     protocol excuses it: its commits are refused. ConsumerGroupDescribe
//     answers must not show a partition in two members' assignments.
//   - InvariantCommitLost: a member that gains a partition fetches its
//     committed offset, which must be at least every commit of the
//     partition acknowledged before the fetch was sent (a commit is
//     acknowledged only once committed, and the previous owner's commits
//     precede its release, which precedes the new assignment, in the log).

// InvariantTwoOwners is a partition owned by two live members of a
// consumer group at once.
const InvariantTwoOwners = "partition-two-owners"

// Settings of the KIP-848 members.
const (
	consumerStream   = 0x6b6970383438 // "kip848"
	consumerMembers  = 3
	simConsumerGroup = "sim-consumers"
	// consumerActRate is the chance per tick that an idle member does
	// something besides its due heartbeat.
	consumerActRate = 0.03
	// consumerCrashRate and consumerPauseRate are the chances per act that
	// a member crashes or pauses (a zombie).
	consumerCrashRate = 0.012
	consumerPauseRate = 0.012
	// The coordinators' KIP-848 timers in the simulator: members heartbeat
	// every half second and are fenced after six silent seconds, so that
	// pauses and crashes expire sessions within a run.
	consumerHeartbeatIntervalMs = 500
	consumerSessionTimeoutMs    = 6000
	consumerRebalanceTimeoutMs  = 3000
)

// partitionClaim is a member's ownership of one partition: since when, and
// the members that were given it since (suspects).
type partitionClaim struct {
	since    int64
	suspects []string
}

// consumerMember is one KIP-848 member.
type consumerMember struct {
	index       int
	address     address
	incarnation int
	memberID    string
	epoch       int32
	coordinator metadata.BrokerID
	waiting     bool
	nextAt      int64
	heartbeatAt int64
	pausedUntil int64
	// owned are the partitions of the workload topic the member consumes;
	// releasing those it was told to give up and has not yet said so in a
	// heartbeat (it still owns them until then); fetching those whose
	// committed offset it has not yet fetched.
	owned     map[int32]*partitionClaim
	releasing map[int32]*partitionClaim
	fetching  []int32
	position  map[int32]int64
	// full is set when the member's last request failed or was refused:
	// its next heartbeat sends every field (rebalance timeout,
	// subscription, owned partitions), as the Java client's and
	// franz-go's do, so that the coordinator answers with its whole
	// assignment, which a lost answer may have carried (Kafka answers
	// a partial heartbeat with an assignment only when it changed).
	full bool
}

// consumerLoad is the KIP-848 members, their random stream, and the
// offsets commits of their group acknowledged per partition.
type consumerLoad struct {
	members []*consumerMember
	random  *rand.Rand
	floor   map[int32]int64
}

func newConsumerLoad(w *world) *consumerLoad {
	load := &consumerLoad{random: rand.New(rand.NewPCG(w.options.Seed, consumerStream)), floor: map[int32]int64{}}
	for i := range consumerMembers {
		m := &consumerMember{index: i, address: clientAddress(1<<17 + 64 + i)}
		m.reset()
		load.members = append(load.members, m)
	}
	return load
}

// reset is a member's state when its process starts: no id, no epoch, no
// partitions.
func (m *consumerMember) reset() {
	m.incarnation++
	m.memberID = fmt.Sprintf("sim-consumer-%d-incarnation-%d", m.index, m.incarnation)
	m.epoch, m.coordinator, m.waiting = 0, 0, false
	m.owned, m.releasing, m.fetching, m.position = map[int32]*partitionClaim{}, map[int32]*partitionClaim{}, nil, map[int32]int64{}
}

// String names a member in traces.
func (m *consumerMember) String() string { return fmt.Sprintf("%s/%s", simConsumerGroup, m.memberID) }

// consumerStep lets each member act: its heartbeat when due, now and then
// something else.
func (w *world) consumerStep() {
	load := w.consumers
	for _, m := range load.members {
		if m.waiting || w.now < m.nextAt || w.now < m.pausedUntil {
			continue
		}
		due := w.now >= m.heartbeatAt || len(m.releasing) > 0
		acts := !w.membersOnly && load.random.Float64() < consumerActRate
		switch {
		case m.coordinator == 0:
			w.findConsumerCoordinator(m)
		case len(m.fetching) > 0:
			w.fetchConsumerOffsets(m)
		case due:
			w.consumerHeartbeat(m, m.epoch)
		case acts:
			w.consumerAct(m)
		}
	}
}

// consumerAct is a member's occasional action.
func (w *world) consumerAct(m *consumerMember) {
	load := w.consumers
	switch draw := load.random.Float64(); {
	case draw < consumerCrashRate:
		w.trace("%s crashes", m)
		w.stats.consumerCrashes++
		m.reset()
		m.nextAt = w.now + 50 + load.random.Int64N(200)
	case draw < consumerCrashRate+consumerPauseRate:
		m.pausedUntil = w.now + 200 + load.random.Int64N(1000)
		w.trace("%s pauses until tick %d", m, m.pausedUntil)
		w.stats.consumerPauses++
	case draw < 0.07 && m.epoch > 0:
		m.releaseAll()
		w.consumerHeartbeat(m, -1)
	case draw < 0.17:
		w.describeConsumerGroup(m)
	default:
		for _, partition := range sortedClaims(m.owned) {
			m.position[partition] += 1 + load.random.Int64N(5) // consumed some records
		}
		w.commitConsumerOffsets(m)
	}
}

// releaseAll ends every claim of the member: it crashes, leaves or learns
// it was fenced.
func (m *consumerMember) releaseAll() {
	m.owned, m.releasing, m.fetching, m.position = map[int32]*partitionClaim{}, map[int32]*partitionClaim{}, nil, map[int32]int64{}
}

// sendConsumer sends a member's request to to; answered gets the
// response, unless the request failed (the member looks for its
// coordinator again) or the member's process is no longer the one that
// sent it.
func (w *world) sendConsumer(m *consumerMember, to metadata.BrokerID, request kmsg.Request, answered func(kmsg.Response)) {
	incarnation := m.incarnation
	m.waiting = true
	sent := w.client(m.address).send(to, request, func(response kmsg.Response, ok bool) {
		if m.incarnation != incarnation {
			return // a crashed process's answer
		}
		m.waiting = false
		if !ok {
			m.coordinator, m.nextAt, m.full = 0, w.now+groupRetryTicks, true
			return
		}
		answered(response)
	})
	if !sent {
		m.waiting = false
		m.coordinator, m.nextAt, m.full = 0, w.now+groupRetryTicks, true
	}
}

func (w *world) findConsumerCoordinator(m *consumerMember) {
	request := kmsg.NewPtrFindCoordinatorRequest()
	request.Version = int16(4 + w.consumers.random.IntN(3))
	request.CoordinatorKeys = []string{simConsumerGroup}
	to := metadata.BrokerID(1 + w.consumers.random.IntN(len(w.brokers)))
	w.sendConsumer(m, to, request, func(answer kmsg.Response) {
		response := answer.(*kmsg.FindCoordinatorResponse)
		if len(response.Coordinators) != 1 || response.Coordinators[0].ErrorCode != 0 || response.Coordinators[0].NodeID < 1 {
			m.nextAt = w.now + groupRetryTicks
			return
		}
		m.coordinator = metadata.BrokerID(response.Coordinators[0].NodeID)
	})
}

// handleConsumerCode does what a KIP-848 client does on an error code and
// reports whether it was 0.
func (m *consumerMember) handleConsumerCode(w *world, code int16) bool {
	switch code {
	case 0:
		return true
	}
	m.full = true
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		m.coordinator = 0
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		// Fenced: everything it owned is lost (onPartitionsLost), and it
		// joins again with the same member id.
		w.trace("%s is fenced (%s) at epoch %d", m, kerr.ErrorForCode(code), m.epoch)
		w.stats.consumerFences++
		m.releaseAll()
		m.epoch = 0
	}
	m.nextAt = w.now + groupRetryTicks
	return false
}

// twoOwnersEvidence lists the member's partitions that were given to
// another member while it owned them.
func (m *consumerMember) twoOwnersEvidence() []string {
	var evidence []string
	for _, claims := range []map[int32]*partitionClaim{m.owned, m.releasing} {
		for _, partition := range sortedClaims(claims) {
			claim := claims[partition]
			if len(claim.suspects) > 0 {
				evidence = append(evidence, fmt.Sprintf("%s-%d (owned since tick %d, given to %v)", workloadTopic, partition, claim.since, claim.suspects))
			}
		}
	}
	return evidence
}

// checkTwoOwners fails the run when a member's request was accepted while
// it owned a partition given to another member (evidence, taken when the
// request was sent).
func (w *world) checkTwoOwners(m *consumerMember, what string, evidence []string) {
	if len(evidence) > 0 {
		w.checker.fail(InvariantTwoOwners, "%s's %s at epoch %d was accepted while another member had been given its partitions: %v",
			m, what, m.epoch, evidence)
	}
}

func sortedClaims(claims map[int32]*partitionClaim) []int32 {
	partitions := make([]int32, 0, len(claims))
	for partition := range claims {
		partitions = append(partitions, partition)
	}
	slices.Sort(partitions)
	return partitions
}
