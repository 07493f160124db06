package sim

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/leaderepoch"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/record"
)

// replicaRow is one replica's line of the table.
type replicaRow struct {
	highWatermark, logEndOffset record.Offset
	leaderEpoch                 record.LeaderEpoch
	epochs                      string
}

// remember keeps a running broker's row for when it goes down.
func (s *Script) remember(b *brokerProcess) {
	if b.node == nil || !s.topic {
		return
	}
	if r, log, ok := b.node.Replica(s.partition); ok {
		s.lastSeen[b.id] = replicaRow{r.HighWatermark(), r.LogEndOffset(), r.State().LeaderEpoch, describeEpochs(log.Epochs())}
	}
}

// State draws the partition as the seed documents do: the controller's
// ISR, leader and epochs, then each replica's high watermark and log end
// offset as its broker has them (offline ones as they were when last
// running), then the messages held on links.
func (s *Script) State() string {
	if !s.topic {
		return "no topic\n"
	}
	var out strings.Builder
	state, _ := s.w.metadataImage().Partition(s.partition)
	fmt.Fprintf(&out, "ISR: (%s)  Leader: %s  leader-epoch=%d partition-epoch=%d", describeIDs(state.ISR), describeLeader(state.Leader), state.LeaderEpoch, state.PartitionEpoch)
	if len(state.ELR) > 0 {
		fmt.Fprintf(&out, "  ELR: (%s)", describeIDs(state.ELR))
	}
	out.WriteString("\n")
	for _, id := range state.Replicas {
		fmt.Fprintf(&out, "r%d: %s\n", id, s.describeReplica(s.w.broker(id)))
	}
	for _, l := range s.w.network.heldLinks() {
		fmt.Fprintf(&out, "held %s->%s:\n", shortAddress(l.from), shortAddress(l.to))
		s.w.describeHeld(&out, s.w.network.onHold[l])
	}
	return out.String()
}

// describeHeld lists held messages, one line for a run of identical ones
// (a follower's retried fetches, a broker's repeated heartbeat answers).
func (w *world) describeHeld(out *strings.Builder, held []*message) {
	for i := 0; i < len(held); {
		line := w.describeMessage(held[i])
		j := i + 1
		for j < len(held) && w.describeMessage(held[j]) == line {
			j++
		}
		if j-i > 1 {
			fmt.Fprintf(out, "  %s (x%d)\n", line, j-i)
		} else {
			fmt.Fprintf(out, "  %s\n", line)
		}
		i = j
	}
}

func (s *Script) describeReplica(b *brokerProcess) string {
	role := "offline"
	if b.up && b.node != nil {
		if r, _, ok := b.node.Replica(s.partition); ok {
			role = r.Role().String()
		}
		s.remember(b)
	}
	if b.paused {
		role = "paused"
	}
	row, seen := s.lastSeen[b.id]
	if !seen {
		row = replicaRow{leaderEpoch: record.NoLeaderEpoch}
	}
	return fmt.Sprintf("[hw=%d, leo=%d] %s epoch=%d epochs=%s", row.highWatermark, row.logEndOffset, role, row.leaderEpoch, row.epochs)
}

func describeEpochs(entries []leaderepoch.Entry) string {
	parts := make([]string, len(entries))
	for i, entry := range entries {
		parts[i] = fmt.Sprintf("%d@%d", entry.Epoch, entry.StartOffset)
	}
	return strings.Join(parts, ",")
}

func describeIDs(ids []metadata.BrokerID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("r%d", id)
	}
	return strings.Join(parts, ", ")
}

func describeLeader(id metadata.BrokerID) string {
	if id == metadata.NoBroker {
		return "none"
	}
	return fmt.Sprintf("r%d", id)
}

// describeMessage is one line for a message: the scripts print what they
// deliver and drop, and what is held.
func (w *world) describeMessage(m *message) string {
	route := fmt.Sprintf("%s->%s", shortAddress(m.from), shortAddress(m.to))
	switch {
	case m.kafka != nil:
		return route + " " + w.describeKafka(m.kafka)
	case m.partitionState != nil:
		state := m.partitionState
		return fmt.Sprintf("%s partition-state leader=%d leader-epoch=%d partition-epoch=%d isr=%v", route, state.Leader, state.LeaderEpoch, state.PartitionEpoch, state.ISR)
	case m.request != nil:
		return route + " " + describeRequest(m.request)
	case m.answer != nil:
		return route + " " + describeAnswer(m.answer)
	case m.raft != nil:
		return fmt.Sprintf("%s raft %v term=%d index=%d", route, m.raft.GetType(), m.raft.GetTerm(), m.raft.GetIndex())
	}
	return route + " client message"
}

func describeRequest(r *quorum.Request) string {
	switch {
	case r.Register != nil:
		return "register incarnation=" + r.Register.Incarnation
	case r.Heartbeat != nil:
		return fmt.Sprintf("heartbeat applied=%d", r.Heartbeat.AppliedOffset)
	case r.AlterPartition != nil && len(r.AlterPartition.Partitions) == 1:
		item := r.AlterPartition.Partitions[0]
		var ids []metadata.BrokerID
		for _, member := range item.NewISR {
			ids = append(ids, member.ID)
		}
		return fmt.Sprintf("alter-partition %s isr=%v leader-epoch=%d partition-epoch=%d", item.TopicPartition, ids, item.LeaderEpoch, item.PartitionEpoch)
	case r.AllocateProducerIDs != nil:
		return "allocate-producer-ids"
	}
	return r.String()
}

func describeAnswer(a *quorum.Answer) string {
	switch {
	case a.ErrorCode == kerr.NotController.Code:
		return "not-controller"
	case a.Register != nil:
		return fmt.Sprintf("registered epoch=%d", a.Register.Epoch)
	case a.Heartbeat != nil:
		var records []string
		for _, entry := range a.Heartbeat.Entries {
			records = append(records, entry.String())
		}
		return fmt.Sprintf("metadata [%s]", strings.Join(records, "; "))
	case a.AlterPartition != nil:
		code := a.AlterPartition.ErrorCode
		if code == 0 && len(a.AlterPartition.Partitions) == 1 {
			code = a.AlterPartition.Partitions[0].ErrorCode
		}
		return "alter-partition-response " + errorName(code)
	case a.ProducerIDs != nil:
		return fmt.Sprintf("producer-ids first=%d", a.ProducerIDs.FirstProducerID)
	}
	return "answer " + errorName(a.ErrorCode)
}

// messageKind is the name of a message's payload, as describeMessage
// prints it after the route.
func (w *world) messageKind(m *message) string {
	_, payload, _ := strings.Cut(w.describeMessage(m), " ")
	kind, _, _ := strings.Cut(payload, " ")
	return kind
}

// shortAddress names brokers by number, as the seeds' arrows do, and a
// script's one controller "controller".
func shortAddress(a address) string {
	switch {
	case a.isController():
		return "controller"
	case a > 0:
		return fmt.Sprint(int64(a))
	}
	return a.String()
}

// errorName is a Kafka error code's name, as clients print it.
func errorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.(*kerr.Error).Message
	}
	return fmt.Sprintf("error %d", code)
}
