package server

import (
	"log/slog"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// maxNarratedEntries bounds the metadata entries one pass of the loop
// narrates; the rest wait for the next pass.
const maxNarratedEntries = 1000

// narrateMetadata logs at info what the controller committed since the
// last pass, as sentences with their reasons (a leader elected because the
// previous one was fenced, an ISR shrunk because a follower fell behind),
// on the active controller only, so that each event is logged once per
// cluster; and on every voter, a change of active controller. It runs on
// the node loop after the quorum's Ready is carried out.
func (s *Server) narrateMetadata() {
	if s.quorum == nil {
		return
	}
	if leader := s.quorum.Leader(); leader != s.knownController {
		s.knownController = leader
		if leader != metadata.NoBroker {
			s.log.Info("active controller", "controller", int(leader), "term", s.quorum.Term())
		}
	}
	if !s.quorum.Active() {
		s.narrator = nil
		return
	}
	img := s.quorum.Image()
	if s.narrator == nil {
		s.narrator, s.narratedOffset = metadata.NewNarrator(img), img.Offset()
		s.log.Info("this node is the active controller", "term", s.quorum.Term(), "metadata_offset", img.Offset())
		return
	}
	if img.Offset() <= s.narratedOffset {
		return
	}
	entries := s.quorum.Entries(s.narratedOffset+1, maxNarratedEntries)
	if len(entries) == 0 {
		// Past what the quorum keeps in memory (a snapshot): go on from now.
		s.narrator, s.narratedOffset = metadata.NewNarrator(img), img.Offset()
		return
	}
	for _, event := range s.narrator.Narrate(entries) {
		if s.metrics != nil {
			s.metrics.events.WithLabelValues(event.Kind).Inc()
		}
		level := slog.LevelInfo
		if event.Level == metadata.EventWarn {
			level = slog.LevelWarn
		}
		attrs := make([]any, 0, 2*len(event.Attrs))
		for _, a := range event.Attrs {
			attrs = append(attrs, a.Key, a.Value)
		}
		s.log.Log(s.ctx, level, event.Message, attrs...)
	}
	s.narratedOffset = entries[len(entries)-1].Offset
}

// observeReplicas logs, at info, what this broker's replicas do that an
// operator must see: a truncation of a log (from, to, why) and an ISR
// change a leader proposes. The node calls the observer with every Ready
// before carrying it out, so the log's own end is still the one before
// the truncation. Per-record work is one length check per Ready.
func (s *Server) observeReplicas() {
	node := s.lifecycle.Node()
	if node == nil || node == s.observedNode {
		return
	}
	s.observedNode = node
	node.Observe(func(tp metadata.TopicPartition, ready replica.Ready) {
		for _, op := range ready.Log {
			if op.Kind != replica.Truncate && op.Kind != replica.TruncateFully {
				continue
			}
			from := int64(-1)
			if _, log, ok := node.Replica(tp); ok {
				from = int64(log.LogEndOffset())
			}
			if op.Kind == replica.Truncate && from == int64(op.Offset) {
				continue // nothing above the point: no records go
			}
			reason := "the log diverged from the leader's: records from this offset on are not the leader's (epoch truncation, KIP-101, KIP-279)"
			if op.Kind == replica.TruncateFully {
				reason = "the leader's log starts past this replica's end: the log restarts empty at the leader's log start"
			}
			s.log.Info("truncating a replica's log", "partition", tp.String(), "from", from, "to", int64(op.Offset), "reason", reason)
		}
		for _, proposal := range ready.Proposals {
			isr := make([]int32, len(proposal.NewISR))
			for i, member := range proposal.NewISR {
				isr[i] = int32(member.ID)
			}
			s.log.Info("leader proposes an ISR change to the controller", "partition", tp.String(), "isr", isr,
				"partition_epoch", int64(proposal.PartitionEpoch))
		}
	})
}
