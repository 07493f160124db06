package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/replica"
)

// Lifecycle is a broker's side of the controller protocol, without I/O:
// it registers the incarnation, heartbeats, follows the active controller
// through NOT_CONTROLLER hints, hands the metadata its answers carry to
// the node, sends the node's ISR proposals, and runs the broker's part of
// a controlled shutdown. Ticks and answers come in; requests go out in
// TakeRequests. The front end (internal/frontend) drives it in tide serve,
// the simulator directly; both run this same code.
//
// Answers from a controller epoch older than one already seen are dropped:
// they come from a controller that has since lost its leadership.
type Lifecycle struct {
	config LifecycleConfig
	now    int64
	// epoch is the registered incarnation's, NoBrokerEpoch before.
	epoch metadata.BrokerEpoch
	node  *Node
	// target is the controller requests go to; it follows hints and, with
	// none, moves round the voters.
	target          metadata.BrokerID
	controllerEpoch uint64
	// inFlight is the registration or heartbeat awaiting its answer.
	inFlight *sentRequest
	// poll is the metadata fetch awaiting its answer (rule
	// poll-again-at-once); pollAt the tick the next may go.
	poll          *sentRequest
	pollAt        int64
	lastHeartbeat int64
	// lastAnswer is the tick of the last answer from an active controller.
	lastAnswer int64
	// monotonicMs is the runtime's monotonic clock (SetMonotonicClock), -1
	// until it gives one; leaseFromMs is when the last heartbeat the
	// controller acknowledged (this incarnation unfenced) was sent, on that
	// clock, -1 before one was (rule coordinator-lease).
	monotonicMs, leaseFromMs int64
	nextID                   uint64
	// alters are the ISR proposals sent and not answered, by request id;
	// producerIDs the request for a block of producer ids, or 0.
	alters      map[uint64]replica.ISRChange
	producerIDs uint64
	outgoing    []Outgoing
	// shutdown is set once a controlled shutdown is asked for; fenced once
	// the controller has fenced this incarnation, which ends it.
	shutdown, fenced bool
}

// LifecycleConfig configures a Lifecycle.
type LifecycleConfig struct {
	ID metadata.BrokerID
	// Incarnation names this process start, unique per start.
	Incarnation string
	// PreviousEpoch is the epoch of the last incarnation if it shut down
	// cleanly (its log is whole), or NoBrokerEpoch (KIP-966).
	PreviousEpoch metadata.BrokerEpoch
	// Endpoint is where clients reach this broker's Kafka listener,
	// registered with the controller so every broker's Metadata lists it;
	// empty in the simulator.
	Endpoint string
	Voters   []metadata.BrokerID
	// HeartbeatTicks is the heartbeat interval; RequestTimeoutTicks how
	// long an answer may take before the request goes to the next voter.
	HeartbeatTicks      int64
	RequestTimeoutTicks int64
	// MaxEntries bounds the metadata entries one answer carries.
	MaxEntries int
	// MetadataWaitTicks, when positive, has the broker learn metadata by
	// long poll (quorum.FetchMetadataRequest), each fetch held by the
	// controller up to this long; 0 leaves it to the heartbeats.
	MetadataWaitTicks int64
	// NewNode creates the node once the incarnation has an epoch.
	NewNode func(metadata.BrokerEpoch) *Node
	// SessionLeaseMs is how long after sending a heartbeat the controller
	// acknowledges this broker may count on not being fenced: less than
	// the controller's session timeout by a margin for the two clocks'
	// drift (SessionLease). It must be positive.
	SessionLeaseMs int64
	// FirstRequestID numbers this incarnation's requests from here on. It
	// must differ between incarnations by more than any one makes: the
	// controller answers a broker id, not a connection, so an answer to a
	// request of the process that crashed can reach its successor, and
	// taken for its own it would hand it the old incarnation's epoch.
	FirstRequestID uint64
}

// Outgoing is a request for a controller.
type Outgoing struct {
	To      metadata.BrokerID
	Request quorum.Request
}

type sentRequest struct {
	id     uint64
	sentAt int64
	// sentAtMs is the monotonic clock when it was sent, -1 if unknown.
	sentAtMs int64
}

// NewLifecycle starts a broker's lifecycle; it registers on its first tick.
func NewLifecycle(config LifecycleConfig) (*Lifecycle, error) {
	if len(config.Voters) == 0 || config.HeartbeatTicks < 1 || config.RequestTimeoutTicks < 1 || config.NewNode == nil || config.Incarnation == "" ||
		config.SessionLeaseMs < 1 {
		return nil, errors.New("broker: lifecycle needs voters, an incarnation, a node constructor and positive intervals and lease")
	}
	return &Lifecycle{config: config, epoch: metadata.NoBrokerEpoch, target: config.Voters[0], alters: map[uint64]replica.ISRChange{},
		nextID: config.FirstRequestID, monotonicMs: -1, leaseFromMs: -1}, nil
}

