package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// holders is the liveness check's own account of which replicas hold each
// partition's committed records, so that it can tell a partition that must
// recover from one that stays offline by design: with unclean election off,
// a partition whose every replica holding its committed records has lost
// them has no one left to elect cleanly (KIP-966), whatever the flush mode.
//
// It is kept from what the simulator saw, not from the controller's ELR,
// which is the thing under test: the ISRs as they commit (the high
// watermark only advances while the ISR has at least min.insync.replicas
// members, KAFKA-15583, and counts every member, so those members hold every
// committed record; a replica that joins later has caught up), and the data
// losses the simulator itself caused (a replaced data disk, an unclean stop
// with flush=never), counted when the broker restarts unable to vouch for its
// log.
type holders struct {
	minInsyncReplicas map[string]int
	partitions        map[metadata.TopicPartition]*holding
	// lost is, for each broker, its restarts that could not vouch for its
	// log: when and why, in order.
	lost map[metadata.BrokerID][]dataLoss
}

// holding is one partition's holders.
type holding struct {
	isr            []metadata.BrokerID
	leaderEpoch    record.LeaderEpoch
	partitionEpoch metadata.PartitionEpoch
	// joined is, for each replica that holds every committed record, when
	// it last joined the ISR having caught up. A replica leaves it once an
	// ISR without it reaches min.insync.replicas, since the high watermark
	// may then move past what it holds.
	joined map[metadata.BrokerID]int64
}

type dataLoss struct {
	tick   int64
	reason string
}

func newHolders() *holders {
	return &holders{minInsyncReplicas: map[string]int{}, partitions: map[metadata.TopicPartition]*holding{},
		lost: map[metadata.BrokerID][]dataLoss{}}
}

// apply follows one committed metadata record.
func (h *holders) apply(now int64, r metadata.Record) {
	switch r := r.(type) {
	case metadata.CreateTopic:
		h.minInsyncReplicas[r.Name] = r.Config.MinInsyncReplicas
		for _, state := range r.Partitions {
			p := &holding{joined: map[metadata.BrokerID]int64{}}
			h.partitions[state.TopicPartition] = p
			p.change(now, state, r.Config.MinInsyncReplicas)
		}
	case metadata.CreatePartitions:
		for _, state := range r.Partitions {
			p := &holding{joined: map[metadata.BrokerID]int64{}}
			h.partitions[state.TopicPartition] = p
			p.change(now, state, h.minInsyncReplicas[r.Topic])
		}
	case metadata.PartitionChange:
		if p, ok := h.partitions[r.TopicPartition]; ok && r.PartitionEpoch > p.partitionEpoch {
			p.change(now, metadata.PartitionState{ISR: r.ISR, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch},
				h.minInsyncReplicas[r.Topic])
			for id := range p.joined {
				if r.Replicas != nil && !slices.Contains(r.Replicas, id) {
					delete(p.joined, id)
				}
			}
		}
	}
}

// change follows a partition's new ISR. A replica the leader adds (in its
// leader epoch) has caught up with it, so it holds every committed record
// from then on; one that enters with a new leader epoch was elected from the
// ELR and holds what it held before.
func (p *holding) change(now int64, next metadata.PartitionState, minInsyncReplicas int) {
	for _, id := range next.ISR {
		_, held := p.joined[id]
		if !slices.Contains(p.isr, id) && (next.LeaderEpoch == p.leaderEpoch || !held) {
			p.joined[id] = now
		}
	}
	if len(next.ISR) >= minInsyncReplicas {
		for id := range p.joined {
			if !slices.Contains(next.ISR, id) {
				delete(p.joined, id)
			}
		}
	}
	p.isr, p.leaderEpoch, p.partitionEpoch = slices.Clone(next.ISR), next.LeaderEpoch, next.PartitionEpoch
}

// lose records that a broker restarted unable to vouch for its log.
func (h *holders) lose(id metadata.BrokerID, now int64, reason string) {
	if reason == "" {
		reason = "never vouched for its log"
	}
	h.lost[id] = append(h.lost[id], dataLoss{tick: now, reason: reason})
}

// lostSince returns a broker's first data loss at or after a tick.
func (h *holders) lostSince(id metadata.BrokerID, tick int64) (dataLoss, bool) {
	for _, loss := range h.lost[id] {
		if loss.tick >= tick {
			return loss, true
		}
	}
	return dataLoss{}, false
}

// offlineByDesign says why a partition may stay offline: every replica that
// held its committed records lost them since. ok is false while any of them
// still holds them, or if the account is incomplete.
func (h *holders) offlineByDesign(tp metadata.TopicPartition) (reason string, ok bool) {
	p, known := h.partitions[tp]
	if !known || len(p.joined) == 0 {
		return "", false
	}
	var lost []string
	for _, id := range sortedIDs(p.joined) {
		loss, ok := h.lostSince(id, p.joined[id])
		if !ok {
			return "", false
		}
		lost = append(lost, fmt.Sprintf("b%d %s", id, loss.reason))
	}
	return "every replica that held its committed records lost them (" + strings.Join(lost, ", ") + ")", true
}

// describeIntact names, for a violation's message, the replicas that still
// hold a partition's committed records.
func (h *holders) describeIntact(tp metadata.TopicPartition) string {
	p, known := h.partitions[tp]
	if !known {
		return ""
	}
	var intact []string
	for _, id := range sortedIDs(p.joined) {
		if _, lost := h.lostSince(id, p.joined[id]); !lost {
			intact = append(intact, fmt.Sprintf("b%d", id))
		}
	}
	if len(intact) == 0 {
		return ""
	}
	return ", though " + strings.Join(intact, " and ") + " still hold its committed records"
}

func sortedIDs(set map[metadata.BrokerID]int64) []metadata.BrokerID {
	ids := make([]metadata.BrokerID, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// allowedOffline reports a partition that may stay offline after healing:
// without a leader, and with every replica that held its committed records
// having lost them (holders). The metadata log must have been followed to
// its end, or the account could be stale.
func (w *world) allowedOffline(state metadata.PartitionState) bool {
	_, ok := w.offlineReason(state)
	return ok
}

func (w *world) offlineReason(state metadata.PartitionState) (string, bool) {
	if state.Leader != metadata.NoBroker || w.tracedOffset < w.metadataImage().Offset() {
		return "", false
	}
	return w.holders.offlineByDesign(state.TopicPartition)
}

// traceOfflineByDesign traces and counts the partitions excused from
// recovering, saying why.
func (w *world) traceOfflineByDesign() {
	for _, state := range w.metadataImage().Partitions() {
		if reason, ok := w.offlineReason(state); ok {
			w.stats.offlineByDesign++
			w.trace("%s offline by design: %s", state.TopicPartition, reason)
		}
	}
}
