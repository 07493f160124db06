package wire

// dedupePartitions keeps one entry per (topic, partition) of a request's
// topics, at the place it was first named, with the fields it was last
// given, as Kafka's map by partition reads a request; topics left with no
// partitions are dropped. It returns the topics and how many partitions
// are left. fields gives a topic's name and its partitions; partition a
// partition's index. A request without duplicates is returned as it is.
func dedupePartitions[T, P any](topics []T, fields func(*T) (string, *[]P), partition func(*P) int32) ([]T, int) {
	type key struct {
		topic     string
		partition int32
	}
	last := map[key]P{}
	total := 0
	for i := range topics {
		name, partitions := fields(&topics[i])
		for j := range *partitions {
			last[key{name, partition(&(*partitions)[j])}] = (*partitions)[j]
			total++
		}
	}
	if len(last) == total {
		return topics, total
	}
	kept := topics[:0]
	for i := range topics {
		topic := topics[i]
		name, partitions := fields(&topic)
		var unique []P
		for j := range *partitions {
			k := key{name, partition(&(*partitions)[j])}
			if entry, ok := last[k]; ok {
				unique = append(unique, entry)
				delete(last, k)
			}
		}
		if len(unique) > 0 {
			*partitions = unique
			kept = append(kept, topic)
		}
	}
	left := 0
	for i := range kept {
		_, partitions := fields(&kept[i])
		left += len(*partitions)
	}
	return kept, left
}