// SessionLease is the lease a broker takes from a controller session of
// sessionTimeoutMs, whose clocks tick every tickMs: the session less a
// tenth of it for the drift of the broker's and the controller's clock
// rates, and at least two ticks for a controller tick that fires late and
// a request handled on a clock read a tick ago (rule coordinator-lease).
func SessionLease(sessionTimeoutMs, tickMs int64) int64 {
	return sessionTimeoutMs - max(sessionTimeoutMs/10, 2*tickMs)
}

// SetMonotonicClock gives the runtime's monotonic clock in milliseconds:
// one that never jumps and runs at the rate of the controller's ticks
// (tide serve's time since start, the simulator's virtual time). The
// session lease is measured on it.
func (l *Lifecycle) SetMonotonicClock(nowMs int64) { l.monotonicMs = nowMs }

// HoldsSessionLease reports whether the controller cannot yet have fenced
// this incarnation for a lapsed session: less than SessionLeaseMs has
// passed since it sent the last heartbeat the controller acknowledged
// unfenced. Until then only metadata this broker will learn moves its
// leaderships away; after it, a group coordinator must stop serving
// (rule coordinator-lease).
func (l *Lifecycle) HoldsSessionLease() bool {
	return l.leaseFromMs >= 0 && l.monotonicMs >= 0 && l.monotonicMs-l.leaseFromMs < l.config.SessionLeaseMs
}

// Node is the running node, nil until registered.
func (l *Lifecycle) Node() *Node { return l.node }

// Epoch is the incarnation's broker epoch, NoBrokerEpoch until registered.
func (l *Lifecycle) Epoch() metadata.BrokerEpoch { return l.epoch }

// Controller is where requests go now.
func (l *Lifecycle) Controller() metadata.BrokerID { return l.target }

// FetchMetadataSoon makes the next tick heartbeat, and so fetch the
// metadata that follows, without waiting for the interval: the environment
// calls it when it knows the controller committed something this broker
// should see at once (a topic a client just created and will produce to).
func (l *Lifecycle) FetchMetadataSoon() {
	l.lastHeartbeat = min(l.lastHeartbeat, l.now-l.config.HeartbeatTicks)
}

// BeginShutdown asks for a controlled shutdown: heartbeats ask for it
// until the controller has moved leadership away and fenced this
// incarnation (KAFKA-3670).
func (l *Lifecycle) BeginShutdown() { l.shutdown = true }

// ShutDown reports whether a controlled shutdown has completed.
func (l *Lifecycle) ShutDown() bool { return l.shutdown && l.fenced }

// TicksSinceAnswer is how long the active controller has not answered: a
// broker that cannot reach one cannot complete a controlled shutdown.
func (l *Lifecycle) TicksSinceAnswer() int64 { return l.now - l.lastAnswer }

// Tick advances time: it registers or heartbeats when due, retries a
// request whose answer is overdue at the next voter, and ticks the node.
func (l *Lifecycle) Tick() {
	l.now++
	if l.inFlight != nil && l.now-l.inFlight.sentAt >= l.config.RequestTimeoutTicks {
		l.inFlight = nil
		l.nextVoter()
	}
	switch {
	case l.inFlight != nil:
	case l.node == nil:
		l.send(quorum.Request{Register: &quorum.RegisterRequest{Incarnation: l.config.Incarnation, PreviousEpoch: l.config.PreviousEpoch,
			Endpoint: l.config.Endpoint}})
	case l.now-l.lastHeartbeat >= l.config.HeartbeatTicks:
		l.lastHeartbeat = l.now
		l.send(quorum.Request{Heartbeat: &quorum.HeartbeatRequest{Epoch: l.epoch, AppliedOffset: l.node.MetadataOffset(),
			WantShutdown: l.shutdown, MaxEntries: l.config.MaxEntries}})
	}
	l.maybePoll()
	if l.node != nil {
		l.node.Tick()
		l.Collect()
	}
}

func (l *Lifecycle) send(request quorum.Request) {
	l.nextID++
	request.ID, request.From = l.nextID, l.config.ID
	if request.Register != nil || request.Heartbeat != nil {
		l.inFlight = &sentRequest{id: request.ID, sentAt: l.now, sentAtMs: l.monotonicMs}
	}
	l.outgoing = append(l.outgoing, Outgoing{To: l.target, Request: request})
}

func (l *Lifecycle) nextVoter() {
	next := l.config.Voters[0]
	for i, id := range l.config.Voters {
		if id == l.target {
			next = l.config.Voters[(i+1)%len(l.config.Voters)]
			break
		}
	}
	l.retarget(next)
}

