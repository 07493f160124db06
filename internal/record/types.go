package record

// Offset is a Kafka offset: the position of a record in a partition's log,
// starting at 0 and counting records, not bytes. Ranges of offsets are
// half-open, [lo, hi), unless a comment says otherwise.
type Offset int64

// LeaderEpoch is a partition leader epoch (KIP-101, KIP-320): the number of
// the leadership term in which a batch was appended. The leader stamps it into
// each batch it appends so that followers and consumers can find where their
// log diverged from the leader's after a failover.
type LeaderEpoch int32

// NoLeaderEpoch is the leader epoch a producer writes into a batch, and the
// value Kafka uses for "unknown epoch". The leader replaces it on append.
const NoLeaderEpoch LeaderEpoch = -1
