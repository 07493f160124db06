package chaos

// History is everything a chaos run observed, the checker's only input:
// what each producer was told about each record, what consumers read,
// what each broker answered for its high watermark, the final contents of
// every partition, and a digest of every replica's log after the nodes
// stopped. Times are milliseconds since the run began.
type History struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
	// Idempotent is true when the producers ran with idempotence and
	// acks=all: only then does a definite error mean "not written".
	Idempotent bool          `json:"idempotent"`
	Produces   []Produce     `json:"produces"`
	Reads      []Read        `json:"reads"`
	Samples    []Sample      `json:"high_watermark_samples"`
	Final      []FinalLog    `json:"final"`
	Replicas   []ReplicaLog  `json:"replicas"`
	Faults     []FaultRecord `json:"faults"`
	// Settled is true when, after the healing, every broker was unfenced
	// and every replica of the topic caught up with its leader before the
	// nodes stopped: only then must every replica hold every committed
	// batch.
	Settled bool `json:"settled"`
	// HealedMs is when the last fault was healed; the producers went on
	// for RecoveryWindow after it (0: the run did not get that far).
	HealedMs int64 `json:"healed_ms"`
}

// Outcome is what a producer learned about one record.
type Outcome int

const (
	// Acknowledged: the broker answered with a partition and an offset.
	Acknowledged Outcome = iota
	// Failed: a definite error; for an idempotent producer, the record was
	// not written.
	Failed
	// Indefinite: a timeout, a lost connection, or no answer before the
	// run ended; the record may or may not be in the log.
	Indefinite
)

func (o Outcome) String() string {
	switch o {
	case Acknowledged:
		return "acknowledged"
	case Failed:
		return "failed"
	}
	return "indefinite"
}

// Produce is one record a producer sent and how it ended.
type Produce struct {
	Value     string  `json:"value"`
	Partition int32   `json:"partition"`
	Outcome   Outcome `json:"outcome"`
	// Offset is the acknowledged offset (Acknowledged only).
	Offset int64 `json:"offset"`
	// Error is the client's error (Failed and Indefinite).
	Error string `json:"error,omitempty"`
	// SentMs and AnsweredMs bound when the record was produced and when
	// its outcome came.
	SentMs     int64 `json:"sent_ms"`
	AnsweredMs int64 `json:"answered_ms"`
}

// Read is one record a consumer read during the run.
type Read struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
	AtMs      int64  `json:"at_ms"`
}

// Sample is one ListOffsets (latest) answer: a broker's high watermark
// for a partition as a client sees it. A sample taken from StartMs to
// EndMs happened after every sample that ended before StartMs.
type Sample struct {
	Broker        int32 `json:"broker"`
	Partition     int32 `json:"partition"`
	LeaderEpoch   int32 `json:"leader_epoch"`
	HighWatermark int64 `json:"high_watermark"`
	StartMs       int64 `json:"start_ms"`
	EndMs         int64 `json:"end_ms"`
}

// FinalLog is a partition as read from its start to its high watermark
// after the faults healed and the cluster settled.
type FinalLog struct {
	Partition     int32    `json:"partition"`
	HighWatermark int64    `json:"high_watermark"`
	StartOffset   int64    `json:"start_offset"`
	Values        []string `json:"values"` // Values[i] is at offset StartOffset+i
	// Complete is false when the read stopped before the high watermark
	// (Error says why); the checker then says so and checks what it has.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// ReplicaLog is one replica's log read from its directory after every
// node stopped: its whole batches up to the partition's final high
// watermark.
type ReplicaLog struct {
	Broker    int32         `json:"broker"`
	Partition int32         `json:"partition"`
	Batches   []BatchDigest `json:"batches"`
	// To is the offset after the last batch read.
	To    int64  `json:"to"`
	Error string `json:"error,omitempty"`
}

// BatchDigest is one record batch of a replica's log: offsets
// [BaseOffset, NextOffset) and a digest of its bytes (leader epoch and CRC
// included), so two replicas agree on a batch only if they hold the same
// bytes.
type BatchDigest struct {
	BaseOffset int64  `json:"base_offset"`
	NextOffset int64  `json:"next_offset"`
	Digest     string `json:"digest"`
}

// FaultRecord is one fault injected: its kind, the nodes it hit, and when
// it began and was healed.
type FaultRecord struct {
	Kind    string  `json:"kind"`
	Nodes   []int32 `json:"nodes"`
	StartMs int64   `json:"start_ms"`
	EndMs   int64   `json:"end_ms"`
	Note    string  `json:"note,omitempty"`
}
