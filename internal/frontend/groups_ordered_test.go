package frontend

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// Rule ordered-coordinator-appends: a coordinator's appends reach the log
// as a prefix of what it handed out. With the log's writes behind (no
// sync runs), a commit of many partitions is refused for the write
// backlog; a small commit handed out after it would fit, and without the
// rule it goes to the replica, a record written after one that never was.
// With the rule the host holds it back and reports it refused, so only
// the first commit is in flight.
func TestRefusedCoordinatorAppendHoldsBackLaterOnes(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		groupRules := rules.Rules{}
		if !ordered {
			groupRules = groupRules.Without(rules.OrderedCoordinatorAppends)
		}
		w := newGroupHostWorldWithBacklog(t, groupRules, 2000)
		partition := w.serving("app")
		w.sync = false
		hosted := w.fe.groups.coordinators[partition]
		send := func(request kmsg.Request) {
			(*backend)(w.fe).Group("app", wire.GroupClient{ID: "test"}, request, func(kmsg.Response, int16) {})
		}
		send(simpleCommit("app", 1))
		_, log, _ := w.fe.Node().Replica(offsetsPartition(partition))
		pending := log.PendingBytes()
		if hosted.appends != 1 || pending == 0 {
			t.Fatalf("ordered %t: the first commit: %d appends in flight, %d bytes pending", ordered, hosted.appends, pending)
		}
		large := simpleCommit("app", 2)
		for index := int32(1); index < 40; index++ {
			partition := kmsg.NewOffsetCommitRequestTopicPartition()
			partition.Partition, partition.Offset = index, 2
			large.Topics[0].Partitions = append(large.Topics[0].Partitions, partition)
		}
		send(large)
		send(simpleCommit("app", 3))
		// The broker's refusal of the large commit, if it went out.
		(*backend)(w.fe).deliverOutbox()
		// Without the rule: the first commit and the third, the refused
		// one's successor, written.
		want := 2
		if ordered {
			want = 1
		}
		if hosted.appends != want {
			t.Fatalf("ordered %t: %d appends in flight after a refused one, want %d", ordered, hosted.appends, want)
		}
	}
}
