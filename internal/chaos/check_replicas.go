package chaos

import (
	"fmt"
	"slices"
)

// checkReplicas compares every replica of each partition with its first
// replica, batch by batch below the partition's final high watermark: a
// batch that differs is a divergence; a replica that ends early lacks
// committed data, a violation once the cluster had settled.
func checkReplicas(h History, result *Result) {
	highWatermarks := map[int32]int64{}
	for _, final := range h.Final {
		highWatermarks[final.Partition] = final.HighWatermark
	}
	byPartition := map[int32][]ReplicaLog{}
	for _, r := range h.Replicas {
		if r.Error != "" {
			result.Notes = append(result.Notes, fmt.Sprintf("partition %d: broker %d's replica was not read: %s", r.Partition, r.Broker, r.Error))
			continue
		}
		byPartition[r.Partition] = append(byPartition[r.Partition], r)
	}
	for _, partition := range sortedKeys(byPartition, func(a, b int32) bool { return a < b }) {
		replicas := byPartition[partition]
		slices.SortFunc(replicas, func(a, b ReplicaLog) int { return int(a.Broker - b.Broker) })
		highWatermark, known := highWatermarks[partition]
		if !known {
			highWatermark = -1
		}
		for _, r := range replicas {
			if v, bad := compareReplica(replicas[0], r, highWatermark, h.Settled); bad {
				v.Partition = partition
				result.Violations = append(result.Violations, v)
			}
		}
	}
}

// committed is a replica's batches that end at or below highWatermark (all
// of them when it is negative: unknown).
func committed(r ReplicaLog, highWatermark int64) []BatchDigest {
	var batches []BatchDigest
	for _, b := range r.Batches {
		if highWatermark < 0 || b.NextOffset <= highWatermark {
			batches = append(batches, b)
		}
	}
	return batches
}

func compareReplica(reference, r ReplicaLog, highWatermark int64, settled bool) (Violation, bool) {
	want, got := committed(reference, highWatermark), committed(r, highWatermark)
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return Violation{Kind: KindReplicasDiverge, Detail: fmt.Sprintf("brokers %d and %d differ at offset %d: batch [%d, %d) %s against [%d, %d) %s",
				reference.Broker, r.Broker, min(want[i].BaseOffset, got[i].BaseOffset), want[i].BaseOffset, want[i].NextOffset, want[i].Digest,
				got[i].BaseOffset, got[i].NextOffset, got[i].Digest)}, true
		}
	}
	if !settled || highWatermark < 0 {
		return Violation{}, false
	}
	for _, replica := range []struct {
		broker  int32
		batches []BatchDigest
	}{{reference.Broker, want}, {r.Broker, got}} {
		end := int64(0)
		if n := len(replica.batches); n > 0 {
			end = replica.batches[n-1].NextOffset
		}
		if first := firstOffset(want, got); end < highWatermark && len(replica.batches) < max(len(want), len(got)) {
			return Violation{Kind: KindReplicaShort, Detail: fmt.Sprintf("broker %d holds [%d, %d) of the committed [%d, %d)",
				replica.broker, first, end, first, highWatermark)}, true
		}
	}
	return Violation{}, false
}

func firstOffset(lists ...[]BatchDigest) int64 {
	for _, l := range lists {
		if len(l) > 0 {
			return l[0].BaseOffset
		}
	}
	return 0
}
