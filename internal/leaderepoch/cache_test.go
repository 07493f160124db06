package leaderepoch

import (
	"math/rand/v2"
	"testing"

	"github.com/tidelog/tide/internal/record"
)

// naiveEndOffset is the reference for Cache.EndOffsetFor: it walks a
// log of per-offset epochs, written the obvious way from the definition in
// reference/kafka-replication.md section 1.3.
func naiveEndOffset(entries []Entry, requested record.LeaderEpoch, logEnd record.Offset) (record.LeaderEpoch, record.Offset) {
	if requested == record.NoLeaderEpoch || len(entries) == 0 {
		return record.NoLeaderEpoch, -1
	}
	if requested > entries[len(entries)-1].Epoch {
		return record.NoLeaderEpoch, -1
	}
	// The largest epoch at or below requested, and the start of the first
	// epoch above it.
	floor := record.NoLeaderEpoch
	end := logEnd
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Epoch <= requested {
			floor = entries[i].Epoch
			break
		}
		end = entries[i].StartOffset
	}
	if floor == record.NoLeaderEpoch {
		return requested, entries[0].StartOffset
	}
	return floor, end
}

func randomCache(random *rand.Rand) ([]Entry, record.Offset) {
	var entries []Entry
	epoch, offset := record.LeaderEpoch(random.IntN(3)), record.Offset(random.IntN(5))
	for n := random.IntN(6); n > 0; n-- {
		entries = append(entries, Entry{Epoch: epoch, StartOffset: offset})
		epoch += 1 + record.LeaderEpoch(random.IntN(3))
		offset += 1 + record.Offset(random.IntN(10))
	}
	return entries, offset + record.Offset(random.IntN(5))
}

func TestEndOffsetForMatchesNaiveReference(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 20000; run++ {
		entries, logEnd := randomCache(random)
		cache := Cache{entries: entries}
		requested := record.LeaderEpoch(random.IntN(20) - 1)
		gotEpoch, gotEnd := cache.EndOffsetFor(requested, logEnd)
		wantEpoch, wantEnd := naiveEndOffset(entries, requested, logEnd)
		if gotEpoch != wantEpoch || gotEnd != wantEnd {
			t.Fatalf("cache %v log end %d epoch %d: got (%d, %d), want (%d, %d)", entries, logEnd, requested, gotEpoch, gotEnd, wantEpoch, wantEnd)
		}
	}
}

func TestCacheAssignKeepsEntriesIncreasing(t *testing.T) {
	random := rand.New(rand.NewPCG(3, 4))
	for run := 0; run < 5000; run++ {
		var cache Cache
		for step := 0; step < 20; step++ {
			switch random.IntN(4) {
			case 0, 1:
				epoch, start := record.LeaderEpoch(random.IntN(10)), record.Offset(random.IntN(50))
				cache.Assign(epoch, start)
				if latest, _ := cache.Latest(); latest.Epoch != epoch {
					t.Fatalf("assign(%d, %d) left latest %v", epoch, start, latest)
				}
			case 2:
				end := record.Offset(random.IntN(50))
				cache.TruncateFromEnd(end)
				for _, entry := range cache.entries {
					if entry.StartOffset >= end {
						t.Fatalf("truncate from end %d left %v", end, cache.entries)
					}
				}
			case 3:
				start := record.Offset(random.IntN(50))
				before := cache.EpochAt(start)
				cache.TruncateFromStart(start)
				if after := cache.EpochAt(start); after != before {
					t.Fatalf("truncate from start %d changed the epoch at %d from %d to %d", start, start, before, after)
				}
				if len(cache.entries) > 0 && cache.entries[0].StartOffset < start {
					t.Fatalf("truncate from start %d left %v", start, cache.entries)
				}
			}
			if err := cache.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestCacheCases(t *testing.T) {
	cache := Cache{}
	cache.Assign(1, 0)
	cache.Assign(1, 5) // same epoch, later offset: no-op
	cache.Assign(3, 10)
	cache.Assign(5, 20)
	cases := []struct {
		requested record.LeaderEpoch
		epoch     record.LeaderEpoch
		end       record.Offset
	}{
		{record.NoLeaderEpoch, record.NoLeaderEpoch, -1},
		{0, 0, 0},  // predates the cache: start of the first epoch (KAFKA-7415)
		{1, 1, 10}, // ends where epoch 3 begins
		{2, 1, 10}, // unknown epoch: the largest below it, KIP-279
		{3, 3, 20}, // ends where epoch 5 begins
		{4, 3, 20}, // unknown epoch between two known ones
		{5, 5, 30}, // the latest ends at the log end offset
		{6, record.NoLeaderEpoch, -1},
	}
	for _, c := range cases {
		epoch, end := cache.EndOffsetFor(c.requested, 30)
		if epoch != c.epoch || end != c.end {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", c.requested, epoch, end, c.epoch, c.end)
		}
	}
	if !cache.Assign(4, 15) || cache.LatestEpoch() != 4 || len(cache.entries) != 3 {
		t.Errorf("assigning an older epoch must drop newer entries: %v", cache.entries)
	}
}

func TestEpochCheckpointRoundTrip(t *testing.T) {
	cache := Cache{entries: []Entry{{1, 0}, {4, 100}, {7, 250}}}
	decoded, err := UnmarshalCheckpoint(cache.MarshalCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded.entries) != 3 || decoded.entries[2] != (Entry{7, 250}) {
		t.Fatalf("round trip gave %v", decoded.entries)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n1 0\n", "0\n2\n1 0\n1 5\n", "0\n1\nx y\n", "0\n1\n-1 0\n"} {
		if _, err := UnmarshalCheckpoint([]byte(bad)); err == nil {
			t.Errorf("unmarshal(%q) accepted", bad)
		}
	}
}
