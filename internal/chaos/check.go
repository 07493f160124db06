package chaos

import (
	"fmt"
	"slices"
	"sort"
)

// Violation kinds: each names a guarantee the run broke.
const (
	// Lost: an acknowledged record is not in the final log.
	KindLost = "lost"
	// WrongOffset: an acknowledged record is in the final log at another
	// offset (or partition) than the one it was acknowledged at.
	KindWrongOffset = "wrong-offset"
	// Duplicate: one produced value is in the final logs more than once.
	KindDuplicate = "duplicate"
	// DefiniteErrorPresent: an idempotent producer was told a record
	// failed, and the record is in the log anyway.
	KindDefiniteErrorPresent = "definite-error-present"
	// ReadTakenBack: a record a consumer read is not at that offset in the
	// final log.
	KindReadTakenBack = "read-taken-back"
	// HighWatermarkRegression: one broker answered a lower high watermark
	// after it had answered a higher one.
	KindHighWatermarkRegression = "high-watermark-regression"
	// HighWatermarkRegressionAcrossLeaders: a broker answered a lower high
	// watermark than another broker had answered before the request was
	// sent (requests carry the newest leader epoch seen, so a stale leader
	// is fenced rather than answering).
	KindHighWatermarkRegressionAcrossLeaders = "high-watermark-regression-across-leaders"
	// ReplicasDiverge: two replicas hold different bytes at the same
	// offsets below the high watermark.
	KindReplicasDiverge = "replicas-diverge"
	// ReplicaShort: after the cluster settled, a replica lacks committed
	// batches below the high watermark.
	KindReplicaShort = "replica-short"
	// NoRecovery: nothing was acknowledged in the RecoveryWindow after
	// every fault healed.
	KindNoRecovery = "no-recovery"
)

// Violation is one broken guarantee.
type Violation struct {
	Kind      string `json:"kind"`
	Partition int32  `json:"partition"`
	Detail    string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: partition %d: %s", v.Kind, v.Partition, v.Detail)
}

// Result is the checker's verdict on a history.
type Result struct {
	Acknowledged int `json:"acknowledged"`
	Failed       int `json:"failed"`
	Indefinite   int `json:"indefinite"`
	// IndefinitePresent counts indefinite records found in the log (each
	// may or may not have been written; neither is a violation).
	IndefinitePresent int         `json:"indefinite_present"`
	Reads             int         `json:"reads"`
	Samples           int         `json:"high_watermark_samples"`
	Violations        []Violation `json:"violations"`
	Notes             []string    `json:"notes"`
}

// Counts are the violations by kind.
func (r Result) Counts() map[string]int {
	counts := map[string]int{}
	for _, v := range r.Violations {
		counts[v.Kind]++
	}
	return counts
}

// location is where a value is in the final logs.
type location struct {
	partition int32
	offset    int64
}

// Check judges a history. It is a pure function: the same history gives
// the same result, violations in a stable order.
func Check(h History) Result {
	var result Result
	found := checkFinalLogs(h, &result)
	checkProduces(h, found, &result)
	checkReads(h, found, &result)
	checkHighWatermarks(h.Samples, &result)
	checkReplicas(h, &result)
	checkRecovery(h, &result)
	result.Reads, result.Samples = len(h.Reads), len(h.Samples)
	return result
}

// checkFinalLogs indexes the final logs by value and flags values in them
// twice.
func checkFinalLogs(h History, result *Result) map[string][]location {
	found := map[string][]location{}
	for _, final := range h.Final {
		if !final.Complete {
			result.Notes = append(result.Notes, fmt.Sprintf("partition %d: the final read stopped at offset %d of %d: %s",
				final.Partition, final.StartOffset+int64(len(final.Values)), final.HighWatermark, final.Error))
		}
		for i, value := range final.Values {
			found[value] = append(found[value], location{final.Partition, final.StartOffset + int64(i)})
		}
	}
	values := make([]string, 0, len(found))
	for value, where := range found {
		if len(where) > 1 {
			values = append(values, value)
		}
	}
	slices.Sort(values)
	for _, value := range values {
		where := found[value]
		result.Violations = append(result.Violations, Violation{Kind: KindDuplicate, Partition: where[0].partition,
			Detail: fmt.Sprintf("%s is in the log %d times: %v", value, len(where), where)})
	}
	return found
}

// readUpTo is, per partition, the end of what the final read covered.
func readUpTo(h History) map[int32]int64 {
	ends := map[int32]int64{}
	for _, final := range h.Final {
		ends[final.Partition] = final.StartOffset + int64(len(final.Values))
	}
	return ends
}

func checkProduces(h History, found map[string][]location, result *Result) {
	ends := readUpTo(h)
	for _, p := range h.Produces {
		where := found[p.Value]
		switch p.Outcome {
		case Acknowledged:
			result.Acknowledged++
			checkAcknowledged(p, where, ends, result)
		case Failed:
			result.Failed++
			if len(where) == 0 {
				continue
			}
			detail := fmt.Sprintf("%s failed (%s) but is at offset %d", p.Value, p.Error, where[0].offset)
			if h.Idempotent {
				result.Violations = append(result.Violations, Violation{Kind: KindDefiniteErrorPresent, Partition: p.Partition, Detail: detail})
			} else {
				result.Notes = append(result.Notes, "without idempotence a failed record may be written: "+detail)
			}
		case Indefinite:
			result.Indefinite++
			if len(where) > 0 {
				result.IndefinitePresent++
			}
		}
	}
}

