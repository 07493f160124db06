package frontend

import (
	"fmt"
	"testing"

	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// TestGroupsViewShowsLagWhereTheBrokerHostsThePartition: a group's
// committed offsets come with the end offset of this broker's replica of
// the partition (here the offsets partition it leads, whose high watermark
// counts the two commit records) and the lag; a partition it hosts no
// replica of shows the commit with the end and lag unknown; and the row
// limit leaves the group out whole, counting its rows.
func TestGroupsViewShowsLagWhereTheBrokerHostsThePartition(t *testing.T) {
	w := newGroupHostWorld(t, rules.Rules{})
	partition := w.serving("app")
	if _, code := w.call("app", simpleCommit("app", 40)); code != 0 {
		t.Fatalf("commit: code %d", code)
	}
	commit := simpleCommit("app", 0)
	commit.Topics[0].Topic, commit.Topics[0].Partitions[0].Partition = wire.OffsetsTopic, partition
	if _, code := w.call("app", commit); code != 0 {
		t.Fatalf("commit: code %d", code)
	}
	view := w.fe.GroupsView(10)
	if len(view.Groups) != 1 || view.Omitted != 0 {
		t.Fatalf("groups %+v, omitted %d", view.Groups, view.Omitted)
	}
	got := fmt.Sprint(view.Groups[0].Partitions)
	want := fmt.Sprintf("[{%s %d 0 2 true 2} {orders 0 40 -1 false -1}]", wire.OffsetsTopic, partition)
	if view.Groups[0].ID != "app" || got != want {
		t.Fatalf("group %s partitions %s, want %s", view.Groups[0].ID, got, want)
	}
	if limited := w.fe.GroupsView(1); len(limited.Groups) != 0 || limited.Omitted != 2 {
		t.Fatalf("with a limit of 1 row: %+v, omitted %d; want none shown and 2 omitted", limited.Groups, limited.Omitted)
	}
}