// retarget sends the next requests to another controller, and has the
// node's leaders resend their pending ISR changes to it at once.
func (l *Lifecycle) retarget(to metadata.BrokerID) {
	if to == l.target {
		return
	}
	l.target = to
	if l.node != nil {
		l.node.ControllerMoved()
	}
}

// Collect turns what the node has for the controller (ISR proposals, a
// request for producer ids) into requests. The environment calls it after
// every input to the node, before it empties the node's outbox.
func (l *Lifecycle) Collect() {
	if l.node == nil {
		return
	}
	for _, change := range l.node.TakeProposals() {
		item := controller.AlterPartitionItem{TopicPartition: change.Partition, LeaderEpoch: change.LeaderEpoch, PartitionEpoch: change.PartitionEpoch}
		for _, member := range change.NewISR {
			item.NewISR = append(item.NewISR, controller.BrokerIDAndEpoch{ID: member.ID, Epoch: member.Epoch})
		}
		l.send(quorum.Request{AlterPartition: &controller.AlterPartitionRequest{BrokerID: l.config.ID, BrokerEpoch: l.epoch,
			Partitions: []controller.AlterPartitionItem{item}}})
		l.alters[l.nextID] = change
	}
	if l.node.TakeAllocateProducerIDs() {
		l.send(quorum.Request{AllocateProducerIDs: &quorum.AllocateProducerIDsRequest{BrokerEpoch: l.epoch}})
		l.producerIDs = l.nextID
	}
}

// TakeRequests returns the requests to send, in order.
func (l *Lifecycle) TakeRequests() []Outgoing {
	out := l.outgoing
	l.outgoing = nil
	return out
}

// HandleAnswer takes a controller's answer. An error means the metadata it
// carried does not apply: the broker must stop.
func (l *Lifecycle) HandleAnswer(answer quorum.Answer) error {
	if answer.ControllerEpoch < l.controllerEpoch {
		if l.poll != nil && answer.ID == l.poll.id {
			l.poll = nil // poll the current controller instead
		}
		return nil // from a controller that has since lost its leadership
	}
	l.controllerEpoch = answer.ControllerEpoch
	if change, ok := l.alters[answer.ID]; ok {
		delete(l.alters, answer.ID)
		l.handleAlterAnswer(change, answer)
		return nil
	}
	if answer.ID == l.producerIDs && l.producerIDs != 0 {
		l.producerIDs = 0
		if l.node != nil {
			var block controller.ProducerIDBlock
			if answer.ProducerIDs != nil {
				block = *answer.ProducerIDs
			}
			l.node.HandleAllocateProducerIDsResponse(block.FirstProducerID, block.Length, answer.ErrorCode)
		}
		return nil
	}
	if l.poll != nil && answer.ID == l.poll.id {
		return l.handlePollAnswer(answer)
	}
	if l.inFlight == nil || answer.ID != l.inFlight.id {
		return nil // late: the request was retried since
	}
	sent := l.inFlight
	l.inFlight = nil
	if answer.ErrorCode != kerr.NotController.Code {
		l.lastAnswer = l.now
	}
	if answer.ErrorCode == kerr.NotController.Code {
		if answer.Leader != metadata.NoBroker && answer.Leader != l.target {
			l.retarget(answer.Leader)
		} else {
			l.nextVoter()
		}
		return nil
	}
	switch {
	case answer.Register != nil:
		return l.handleRegistered(answer)
	case answer.Heartbeat != nil:
		return l.handleHeartbeat(answer, sent.sentAtMs)
	}
	return nil
}

func (l *Lifecycle) handleRegistered(answer quorum.Answer) error {
	if answer.ErrorCode != 0 || l.node != nil {
		return nil // refused (a live previous incarnation): retried at the next tick
	}
	l.epoch = answer.Register.Epoch
	l.node = l.config.NewNode(l.epoch)
	l.lastHeartbeat = l.now - l.config.HeartbeatTicks
	return nil
}

// handleHeartbeat applies a heartbeat's answer. One that acknowledges the
// incarnation unfenced renews the session lease from when it was sent: the
// controller received it later, and counts the session from receipt.
func (l *Lifecycle) handleHeartbeat(answer quorum.Answer, sentAtMs int64) error {
	if answer.ErrorCode == kerr.StaleBrokerEpoch.Code {
		return fmt.Errorf("broker %d: the controller no longer knows incarnation %d", l.config.ID, l.epoch)
	}
	if answer.ErrorCode != 0 {
		return nil
	}
	heartbeat := answer.Heartbeat
	if err := l.applyMetadata(heartbeat); err != nil {
		return err
	}
	if l.shutdown && heartbeat.Fenced {
		l.fenced = true
	}
	complete := l.config.MaxEntries <= 0 || len(heartbeat.Entries) < l.config.MaxEntries
	if !complete {
		l.lastHeartbeat = l.now - l.config.HeartbeatTicks // more to fetch: ask again now
	}
	// Only an answer that brought everything the controller had committed
	// renews the lease: a fence committed before the heartbeat arrived (a
	// fenced broker that heartbeats caught up is unfenced again) moved the
	// leaderships away, and the broker must have learned that.
	if !heartbeat.Fenced && complete && sentAtMs >= 0 {
		l.leaseFromMs = max(l.leaseFromMs, sentAtMs)
	}
	return nil
}

