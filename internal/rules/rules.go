// Package rules names the protocol rules that keep tide from losing
// committed data, one per failure of Kafka's history, so that each can be
// switched off in the simulator and the scenarios to show the failure come
// back. The zero Rules value has every rule on, which is what production
// code gets and the only thing it can get: a production configuration has no
// field that reaches Without (TestOnlySimulatorsSwitchRulesOff enforces it).
package rules

import (
	"fmt"
	"sort"
	"strings"
)

// Rule names a protocol rule by the failure it prevents.
type Rule string

const (
	// EpochTruncation is KAFKA-1211 (the Nov 2016 mailing-list thread): a
	// follower that learned of a new leader truncated to its own high
	// watermark, which lags the leader's; when it then became leader, a
	// committed record above its lagging high watermark was gone. The rule:
	// find the divergence point by leader epoch (KIP-101, KIP-279) and
	// truncate only the diverging suffix.
	EpochTruncation Rule = "kafka-1211"
	// FencedFetch is KAFKA-6880: a zombie replica that missed two leader
	// changes kept fetching from the broker that was leader again and kept a
	// stale, divergent tail forever. The rule: fetches carry the sender's
	// current leader epoch and a leader serves only its own epoch (KIP-320).
	FencedFetch Rule = "kafka-6880"
	// EpochSafeISRJoin is KAFKA-7128: a new leader's high watermark lags;
	// a replica that caught up only to it joined the ISR, was elected, and
	// committed offsets 5..10 were lost. The rule: join only at or beyond
	// the start offset of the leader's own epoch.
	EpochSafeISRJoin Rule = "kafka-7128"
	// MonotonicHighWatermark is KAFKA-2334: after a failover consumers saw
	// the latest offset go from 100 back to 0, because the new leader's high
	// watermark lagged. The rule: a new leader serves no high watermark to
	// clients until it has reached the start offset of its epoch (KIP-207).
	MonotonicHighWatermark Rule = "kafka-2334"
	// OrderedMetadata is KAFKA-4414: leader changes reached brokers as
	// separate pushes in any order; a broker applied an older one after a
	// newer one and the replicas fell out with each other. The rule:
	// leadership comes only through the ordered metadata log, and state with
	// an older partition epoch than the one applied is ignored.
	OrderedMetadata Rule = "kafka-4414"
	// CommittedMeansDurable is the power-loss failure: a record counted as
	// committed while it sat only in page caches is lost when every replica
	// loses power at once, though producers got acks=all. The rule: with
	// flush=always a replica's log end offset counts toward the high
	// watermark only once synced.
	CommittedMeansDurable Rule = "unsynced-ack"
	// CleanBelowHighWatermark is the compaction failure: a log cleaner that
	// lets a record above the high watermark supersede an older record of
	// its key removes the older, committed one; when the newer one is then
	// truncated away (it was never committed, and a new leader lacks it),
	// the key's latest committed value is gone from that replica, though
	// a consumer may already have read it. The rule: the cleanable section
	// ends at the high watermark (Kafka's first uncleanable offset is at
	// most the last stable offset, which is at most the high watermark).
	CleanBelowHighWatermark Rule = "clean-above-hw"
	// RevokeBeforeAssign is the two-owners failure of incremental
	// rebalancing: when a consumer group's target assignment moves a
	// partition from member A to member B, and the coordinator gives it to
	// B at once, A and B both consume it until A's next heartbeat answer
	// tells A to let go: records are processed twice and each commits
	// offsets over the other's. The rule (KIP-848's reconciliation, Kafka's
	// CurrentAssignmentBuilder): a partition goes to its new owner only
	// once its previous owner has reported, in a heartbeat, that it no
	// longer owns it; until then the new owner waits in
	// UNRELEASED_PARTITIONS.
	//
	// The simulator's KIP-848 group members find it switched off
	// (internal/sim's InvariantTwoOwners: a member's heartbeat accepted
	// while a partition it owns was given to another member, or a
	// ConsumerGroupDescribe showing a partition in two assignments), as do
	// internal/group/reconcile's heartbeat simulation and internal/group's
	// replay property
	// (TestReplayPropertyCatchesTwoOwnersWithoutRevokeBeforeAssign).
	RevokeBeforeAssign Rule = "revoke-before-assign"
	// OrderedCoordinatorAppends is the hole in a group coordinator's log:
	// the coordinator hands out appends to __consumer_offsets without
	// waiting for the earlier ones, each built on the live state the
	// earlier ones made (a KIP-848 group's records are deltas: one member's
	// assignment, the target's epoch). When one is refused before it
	// reaches the log (the broker's write backlog is full, or the replica
	// refuses it) and a later one is written, the log holds the later
	// delta without the earlier one, and the coordinator that loads it
	// (the refusal unloads the old one) serves a group no coordinator ever
	// held: a target assignment without one of the topic's partitions,
	// which then has no owner for good. The rule: once an append of a
	// coordinator is refused, its host sends none of the coordinator's
	// later appends (they are reported never written) until
	// every earlier append has been reported, so what reaches the log is a
	// prefix of what the coordinator handed out; the host also checks the
	// write backlog before it sends, so a refusal is known before the next
	// append goes out. Kafka gets the same from appending to the local log
	// inside its coordinator's event loop and reverting the coordinator's
	// state to the last written offset when an append fails.
	//
	// The simulator found it switched off (InvariantGroupUnsettled, seed
	// 506) before the coordinator stopped handing out appends on a failure
	// report; internal/frontend's
	// TestRefusedCoordinatorAppendHoldsBackLaterOnes shows what it adds to
	// that: appends handed out before the refusal is reported.
	OrderedCoordinatorAppends Rule = "ordered-coordinator-appends"
	// AnswerAfterCommit is the lost offset commit: a group coordinator
	// that answers an OffsetCommit (or hands out a SyncGroup's assignment)
	// as soon as it has written the record, before the high watermark of
	// __consumer_offsets passes it, tells the consumer its position is
	// safe; when the coordinator's leadership moves and the uncommitted
	// record is truncated, the next coordinator replays a log without it
	// and the consumer group resumes from an older offset (reprocessing),
	// or members consume on an assignment no later coordinator knows. The
	// rule: answer only once the append is committed (Kafka defers the
	// response until the high watermark passes the records).
	AnswerAfterCommit Rule = "answer-after-commit"
	// LoadCommittedOnly is the replayed phantom: a new group coordinator
	// that loads __consumer_offsets up to its log end instead of its high
	// watermark serves offsets and group metadata that may still be
	// truncated, so its answers and the log's eventual content resolve the
	// same key differently. The rule: load only records below the high
	// watermark (Kafka's loader reads what is committed before serving).
	LoadCommittedOnly Rule = "load-committed-only"
	// MinISRRace is the min.insync.replicas race of a live config change:
	// a leader proposed an ISR shrink while it still held the old, lower
	// min.insync.replicas; the controller, already at the new value,
	// accepted it and kept the removed follower eligible (ELR, KIP-966);
	// the leader applied the answer before the config reached it and
	// advanced the high watermark past that follower on a too-small ISR.
	// When every ISR member failed, the follower was elected from the ELR
	// without committed records. The rule: a min.insync.replicas change
	// bumps the partition epoch of every partition of the topic in the
	// same metadata entry, so a shrink built before the change fails the
	// compare-and-set (KIP-497) and the leader proposes it again once it
	// holds the new value.
	MinISRRace Rule = "min-isr-race"
	// ReassignmentCompletesInISR is the reassignment failure (KIP-455):
	// a controller that moves a partition onto new brokers and takes the
	// old ones out at once, counting the new replicas as in sync before
	// they have fetched anything, lets a new replica with an empty or short
	// log lead or count toward the high watermark; the high watermark
	// goes back and acknowledged writes are lost. The rule: add the target
	// replicas first, let them join the ISR by the ordinary (epoch-safe)
	// ISR expansion, and only when every added replica is in the ISR take
	// the removed ones out, with ISR := ISR ∩ target.
	ReassignmentCompletesInISR Rule = "reassignment-completes-in-isr"
	// FetchByTopicID is the recreated-topic failure (KIP-516's motivation):
	// a follower whose metadata lags behind a topic's deletion and
	// re-creation under the same name keeps fetching the name, and the
	// leader takes it for a follower of the new topic. Both incarnations
	// start at leader epoch 0, so no epoch check tells them apart: the
	// leader truncates the follower's copy of the old topic to the new
	// log's end and counts it toward the new topic's high watermark, and an
	// acks=all write is acknowledged with an ISR member that does not hold
	// it (or, when the new end falls inside an old batch, the truncation
	// fails the follower's partition). The rule: a follower fetches a
	// topic that has an id by that id (Fetch v13+), and a leader that does
	// not know the id answers UNKNOWN_TOPIC_ID and never serves or counts it.
	FetchByTopicID Rule = "recreated-topic"
	// CoordinatorLease is the zombie group coordinator: a broker cut off
	// from the controller keeps the __consumer_offsets leadership its
	// image names and answers OffsetFetch (and takes commits and group
	// heartbeats) from its own coordinator's state, while the controller has
	// fenced it and moved the partition to a broker that has since
	// acknowledged a newer commit; the client, which found the coordinator
	// through the zombie's own FindCoordinator, reads an offset below one
	// it was told is safe (Kafka's coordinator has the same hole until the
	// broker learns of its fencing). The rule, a controller-session lease:
	// the controller fences a broker no earlier than the session timeout
	// after it received its last heartbeat, and receipt follows sending, so
	// a broker serves as group coordinator (and names itself in
	// FindCoordinator) only while less than the session timeout, less a
	// margin for clock drift, has passed since it sent the last heartbeat
	// the controller acknowledged, and only while its image still names it
	// leader of the partition in the coordinator's leader epoch.
	//
	// The simulator finds it switched off: seed 89 with --batched-passes
	// (InvariantCommitLost); internal/frontend's
	// TestStaleCoordinatorStopsAtLeaseEnd shows it without a simulator.
	CoordinatorLease Rule = "coordinator-lease"
)

