// Package quorum is tide's metadata quorum: the cluster metadata log
// replicated by etcd/raft (go.etcd.io/raft/v3), and the controller that
// runs on the raft leader, deciding with the pure decisions of
// internal/controller and proposing their records (KRaft's design: all
// metadata in one ordered, replicated log, which removes the KAFKA-4414
// class of bugs where leader changes reached brokers as separate pushes).
//
// A Quorum is one controller node. Like raft's RawNode, which it drives
// (never raft.Node), it does no I/O: no goroutines, no clock, no sockets,
// no files. Time comes in as Tick, raft messages as Step, broker requests
// as HandleRequest; everything to persist, send and answer goes out in a
// Ready, and Advance says it was carried out. The broker runtime and the
// simulator are the two things that drive it. Storage is read through
// raft.Storage; the driver writes it, as the Ready says.
//
// The controller's rules:
//   - It decides only while active: raft leader of the current term, with
//     every entry of earlier terms applied (it has applied its own term's
//     first entry). Before that its image could lack records an earlier
//     leader committed, and its decisions could contradict them.
//   - It decides against the newest image, committed or not (controller
//     package doc), and answers only once what the answer depends on is
//     committed and applied: an answer never reports state a failover could
//     take back.
//   - It stops deciding the moment it is no longer leader of the term it
//     activated in: its uncommitted view is dropped and its waiting answers
//     fail with NOT_CONTROLLER. Answers carry the raft term (the controller
//     epoch), so a broker can ignore a stale controller's late answers.
//   - Brokers learn metadata only from the committed log, in order
//     (HeartbeatAnswer), or from a snapshot of the image at a committed
//     offset when they are further behind than the controller keeps.
package quorum

