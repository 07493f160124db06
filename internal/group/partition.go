package group

import (
	"math"
	"unicode/utf16"
)

// PartitionFor is the __consumer_offsets partition of a group, as Kafka
// computes it (GroupCoordinatorService.partitionFor): Java's
// String.hashCode of the id, over its UTF-16 code units with int32
// arithmetic that wraps, then Utils.abs (MinInt32 becomes 0) modulo the
// partition count. Every broker must agree on it, and Kafka's tools and
// runbooks assume it. Invalid UTF-8 decodes to U+FFFD as in Java, though
// the two may split a malformed run differently (reference §1.3).
func PartitionFor(groupID string, partitions int32) int32 {
	if partitions < 1 {
		return 0
	}
	var hash int32
	for _, unit := range utf16.Encode([]rune(groupID)) {
		hash = 31*hash + int32(unit)
	}
	switch {
	case hash == math.MinInt32:
		hash = 0
	case hash < 0:
		hash = -hash
	}
	return hash % partitions
}