func checkAcknowledged(p Produce, where []location, ends map[int32]int64, result *Result) {
	end, read := ends[p.Partition]
	switch {
	case len(where) == 0 && read && p.Offset >= end:
		result.Notes = append(result.Notes, fmt.Sprintf("%s acknowledged at %d-%d, beyond the final read (it ended at %d)", p.Value, p.Partition, p.Offset, end))
	case len(where) == 0:
		result.Violations = append(result.Violations, Violation{Kind: KindLost, Partition: p.Partition,
			Detail: fmt.Sprintf("%s acknowledged at offset %d (%d ms) is not in the log", p.Value, p.Offset, p.AnsweredMs)})
	case where[0] != location{p.Partition, p.Offset}:
		result.Violations = append(result.Violations, Violation{Kind: KindWrongOffset, Partition: p.Partition,
			Detail: fmt.Sprintf("%s acknowledged at %d-%d is at %d-%d", p.Value, p.Partition, p.Offset, where[0].partition, where[0].offset)})
	}
}

// checkRecovery flags a cluster that acknowledged nothing after the
// faults healed, though producers were writing.
func checkRecovery(h History, result *Result) {
	if h.HealedMs == 0 {
		return
	}
	sent := false
	for _, p := range h.Produces {
		if p.AnsweredMs >= h.HealedMs && p.Outcome == Acknowledged {
			return
		}
		sent = sent || p.SentMs >= h.HealedMs
	}
	if sent {
		result.Violations = append(result.Violations, Violation{Kind: KindNoRecovery, Partition: -1,
			Detail: fmt.Sprintf("records were produced after every fault healed (%d ms) and none was acknowledged", h.HealedMs)})
	}
}

// checkReads flags a record read during the run that is not at the same
// place in the final log: a read taken back.
func checkReads(h History, found map[string][]location, result *Result) {
	ends := readUpTo(h)
	for _, r := range h.Reads {
		if end, read := ends[r.Partition]; read && r.Offset >= end {
			continue
		}
		if !slices.Contains(found[r.Value], location{r.Partition, r.Offset}) {
			result.Violations = append(result.Violations, Violation{Kind: KindReadTakenBack, Partition: r.Partition,
				Detail: fmt.Sprintf("%s read at offset %d (%d ms) is not there in the final log (found at %v)", r.Value, r.Offset, r.AtMs, found[r.Value])})
		}
	}
}

// checkHighWatermarks flags a sample lower than one that ended before it
// started: from the same broker, and from any broker.
func checkHighWatermarks(samples []Sample, result *Result) {
	byPartition := map[int32][]Sample{}
	byBroker := map[[2]int32][]Sample{}
	for _, s := range samples {
		byPartition[s.Partition] = append(byPartition[s.Partition], s)
		byBroker[[2]int32{s.Partition, s.Broker}] = append(byBroker[[2]int32{s.Partition, s.Broker}], s)
	}
	for _, key := range sortedKeys(byBroker, func(a, b [2]int32) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }) {
		for _, detail := range regressions(byBroker[key]) {
			result.Violations = append(result.Violations, Violation{Kind: KindHighWatermarkRegression, Partition: key[0],
				Detail: fmt.Sprintf("broker %d: %s", key[1], detail)})
		}
	}
	for _, partition := range sortedKeys(byPartition, func(a, b int32) bool { return a < b }) {
		for _, detail := range regressions(byPartition[partition]) {
			result.Violations = append(result.Violations, Violation{Kind: KindHighWatermarkRegressionAcrossLeaders, Partition: partition, Detail: detail})
		}
	}
}

// regressions sweeps samples in the order they started, keeping the
// highest high watermark among those that ended before: a sample below it
// saw the high watermark go back.
func regressions(samples []Sample) []string {
	started := slices.Clone(samples)
	sort.SliceStable(started, func(i, j int) bool { return started[i].StartMs < started[j].StartMs })
	ended := slices.Clone(samples)
	sort.SliceStable(ended, func(i, j int) bool { return ended[i].EndMs < ended[j].EndMs })
	var details []string
	highest, next := Sample{HighWatermark: -1}, 0
	for _, s := range started {
		for ; next < len(ended) && ended[next].EndMs < s.StartMs; next++ {
			if ended[next].HighWatermark > highest.HighWatermark {
				highest = ended[next]
			}
		}
		if s.HighWatermark < highest.HighWatermark {
			details = append(details, fmt.Sprintf("high watermark %d (broker %d, epoch %d, at %d ms) after %d (broker %d, epoch %d, at %d ms)",
				s.HighWatermark, s.Broker, s.LeaderEpoch, s.StartMs, highest.HighWatermark, highest.Broker, highest.LeaderEpoch, highest.EndMs))
		}
	}
	return details
}

func sortedKeys[K comparable, V any](m map[K]V, less func(a, b K) bool) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return less(keys[i], keys[j]) })
	return keys
}
