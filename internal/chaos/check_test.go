package chaos

import (
	"fmt"
	"strings"
	"testing"
)

// healthy is a history with nothing wrong: two partitions, three records
// acknowledged on each, read back in place, a rising high watermark, and
// three identical replicas.
func healthy() History {
	h := History{Topic: "chaos", Partitions: 2, Idempotent: true, Settled: true}
	for p := range int32(2) {
		final := FinalLog{Partition: p, HighWatermark: 3, Complete: true}
		for offset := range int64(3) {
			value := fmt.Sprintf("v-%d-%d", p, offset)
			h.Produces = append(h.Produces, Produce{Value: value, Partition: p, Outcome: Acknowledged, Offset: offset})
			h.Reads = append(h.Reads, Read{Partition: p, Offset: offset, Value: value})
			final.Values = append(final.Values, value)
			h.Samples = append(h.Samples, Sample{Broker: 1, Partition: p, HighWatermark: offset + 1, StartMs: 10 * offset, EndMs: 10*offset + 5})
		}
		h.Final = append(h.Final, final)
		for broker := range int32(3) {
			h.Replicas = append(h.Replicas, ReplicaLog{Broker: broker + 1, Partition: p, To: 3,
				Batches: []BatchDigest{{0, 2, "aa"}, {2, 3, "bb"}}})
		}
	}
	return h
}

func kinds(r Result) string {
	var names []string
	for _, v := range r.Violations {
		names = append(names, v.Kind)
	}
	return strings.Join(names, ",")
}

func TestCheckerPassesAHealthyHistory(t *testing.T) {
	r := Check(healthy())
	if len(r.Violations) != 0 || r.Acknowledged != 6 || r.Reads != 6 {
		t.Fatalf("healthy history: %+v", r)
	}
}

// Each doctored history breaks one guarantee; the checker must name it,
// and only it.
func TestCheckerFlagsDoctoredHistories(t *testing.T) {
	cases := []struct {
		name   string
		doctor func(h *History)
		want   string
	}{
		{"a lost acknowledged record", func(h *History) {
			h.Final[0].Values = h.Final[0].Values[:2]
			h.Final[0].Values = append(h.Final[0].Values, "someone-else")
			h.Reads = append(h.Reads[:2], h.Reads[3:]...) // nobody read it
		}, KindLost},
		{"a duplicate", func(h *History) {
			h.Final[1].Values = append(h.Final[1].Values, "v-1-2")
			h.Final[1].HighWatermark = 4
			h.Replicas[3].Batches = append(h.Replicas[3].Batches, BatchDigest{3, 4, "cc"})
			h.Replicas[4].Batches = append(h.Replicas[4].Batches, BatchDigest{3, 4, "cc"})
			h.Replicas[5].Batches = append(h.Replicas[5].Batches, BatchDigest{3, 4, "cc"})
		}, KindDuplicate},
		{"a wrong offset", func(h *History) { h.Produces[1].Offset = 2; h.Produces[2].Offset = 1 }, KindWrongOffset + "," + KindWrongOffset},
		{"a high watermark regression on one broker", func(h *History) {
			h.Samples = append(h.Samples, Sample{Broker: 1, Partition: 0, HighWatermark: 1, StartMs: 100, EndMs: 101})
		}, KindHighWatermarkRegression + "," + KindHighWatermarkRegressionAcrossLeaders},
		{"a high watermark regression across leaders", func(h *History) {
			h.Samples = append(h.Samples, Sample{Broker: 2, Partition: 1, LeaderEpoch: 1, HighWatermark: 2, StartMs: 100, EndMs: 101})
		}, KindHighWatermarkRegressionAcrossLeaders},
		{"a definite error whose record is present", func(h *History) {
			h.Produces[0].Outcome, h.Produces[0].Error = Failed, "INVALID_RECORD"
		}, KindDefiniteErrorPresent},
		{"a read taken back", func(h *History) {
			h.Reads = append(h.Reads, Read{Partition: 0, Offset: 1, Value: "read-then-gone"})
		}, KindReadTakenBack},
		{"diverging replicas", func(h *History) { h.Replicas[2].Batches[1].Digest = "xx" }, KindReplicasDiverge},
		{"a short replica", func(h *History) { h.Replicas[1].Batches = h.Replicas[1].Batches[:1] }, KindReplicaShort},
		{"no acknowledgement after healing", func(h *History) {
			h.HealedMs = 1000
			h.Produces = append(h.Produces, Produce{Value: "late", Partition: 0, Outcome: Indefinite, SentMs: 1500, AnsweredMs: 9000})
		}, KindNoRecovery},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := healthy()
			c.doctor(&h)
			r := Check(h)
			if got := kinds(r); got != c.want {
				t.Fatalf("violations %q, want %q: %v", got, c.want, r.Violations)
			}
		})
	}
}

// A sample that overlaps a higher one (it started before that one ended)
// is concurrent with it, not after it, and is no regression; nor is an
// indefinite record present or absent.
func TestCheckerAllowsWhatMayHappen(t *testing.T) {
	h := healthy()
	h.Samples = append(h.Samples, Sample{Broker: 2, Partition: 0, HighWatermark: 2, StartMs: 20, EndMs: 40})
	h.Produces = append(h.Produces, Produce{Value: "maybe", Partition: 0, Outcome: Indefinite},
		Produce{Value: "v-0-1", Partition: 0, Outcome: Indefinite})
	h.Produces = append(h.Produces, Produce{Value: "v-0-0", Partition: 0, Outcome: Failed})
	h.Idempotent = false
	h.HealedMs = 50 // and something was acknowledged after it
	h.Produces = append(h.Produces, Produce{Value: "v-0-2", Partition: 0, Outcome: Acknowledged, Offset: 2, SentMs: 60, AnsweredMs: 70})
	r := Check(h)
	if len(r.Violations) != 0 || r.IndefinitePresent != 1 || len(r.Notes) != 1 {
		t.Fatalf("%+v", r)
	}
	h.Settled = false
	h.Replicas[1].Batches = h.Replicas[1].Batches[:1]
	if r := Check(h); len(r.Violations) != 0 {
		t.Fatalf("an unsettled cluster's short replica: %v", r.Violations)
	}
}
