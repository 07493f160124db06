package metadata

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Event is one thing an operator reads in a node's log: what the
// controller decided, said in a sentence with its attributes. Level is
// EventInfo for the ordinary course of a cluster and EventWarn for what
// loses availability or may lose data (an offline partition, an unclean
// election).
type Event struct {
	// Kind names the event for counting (metrics): leader-elected,
	// unclean-leader-election, partition-offline, isr-shrink, isr-expand,
	// replicas-reassigned, broker-registered, broker-unfenced,
	// broker-fenced, controlled-shutdown, broker-unregistered,
	// topic-created, topic-deleted, partitions-added, config-changed.
	Kind    string
	Level   EventLevel
	Message string
	Attrs   []EventAttr
}

// EventLevel is an Event's severity.
type EventLevel int8

const (
	EventInfo EventLevel = iota
	EventWarn
)

// EventAttr is one attribute of an Event, as text.
type EventAttr struct{ Key, Value string }

// Narrator turns committed metadata records into Events: a leader elected
// and why, an ISR shrunk or grown and why, a broker fenced, a topic created
// or deleted. It keeps what it has seen of each partition and broker to say
// what changed; it starts from an image, so a controller that becomes
// active narrates from where it is, not the whole history.
type Narrator struct {
	partitions map[TopicPartition]PartitionState
	// shuttingDown are the brokers in a controlled shutdown.
	shuttingDown map[BrokerID]bool
}

// NewNarrator starts from an image's partitions and brokers.
func NewNarrator(img *Image) *Narrator {
	n := &Narrator{partitions: map[TopicPartition]PartitionState{}, shuttingDown: map[BrokerID]bool{}}
	for _, p := range img.Partitions() {
		n.partitions[p.TopicPartition] = p.Clone()
	}
	for _, b := range img.Brokers() {
		if b.ShuttingDown {
			n.shuttingDown[b.ID] = true
		}
	}
	return n
}

// Narrate describes entries committed together. The controller writes the
// partition changes that move a fenced or stopping broker's leaderships
// before the FenceBroker or BeginControlledShutdown record itself, in the
// same batch, so the batch is read whole first to give those changes their
// reason.
func (n *Narrator) Narrate(entries []Entry) []Event {
	fenced := map[BrokerID]bool{}
	for _, entry := range entries {
		switch record := entry.Record.(type) {
		case FenceBroker:
			fenced[record.ID] = true
		case BeginControlledShutdown:
			n.shuttingDown[record.ID] = true
		}
	}
	var events []Event
	for _, entry := range entries {
		events = append(events, n.narrate(entry, fenced)...)
	}
	return events
}

func (n *Narrator) narrate(entry Entry, fenced map[BrokerID]bool) []Event {
	offset := attr("metadata_offset", strconv.FormatInt(entry.Offset, 10))
	switch record := entry.Record.(type) {
	case PartitionChange:
		return n.partitionChange(record, fenced, offset)
	case CreateTopic:
		for _, p := range record.Partitions {
			n.partitions[p.TopicPartition] = p.Clone()
		}
		return []Event{info("topic-created", "topic created", attr("topic", record.Name), attr("topic_id", record.ID.String()),
			attr("partitions", strconv.Itoa(len(record.Partitions))), attr("replication_factor", strconv.Itoa(record.Config.ReplicationFactor)), offset)}
	case CreatePartitions:
		for _, p := range record.Partitions {
			n.partitions[p.TopicPartition] = p.Clone()
		}
		return []Event{info("partitions-added", "partitions added", attr("topic", record.Topic), attr("added", strconv.Itoa(len(record.Partitions))), offset)}
	case DeleteTopic:
		for tp := range n.partitions {
			if tp.Topic == record.Name {
				delete(n.partitions, tp)
			}
		}
		return []Event{info("topic-deleted", "topic deleted", attr("topic", record.Name), offset)}
	case RegisterBroker:
		delete(n.shuttingDown, record.ID)
		return []Event{info("broker-registered", "broker registered", broker(record.ID), attr("broker_epoch", fmt.Sprint(record.Epoch)), attr("endpoint", record.Endpoint), offset)}
	case UnfenceBroker:
		return []Event{info("broker-unfenced", "broker unfenced: it may lead and join ISRs", broker(record.ID), offset)}
	case FenceBroker:
		reason := "it missed its session (no heartbeat within the session timeout)"
		if n.shuttingDown[record.ID] {
			reason = "its controlled shutdown completed"
		}
		return []Event{info("broker-fenced", "broker fenced", broker(record.ID), attr("reason", reason), offset)}
	case BeginControlledShutdown:
		return []Event{info("controlled-shutdown", "broker began a controlled shutdown; its leaderships move first", broker(record.ID), offset)}
	case UnregisterBroker:
		return []Event{info("broker-unregistered", "broker unregistered", broker(record.ID), offset)}
	case ConfigRecord:
		return []Event{info("config-changed", "config changed", attr("resource", record.Resource.String()), attr("config", record.Key), attr("value", record.Value), offset)}
	}
	return nil
}