import (
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

// Config configures one controller node. Validate rejects bad values.
type Config struct {
	// ID is this node's id, shared with its broker in combined mode; raft
	// ids must not be 0, so controller ids start at 1.
	ID metadata.BrokerID
	// Voters is the configured voter set; every node must be given the same.
	Voters []metadata.BrokerID
	// Storage is the raft log; the driver writes it as each Ready says.
	Storage raft.Storage
	// ElectionTicks and HeartbeatTicks are raft's election timeout and
	// heartbeat interval.
	ElectionTicks  int
	HeartbeatTicks int
	// SessionTimeoutTicks is the broker session: a broker whose last
	// heartbeat is older is fenced.
	SessionTimeoutTicks int64
	// SnapshotEntries is how many raft entries are applied between two
	// snapshots of the image; the log below a snapshot is compacted.
	SnapshotEntries uint64
	// MaxHistoryEntries bounds the applied metadata entries kept in memory
	// to serve brokers; a broker further behind gets a snapshot.
	MaxHistoryEntries int
	// MaxWaitingAnswers bounds the answers waiting for their records to
	// commit; past it, requests are refused with REQUEST_TIMED_OUT.
	MaxWaitingAnswers int
	// MaxEntryBytes bounds one proposal.
	MaxEntryBytes int
	// MaxMetadataWaitTicks bounds how long a metadata fetch is held
	// (FetchMetadataRequest); 0 answers every fetch at once.
	MaxMetadataWaitTicks int64
	// LeaderRebalanceTicks is how often the active controller runs the
	// leader rebalance (controller.Rebalance; Kafka's
	// auto.leader.rebalance.enable and
	// leader.imbalance.check.interval.seconds); 0 never runs it.
	// LeaderImbalancePercentage is the ratio above which a broker's
	// preferred partitions are elected back
	// (leader.imbalance.per.broker.percentage), 0 to 100.
	LeaderRebalanceTicks      int64
	LeaderImbalancePercentage int
	// Logger receives raft's log; nil discards it.
	Logger raft.Logger
	// Random is where the controller draws topic ids (KIP-516): the
	// operating system's source in tide serve, the world's seeded source in
	// the simulator, so a run stays a function of its seed.
	Random io.Reader
	// Rules is the zero value (every rule on) except in the simulator and
	// the scenarios; the controller's decisions read it (rule
	// min-isr-race, controller.AlterConfigs; reassignment-completes-in-isr,
	// controller.Reassign).
	Rules rules.Rules
}

// Validate rejects configurations that cannot work.
func (c Config) Validate() error {
	voter := false
	for i, id := range c.Voters {
		if id < 1 {
			return fmt.Errorf("quorum: controller id %d: ids start at 1", id)
		}
		for _, other := range c.Voters[:i] {
			if other == id {
				return fmt.Errorf("quorum: controller %d listed twice", id)
			}
		}
		voter = voter || id == c.ID
	}
	switch {
	case !voter:
		return fmt.Errorf("quorum: node %d is not among the voters %v", c.ID, c.Voters)
	case c.Storage == nil:
		return errors.New("quorum: no storage")
	case c.Random == nil:
		return errors.New("quorum: no random source for topic ids")
	case c.HeartbeatTicks < 1 || c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("quorum: election ticks %d must exceed heartbeat ticks %d >= 1", c.ElectionTicks, c.HeartbeatTicks)
	case c.LeaderRebalanceTicks < 0 || c.LeaderImbalancePercentage < 0 || c.LeaderImbalancePercentage > 100:
		return fmt.Errorf("quorum: leader rebalance every %d ticks above %d%%: want ticks >= 0 and a percentage of 0 to 100",
			c.LeaderRebalanceTicks, c.LeaderImbalancePercentage)
	case c.SessionTimeoutTicks < 1 || c.SnapshotEntries < 1 || c.MaxHistoryEntries < 1 || c.MaxWaitingAnswers < 1 || c.MaxEntryBytes < 1024:
		return errors.New("quorum: limits must be positive (and entries at least 1 KiB)")
	}
	return nil
}

// Quorum is one controller node. It is not safe for concurrent use.
type Quorum struct {
	config Config
	raw    *raft.RawNode
	now    int64
	// topicIDsAssigned is set once the active controller found no topic
	// without an id left to assign (assignMissingTopicIDs).
	topicIDsAssigned bool
	// nextRebalance is the tick of the active controller's next leader
	// rebalance (rebalanceLeaders).
	nextRebalance int64

	// term and leader are raft's, as of the last Tick or Step.
	term   uint64
	leader metadata.BrokerID

	// The committed state: image is the metadata log applied up to raft
	// index applied; history keeps its last entries to serve brokers.
	image         *metadata.Image
	applied       uint64
	history       []metadata.Entry
	confState     *raftpb.ConfState
	snapshotIndex uint64

	// active is set while this node is the active controller, in term
	// activeTerm; the rest of the fields are the active controller's.
	active     bool
	activeTerm uint64
	// speculative is image with every record proposed in activeTerm
	// applied, committed or not: decisions are taken against it.
	speculative *metadata.Image
	// proposed numbers the proposals of activeTerm; appliedProposal is the
	// last of them applied.
	proposed, appliedProposal uint64
	// waiting are answers held until their proposal is applied.
	waiting []waitingAnswer
	// lastHeartbeat is each broker's last heartbeat tick, for fencing.
	lastHeartbeat map[metadata.BrokerID]int64
	// polls are the metadata fetches held until there is newer committed
	// metadata or their wait is up: at most one per broker (metadata_poll.go).
	polls []heldPoll

	// out holds answers ready to go; snapshot a snapshot to store.
	out      []Answer
	snapshot *SnapshotRequest
	// ready is the raft Ready handed out and not yet advanced.
	ready *raft.Ready
}

// waitingAnswer is an answer that may go once proposal has been applied.
type waitingAnswer struct {
	proposal uint64
	request  Request
	answer   Answer
}

// New starts a controller node over its storage: a fresh storage is
// bootstrapped with the voter set; an existing one is recovered, its image
// loaded from the last snapshot and the committed entries after it replayed
// through the first Ready.
func New(config Config) (*Quorum, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	q := &Quorum{config: config, image: metadata.NewImage(), leader: metadata.NoBroker, lastHeartbeat: map[metadata.BrokerID]int64{}}
	snapshot, err := config.Storage.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("quorum: reading the snapshot: %w", err)
	}
	if !raft.IsEmptySnap(snapshot) {
		if err := q.loadSnapshot(snapshot); err != nil {
			return nil, err
		}
	}
	raw, err := raft.NewRawNode(q.raftConfig())
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	q.raw = raw
	last, err := config.Storage.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	if last == 0 && raft.IsEmptySnap(snapshot) {
		var peers []raft.Peer
		for _, id := range config.Voters {
			peers = append(peers, raft.Peer{ID: uint64(id)})
		}
		if err := raw.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("quorum: bootstrap: %w", err)
		}
	}
	if len(config.Voters) == 1 {
		// A one-voter quorum needs no election timeout to learn that no
		// one else will campaign.
		if err := raw.Campaign(); err != nil {
			return nil, fmt.Errorf("quorum: campaign: %w", err)
		}
	}
	q.observeRole()
	return q, nil
}

