package replica

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// followerReplica returns broker 2 following broker 1 in leader epoch 5 of a
// partition on brokers 1..3, after one fetch brought it records [0, 6) and
// the leader's high watermark 4.
func followerReplica(t *testing.T) *Replica {
	t.Helper()
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	r, err := New(config, LogState{})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: []metadata.BrokerID{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7})
	fetch := r.Ready().Messages[0].Fetch
	batch := producerBatch(6)
	record.SetPartitionLeaderEpoch(batch, 5)
	r.HandleFetchResponse(FetchResponse{ID: fetch.ID, HighWatermark: 4, Records: batch})
	r.Ready()
	if r.LogEndOffset() != 6 || r.HighWatermark() != 4 {
		t.Fatalf("follower at log end %d, high watermark %d; want 6 and 4", r.LogEndOffset(), r.HighWatermark())
	}
	return r
}

// A debugging fetch and ListOffsets (replica id -2) are answered by a
// follower with its own offsets, while a consumer is still sent to the
// leader. Records are read up to the follower's high watermark only: its
// tail above it may not be committed.
func TestDebugRequestsToAFollower(t *testing.T) {
	r := followerReplica(t)
	r.HandleFetch(FetchRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, FetchOffset: 0, MaxBytes: 100})
	r.HandleListOffsets(ListOffsetsRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, Timestamp: LatestTimestamp})
	r.HandleListOffsets(ListOffsetsRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: 5, Timestamp: EarliestTimestamp})
	r.HandleFetch(FetchRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: 5, FetchOffset: 0})
	r.HandleListOffsets(ListOffsetsRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: 5, Timestamp: LatestTimestamp})
	ready := r.Ready()
	onlyAnswers(t, ready, 5)
	fetch := *ready.Answers[0].Fetch
	want := FetchResponse{HighWatermark: 4, LogStartOffset: 0, LogEndOffset: 6, LeaderEpoch: 5, ReadFrom: 0, ReadUpTo: 4, MaxBytes: 100}
	if fetch.ErrorCode != 0 || fetch.DivergingEpoch != nil || fetch.Records != nil || fmt.Sprint(fetch) != fmt.Sprint(want) {
		t.Errorf("debug fetch from a follower: %+v, want %+v", fetch, want)
	}
	if latest := ready.Answers[1].ListOffsets; latest.ErrorCode != 0 || latest.Offset != 6 || latest.LeaderEpoch != 5 {
		t.Errorf("debug latest offset from a follower: %+v, want its log end offset 6", latest)
	}
	if earliest := ready.Answers[2].ListOffsets; earliest.ErrorCode != 0 || earliest.Offset != 0 {
		t.Errorf("debug earliest offset from a follower: %+v, want its log start offset 0", earliest)
	}
	if code := ready.Answers[3].Fetch.ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("a consumer's fetch from a follower answered %d", code)
	}
	if code := ready.Answers[4].ListOffsets.ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("a consumer's ListOffsets from a follower answered %d", code)
	}
	if r.LogEndOffset() != 6 || r.HighWatermark() != 4 || r.follower.inFlight == nil {
		t.Errorf("debug requests changed the follower: %s", r.Debug())
	}
}

// On a leader a debugging fetch sees the raw high watermark, also while a
// new leader withholds it from consumers (rule kafka-2334), and neither
// counts as a follower's fetch nor as a high watermark served.
func TestDebugFetchFromALeader(t *testing.T) {
	// Broker 2 in the ISR has not fetched in epoch 5: the high watermark
	// stays 0, below the epoch's start offset 10.
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2)
	r.HandleFetch(FetchRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: 5, FetchOffset: 0})
	r.HandleFetch(FetchRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: 5, FetchOffset: 10, MaxBytes: 1})
	r.HandleListOffsets(ListOffsetsRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: 5, Timestamp: LatestTimestamp})
	ready := r.Ready()
	onlyAnswers(t, ready, 3)
	if code := ready.Answers[0].Fetch.ErrorCode; code != kerr.OffsetNotAvailable.Code {
		t.Errorf("a consumer's fetch from a new leader answered %d", code)
	}
	debug := ready.Answers[1].Fetch
	if debug.ErrorCode != 0 || debug.HighWatermark != 0 || debug.LogEndOffset != 10 || debug.ReadUpTo != debug.ReadFrom {
		t.Errorf("debug fetch from a new leader: %+v, want high watermark 0, log end 10 and nothing to read", debug)
	}
	if latest := ready.Answers[2].ListOffsets; latest.ErrorCode != 0 || latest.Offset != 10 {
		t.Errorf("debug latest offset from a leader: %+v, want its log end offset 10", latest)
	}
	if progress := r.leader.followers[2]; progress.logEndOffset != -1 || r.highestServedHighWatermark != 0 || r.HighWatermark() != 0 {
		t.Errorf("debug requests changed the leader: %s, served %d", r.Debug(), r.highestServedHighWatermark)
	}
}

