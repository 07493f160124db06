package metadata

import (
	"strings"
	"testing"
)

// describe writes events one a line, "message key=value ...", for tests.
func describe(events []Event) string {
	var lines []string
	for _, e := range events {
		line := e.Message
		if e.Kind == "" {
			line = "NO KIND " + line
		}
		if e.Level == EventWarn {
			line = "WARN " + line
		}
		for _, a := range e.Attrs {
			if a.Key != "metadata_offset" {
				line += " " + a.Key + "=" + a.Value
			}
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// TestNarratorSaysWhy: each kind of partition change is told with its
// reason, read from the batch it was committed in.
func TestNarratorSaysWhy(t *testing.T) {
	img := fixture(t) // orders-0: replicas and ISR [1 2 3], leader 1
	n := NewNarrator(img)
	change := func(leader BrokerID, isr, elr []BrokerID, epoch int) PartitionChange {
		return PartitionChange{TopicPartition: orders0, Leader: leader, ISR: isr, ELR: elr, LeaderEpoch: 0, PartitionEpoch: PartitionEpoch(epoch)}
	}
	steps := []struct {
		batch []Record
		want  []string
	}{
		{[]Record{change(1, []BrokerID{1, 2}, nil, 1)},
			[]string{"ISR shrank partition=orders-0 isr=[1 2] removed=[3] reason=broker 3 fell behind"}},
		{[]Record{change(2, []BrokerID{2}, nil, 2), FenceBroker{ID: 1, Epoch: 1}},
			[]string{"leader elected partition=orders-0 leader=2", "previous_leader=1 reason=the previous leader was fenced",
				"ISR shrank partition=orders-0 isr=[2] removed=[1] reason=broker 1 fenced", "broker fenced broker=1 reason=it missed its session"}},
		{[]Record{change(2, []BrokerID{2, 3}, nil, 3)},
			[]string{"ISR expanded: a follower caught up partition=orders-0 isr=[2 3] added=[3]"}},
		{[]Record{BeginControlledShutdown{ID: 2}, change(3, []BrokerID{3}, nil, 4)},
			[]string{"broker began a controlled shutdown", "leader elected partition=orders-0 leader=3", "reason=the previous leader is shutting down",
				"reason=broker 2 shutting down"}},
		{[]Record{change(NoBroker, []BrokerID{}, []BrokerID{3}, 5)},
			[]string{"WARN partition offline: no replica may lead it partition=orders-0 leader=-1"}},
		{[]Record{change(1, []BrokerID{1}, nil, 6)},
			[]string{"WARN unclean leader election: records committed before may be lost partition=orders-0 leader=1"}},
		{[]Record{DeleteTopic{Name: "orders"}}, []string{"topic deleted topic=orders"}},
	}
	for i, step := range steps {
		var entries []Entry
		for _, r := range step.batch {
			entries = append(entries, Entry{Offset: int64(100 + i), Record: r})
		}
		got := describe(n.Narrate(entries))
		if strings.Contains(got, "NO KIND") {
			t.Errorf("step %d: an event without a kind:\n%s", i, got)
		}
		for _, want := range step.want {
			if !strings.Contains(got, want) {
				t.Errorf("step %d: lacks %q:\n%s", i, want, got)
			}
		}
	}
}