func (q *Quorum) raftConfig() *raft.Config {
	logger := q.config.Logger
	if logger == nil {
		logger = discardLogger{}
	}
	return &raft.Config{
		ID: uint64(q.config.ID), ElectionTick: q.config.ElectionTicks, HeartbeatTick: q.config.HeartbeatTicks,
		Storage: q.config.Storage, Applied: q.applied,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 1 << 26,
		// CheckQuorum makes a leader cut off from a majority step down (and
		// stop deciding) within an election timeout; PreVote keeps a node
		// that was partitioned away from disrupting the leader when it
		// returns (Raft thesis 9.6).
		CheckQuorum: true, PreVote: true,
		Logger: logger,
	}
}

// ID is this node's id.
func (q *Quorum) ID() metadata.BrokerID { return q.config.ID }

// Image is the committed metadata image, as applied so far. It must not be
// changed.
func (q *Quorum) Image() *metadata.Image { return q.image }

// Active reports whether this node is the active controller.
func (q *Quorum) Active() bool { return q.active }

// Leader is the raft leader as this node knows it, or NoBroker; Term its term.
func (q *Quorum) Leader() metadata.BrokerID { return q.leader }
func (q *Quorum) Term() uint64              { return q.term }

// Entries returns up to max committed metadata entries from offset on, as
// far as this node still keeps them in memory (nil when offset is before
// what it keeps, or after its image).
func (q *Quorum) Entries(offset int64, max int) []metadata.Entry {
	if len(q.history) == 0 || offset < q.history[0].Offset || offset > q.image.Offset() {
		return nil
	}
	entries := q.history[offset-q.history[0].Offset:]
	return append([]metadata.Entry(nil), entries[:min(len(entries), max)]...)
}

// AppliedIndex is the last raft index applied.
func (q *Quorum) AppliedIndex() uint64 { return q.applied }

// Tick advances the node's clock by one tick: raft's election and heartbeat
// timers, and, on the active controller, the fencing of brokers whose
// session expired and, every LeaderRebalanceTicks, the leader rebalance.
func (q *Quorum) Tick() {
	q.now++
	q.raw.Tick()
	q.observeRole()
	if q.active {
		q.fenceExpired()
		q.assignMissingTopicIDs()
		q.releasePolls()
		q.rebalanceLeaders()
	}
}

// Step hands the node a raft message from another controller.
func (q *Quorum) Step(message *raftpb.Message) error {
	if message.GetTo() != uint64(q.config.ID) {
		return fmt.Errorf("quorum: a message for %d reached %d", message.GetTo(), q.config.ID)
	}
	if raft.IsLocalMsg(message.GetType()) {
		return fmt.Errorf("quorum: local message %v from the network", message.GetType())
	}
	err := q.raw.Step(message)
	q.observeRole()
	if errors.Is(err, raft.ErrStepPeerNotFound) || errors.Is(err, raft.ErrStepLocalMsg) {
		return nil // from a node outside the voter set, or stale: dropped
	}
	return err
}

// observeRole follows raft's term and leader, and deactivates the
// controller the moment it is no longer leader of its term.
func (q *Quorum) observeRole() {
	status := q.raw.BasicStatus()
	q.term = status.HardState.GetTerm()
	q.leader = metadata.NoBroker
	if status.Lead != raft.None {
		q.leader = metadata.BrokerID(status.Lead)
	}
	if q.active && (status.RaftState != raft.StateLeader || q.term != q.activeTerm) {
		q.deactivate()
	}
}