// All lists every rule, in a stable order.
func All() []Rule {
	return []Rule{EpochTruncation, FencedFetch, EpochSafeISRJoin, MonotonicHighWatermark, OrderedMetadata, CommittedMeansDurable, CleanBelowHighWatermark,
		AnswerAfterCommit, LoadCommittedOnly, MinISRRace, ReassignmentCompletesInISR, FetchByTopicID, RevokeBeforeAssign,
		OrderedCoordinatorAppends, CoordinatorLease}
}

// Parse returns the rule with the given name.
func Parse(name string) (Rule, error) {
	for _, rule := range All() {
		if string(rule) == name {
			return rule, nil
		}
	}
	names := make([]string, 0, len(All()))
	for _, rule := range All() {
		names = append(names, string(rule))
	}
	return "", fmt.Errorf("unknown rule %q (known: %s)", name, strings.Join(names, ", "))
}

// Rules is a set of rules switched off. The zero value has every rule on.
type Rules struct {
	off map[Rule]bool
}

// On reports whether rule is in force.
func (r Rules) On(rule Rule) bool { return !r.off[rule] }

// Without returns r with rule switched off. Only the simulator, the
// scenarios and tests may call it.
func (r Rules) Without(rule Rule) Rules {
	off := map[Rule]bool{rule: true}
	for name := range r.off {
		off[name] = true
	}
	return Rules{off: off}
}

// AllOn reports whether every rule is in force.
func (r Rules) AllOn() bool { return len(r.off) == 0 }

// String lists the rules switched off, or "all rules on".
func (r Rules) String() string {
	if r.AllOn() {
		return "all rules on"
	}
	var names []string
	for rule := range r.off {
		names = append(names, string(rule))
	}
	sort.Strings(names)
	return "legacy " + strings.Join(names, ", ")
}