// A debugging request is fenced by its current leader epoch like a
// consumer's, on a follower too (KIP-320: -1 skips the check); a replica
// without partition state answers neither; a fetch outside the replica's
// log is OFFSET_OUT_OF_RANGE.
func TestDebugRequestErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		epoch  record.LeaderEpoch
		offset record.Offset
		want   int16
	}{
		{"current epoch", 5, 6, 0},
		{"older epoch", 4, 0, kerr.FencedLeaderEpoch.Code},
		{"newer epoch", 6, 0, kerr.UnknownLeaderEpoch.Code},
		{"past the log end", 5, 7, kerr.OffsetOutOfRange.Code},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := followerReplica(t)
			r.HandleFetch(FetchRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: c.epoch, FetchOffset: c.offset})
			if got := r.Ready().Answers[0].Fetch.ErrorCode; got != c.want {
				t.Errorf("debug fetch answered %d, want %d", got, c.want)
			}
		})
	}
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	offline, err := New(config, LogState{LogEndOffset: 3})
	if err != nil {
		t.Fatal(err)
	}
	offline.HandleFetch(FetchRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch})
	offline.HandleListOffsets(ListOffsetsRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, Timestamp: LatestTimestamp})
	ready := offline.Ready()
	if ready.Answers[0].Fetch.ErrorCode != kerr.NotLeaderForPartition.Code || ready.Answers[1].ListOffsets.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("an offline replica answered debug requests: %+v, %+v", ready.Answers[0].Fetch, ready.Answers[1].ListOffsets)
	}
}

// Debugging requests change nothing: a leader driven through random
// produces, follower fetches and ticks ends in the same state, and hands out
// the same work, whether or not debugging requests are mixed in before
// every step.
func TestDebugRequestsChangeNothing(t *testing.T) {
	for seed := range uint64(200) {
		plain, probed := leaderReplica(t, testConfig(false, nil), 0, 1, 2), leaderReplica(t, testConfig(false, nil), 0, 1, 2)
		random := rand.New(rand.NewPCG(seed, 3))
		for step := range 60 {
			action, value := random.IntN(4), random.Int64N(20)
			for _, probe := range []bool{false, true} {
				r := plain
				if probe {
					r = probed
					r.HandleFetch(FetchRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, FetchOffset: min(record.Offset(value), r.LogEndOffset())})
					r.HandleListOffsets(ListOffsetsRequest{ReplicaID: DebugReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, Timestamp: LatestTimestamp})
					if ready := r.Ready(); len(ready.Answers) != 2 || ready.HighWatermark != nil || len(ready.Proposals) != 0 || len(ready.Log) != 0 {
						t.Fatalf("seed %d step %d: debug requests handed out %s", seed, step, ready)
					}
				}
				applyRandomStep(r, action, value)
			}
			plainReady, probedReady := plain.Ready(), probed.Ready()
			if describeWork(plainReady) != describeWork(probedReady) ||
				plain.Debug() != probed.Debug() || plain.HighWatermark() != probed.HighWatermark() ||
				plain.highestServedHighWatermark != probed.highestServedHighWatermark || fmt.Sprint(plain.State()) != fmt.Sprint(probed.State()) {
				t.Fatalf("seed %d step %d: debug requests changed the leader:\n%s %s\n%s %s", seed, step, plain.Debug(), plainReady, probed.Debug(), probedReady)
			}
		}
	}
}

// applyRandomStep is one step of TestDebugRequestsChangeNothing's leader:
// a produce, a fetch by follower 2 or 3 (never past the leader's log end,
// never back from where it fetched before), or a tick.
func applyRandomStep(r *Replica, action int, value int64) {
	switch action {
	case 0:
		r.HandleProduce(ProduceRequest{ID: uint64(value), Batches: producerBatch(1 + int(value%3)), Acks: AcksAll, TimeoutTicks: 50})
	case 1, 2:
		id := metadata.BrokerID(1 + action)
		offset := min(record.Offset(value), r.LogEndOffset())
		if known, ok := r.FollowerLogEndOffset(id); ok {
			offset = max(offset, known)
		}
		r.HandleFetch(FetchRequest{ReplicaID: id, ReplicaEpoch: metadata.BrokerEpoch(10 * id), CurrentLeaderEpoch: 5, FetchOffset: offset, LastFetchedEpoch: record.NoLeaderEpoch})
	default:
		r.Tick()
	}
}

// describeWork prints a Ready's answers and proposals by value.
func describeWork(ready Ready) string {
	text := ready.String()
	for _, answer := range ready.Answers {
		switch {
		case answer.Produce != nil:
			text += fmt.Sprintf(" produce%+v", *answer.Produce)
		case answer.Fetch != nil:
			text += fmt.Sprintf(" fetch%+v", *answer.Fetch)
		}
	}
	for _, proposal := range ready.Proposals {
		text += " " + proposal.String()
	}
	return text
}

// onlyAnswers fails unless ready holds count answers and no other work.
func onlyAnswers(t *testing.T, ready Ready, count int) {
	t.Helper()
	if len(ready.Answers) != count || len(ready.Log) != 0 || ready.Sync || ready.HighWatermark != nil || len(ready.Messages) != 0 || len(ready.Proposals) != 0 {
		t.Fatalf("want %d answers and nothing else, got %s", count, ready)
	}
}