// partitionChange says what a PartitionChange changed: the leader, the
// ISR, the replicas.
func (n *Narrator) partitionChange(change PartitionChange, fenced map[BrokerID]bool, offset EventAttr) []Event {
	before, known := n.partitions[change.TopicPartition]
	after := before.Clone()
	after.TopicPartition, after.Leader, after.ISR, after.ELR = change.TopicPartition, change.Leader, change.ISR, change.ELR
	after.LeaderEpoch, after.PartitionEpoch = change.LeaderEpoch, change.PartitionEpoch
	if change.Replicas != nil {
		after.Replicas = change.Replicas
	}
	n.partitions[change.TopicPartition] = after.Clone()
	partition := attr("partition", change.TopicPartition.String())
	var events []Event
	if known && change.Replicas != nil && !slices.Equal(before.Replicas, change.Replicas) {
		events = append(events, info("replicas-reassigned", "replicas reassigned", partition, attr("from", ids(before.Replicas)), attr("to", ids(change.Replicas)), offset))
	}
	if !known || before.Leader != change.Leader {
		events = append(events, n.leaderChange(before, after, known, fenced, partition, offset))
	}
	removed, added := difference(before.ISR, change.ISR), difference(change.ISR, before.ISR)
	if known && len(removed) > 0 {
		events = append(events, info("isr-shrink", "ISR shrank", partition, attr("isr", ids(change.ISR)), attr("removed", ids(removed)),
			attr("reason", n.removalReason(removed, fenced)), attr("elr", ids(change.ELR)), offset))
	}
	if known && len(added) > 0 {
		events = append(events, info("isr-expand", "ISR expanded: a follower caught up", partition, attr("isr", ids(change.ISR)), attr("added", ids(added)), offset))
	}
	return events
}

func (n *Narrator) leaderChange(before, after PartitionState, known bool, fenced map[BrokerID]bool, partition, offset EventAttr) Event {
	attrs := []EventAttr{partition, attr("leader", strconv.Itoa(int(after.Leader))), attr("leader_epoch", fmt.Sprint(after.LeaderEpoch)), attr("isr", ids(after.ISR))}
	if known {
		attrs = append(attrs, attr("previous_leader", strconv.Itoa(int(before.Leader))))
	}
	if after.Leader == NoBroker {
		return Event{Kind: "partition-offline", Level: EventWarn, Message: "partition offline: no replica may lead it", Attrs: append(attrs, attr("elr", ids(after.ELR)), offset)}
	}
	reason := "election"
	switch {
	case known && before.Leader != NoBroker && fenced[before.Leader]:
		reason = "the previous leader was fenced"
	case known && before.Leader != NoBroker && n.shuttingDown[before.Leader]:
		reason = "the previous leader is shutting down"
	case known && before.Leader == NoBroker && !slices.Contains(before.ISR, after.Leader) && !slices.Contains(before.ELR, after.Leader):
		return Event{Kind: "unclean-leader-election", Level: EventWarn, Message: "unclean leader election: records committed before may be lost",
			Attrs: append(attrs, attr("reason", "unclean.leader.election.enable: no ISR or ELR member could lead"), offset)}
	case known && before.Leader == NoBroker:
		reason = "the partition was offline"
	case len(after.Replicas) > 0 && after.Replicas[0] == after.Leader:
		reason = "the preferred replica"
	}
	return Event{Kind: "leader-elected", Level: EventInfo, Message: "leader elected", Attrs: append(attrs, attr("reason", reason), offset)}
}

// removalReason says why members left an ISR: fenced, shutting down, or
// taken out by the leader for lagging.
func (n *Narrator) removalReason(removed []BrokerID, fenced map[BrokerID]bool) string {
	var reasons []string
	for _, id := range removed {
		switch {
		case fenced[id]:
			reasons = append(reasons, fmt.Sprintf("broker %d fenced", id))
		case n.shuttingDown[id]:
			reasons = append(reasons, fmt.Sprintf("broker %d shutting down", id))
		default:
			reasons = append(reasons, fmt.Sprintf("broker %d fell behind the leader (replica.lag.time.max.ms) or left the replicas", id))
		}
	}
	return joinText(reasons)
}

func difference(a, b []BrokerID) []BrokerID {
	var out []BrokerID
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

func ids(list []BrokerID) string { return fmt.Sprint(list) }

func broker(id BrokerID) EventAttr { return attr("broker", strconv.Itoa(int(id))) }

func attr(key, value string) EventAttr { return EventAttr{Key: key, Value: value} }

func info(kind, message string, attrs ...EventAttr) Event {
	return Event{Kind: kind, Level: EventInfo, Message: message, Attrs: attrs}
}

func joinText(parts []string) string { return strings.Join(parts, "; ") }