// handleAlterAnswer turns the controller's answer into the replica's.
func (l *Lifecycle) handleAlterAnswer(change replica.ISRChange, answer quorum.Answer) {
	response := replica.AlterPartitionResponse{Request: change, ErrorCode: answer.ErrorCode}
	if answer.ErrorCode == 0 && answer.AlterPartition != nil {
		response.ErrorCode = answer.AlterPartition.ErrorCode
		if response.ErrorCode == 0 && len(answer.AlterPartition.Partitions) == 1 {
			result := answer.AlterPartition.Partitions[0]
			response.ErrorCode = result.ErrorCode
			if result.ErrorCode == 0 {
				state := result.Partition.Clone()
				response.State = &state
			}
		}
	}
	if l.node != nil {
		l.node.HandleAlterPartitionResponse(change.Partition, response)
	}
}

// applyMetadata applies the committed metadata a heartbeat or a metadata
// fetch carried. The two may overlap (both ask from the offset applied when
// they were sent): the node skips entries it has applied, and a snapshot
// no newer than the node's image is not loaded, so metadata never goes back.
func (l *Lifecycle) applyMetadata(answer *quorum.HeartbeatAnswer) error {
	if answer.Snapshot != nil {
		img, err := metadata.DecodeImage(answer.Snapshot)
		if err != nil {
			return fmt.Errorf("broker %d: metadata snapshot: %w", l.config.ID, err)
		}
		if img.Offset() > l.node.MetadataOffset() {
			if err := l.node.LoadImage(img); err != nil {
				return err
			}
		}
	}
	if err := l.node.ApplyMetadata(answer.Entries); err != nil {
		return err
	}
	if answer.Snapshot == nil && (l.config.MaxEntries <= 0 || len(answer.Entries) < l.config.MaxEntries) {
		return l.node.MarkCaughtUp()
	}
	return nil
}

// maybePoll sends a metadata fetch when long poll is on, the node runs, and
// none is out. Rule poll-again-at-once: after an answer the next fetch goes
// at the same tick (HandleAnswer), so the broker always has one held at the
// controller and learns a committed record one round trip after it
// commits, not at its next heartbeat (a topic just created through another
// broker would be UNKNOWN_TOPIC_OR_PARTITION here meanwhile). A fetch that
// gets no answer within its wait plus the request timeout is given up and
// sent again.
func (l *Lifecycle) maybePoll() {
	wait := l.config.MetadataWaitTicks
	if wait <= 0 || l.node == nil {
		return
	}
	if l.poll != nil && l.now-l.poll.sentAt >= wait+l.config.RequestTimeoutTicks {
		l.poll = nil
	}
	if l.poll != nil || l.now < l.pollAt {
		return
	}
	l.nextID++
	request := quorum.Request{ID: l.nextID, From: l.config.ID, FetchMetadata: &quorum.FetchMetadataRequest{Epoch: l.epoch,
		AppliedOffset: l.node.MetadataOffset(), MaxEntries: l.config.MaxEntries, MaxWaitTicks: wait}}
	l.poll = &sentRequest{id: request.ID, sentAt: l.now}
	l.outgoing = append(l.outgoing, Outgoing{To: l.target, Request: request})
}

// handlePollAnswer applies a metadata fetch's answer and polls again: at
// once after metadata, at the next tick after NOT_CONTROLLER (following
// the hint), a heartbeat interval later after any other error (the
// heartbeats deal with a stale epoch).
func (l *Lifecycle) handlePollAnswer(answer quorum.Answer) error {
	l.poll = nil
	switch {
	case answer.ErrorCode == kerr.NotController.Code:
		l.pollAt = l.now + l.config.HeartbeatTicks // no hint: the heartbeats look for the controller
		if answer.Leader != metadata.NoBroker && answer.Leader != l.target {
			l.retarget(answer.Leader)
			l.pollAt = l.now + 1
		}
		return nil
	case answer.ErrorCode != 0 || answer.Heartbeat == nil || l.node == nil:
		l.pollAt = l.now + l.config.HeartbeatTicks
		return nil
	}
	l.lastAnswer = l.now
	if err := l.applyMetadata(answer.Heartbeat); err != nil {
		return err
	}
	l.maybePoll()
	return nil
}
