package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOverviewsShowGroupsAndTheirCommittedOffsets: the overview lists every
// group in id order, a simple (offsets only) group, a consumer group with
// its member, with the committed offsets only; and the row limit leaves
// whole groups out, counting their rows, never half a group.
func TestOverviewsShowGroupsAndTheirCommittedOffsets(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.send(commitRequest(8, "alpha", -1, "", "orders", map[int32]int64{0: 10, 1: 20}))
	h.send(commitRequest(8, "beta", -1, "", "orders", map[int32]int64{0: 5}))
	h.send(consumerJoin("gamma", "m1", "t"))
	h.autoCommit = false
	h.send(commitRequest(8, "beta", -1, "", "orders", map[int32]int64{0: 7})) // not committed yet
	overviews, omitted := h.coordinator.Overviews(10)
	if got := fmt.Sprint(overviews); got != "[{alpha classic Empty   [] [{orders 0 10} {orders 1 20}]} "+
		"{beta classic Empty   [] [{orders 0 5}]} "+
		"{gamma consumer Stable consumer uniform [{m1 client /127.0.0.1}] []}]" || omitted != 0 {
		t.Fatalf("overviews %s, omitted %d", got, omitted)
	}
	for _, limit := range []struct{ rows, shown, omitted int }{{4, 3, 0}, {3, 2, 1}, {2, 1, 2}, {1, 0, 4}, {0, 0, 4}} {
		overviews, omitted := h.coordinator.Overviews(limit.rows)
		if len(overviews) != limit.shown || omitted != limit.omitted {
			t.Errorf("limit %d rows: %d groups shown, %d rows omitted; want %d and %d", limit.rows, len(overviews), omitted, limit.shown, limit.omitted)
		}
	}
	h.coordinator.Unload()
	if overviews, omitted := h.coordinator.Overviews(10); overviews != nil || omitted != 0 {
		t.Fatalf("an unloaded coordinator shows %v (%d omitted)", overviews, omitted)
	}
}

// BenchmarkOverviews is what a scrape's read of the groups costs the node
// loop at the default limit: 1000 groups of 10 committed partitions.
func BenchmarkOverviews(b *testing.B) {
	h := newHarness(b, DefaultConfig())
	offsets := map[int32]int64{}
	for p := range int32(10) {
		offsets[p] = 40
	}
	for g := range 1000 {
		h.send(commitRequest(8, fmt.Sprintf("group-%d", g), -1, "", "orders", offsets))
	}
	b.ReportAllocs()
	for b.Loop() {
		if overviews, _ := h.coordinator.Overviews(10000); len(overviews) != 1000 {
			b.Fatalf("%d groups", len(overviews))
		}
	}
}

// TestOverviewsLeaveOutAGroupBeingDeleted: while a DeleteGroups waits for
// its tombstones to commit the group is Dead, and the overview, like
// ListGroups, no longer shows it.
func TestOverviewsLeaveOutAGroupBeingDeleted(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	h.send(commitRequest(8, "alpha", -1, "", "orders", map[int32]int64{0: 10}))
	h.autoCommit = false
	h.send(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"alpha"}})
	if overviews, omitted := h.coordinator.Overviews(10); len(overviews) != 0 || omitted != 0 {
		t.Fatalf("a group being deleted shows: %v (%d omitted)", overviews, omitted)
	}
}
