package replica

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// leaderReplica returns broker 1 leading a partition replicated on brokers
// 1..3 with the given ISR, in leader epoch 5, with its log at logEnd (all
// durable), every broker registered and unfenced.
func leaderReplica(t *testing.T, config Config, logEnd record.Offset, isr ...metadata.BrokerID) *Replica {
	t.Helper()
	config.Broker, config.Partition = 1, testPartition
	r, err := New(config, LogState{LogEndOffset: logEnd, DurableEndOffset: logEnd})
	if err != nil {
		t.Fatal(err)
	}
	r.SetBrokers([]metadata.BrokerState{{ID: 1, Epoch: 10}, {ID: 2, Epoch: 20}, {ID: 3, Epoch: 30}})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: isr, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7})
	r.Ready()
	return r
}

func producerBatch(records int) []byte {
	list := make([]record.Record, records)
	for i := range list {
		list[i] = record.Record{Value: []byte("v")}
	}
	return record.Build(record.BuildOptions{Records: list, LeaderEpoch: record.NoLeaderEpoch})
}

func produceAnswers(ready Ready) []ProduceAnswer {
	var answers []ProduceAnswer
	for _, answer := range ready.Answers {
		if answer.Produce != nil {
			answers = append(answers, *answer.Produce)
		}
	}
	return answers
}

func TestFetchEpochFencing(t *testing.T) {
	for _, c := range []struct {
		name   string
		epoch  record.LeaderEpoch
		legacy bool
		want   int16
	}{
		{"current epoch", 5, false, 0},
		{"no epoch: not checked", record.NoLeaderEpoch, false, 0},
		{"older epoch: the sender is a zombie", 4, false, kerr.FencedLeaderEpoch.Code},
		{"newer epoch: this leader is behind", 6, false, kerr.UnknownLeaderEpoch.Code},
		{"older epoch without rule kafka-6880", 4, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			config := testConfig(false, nil)
			if c.legacy {
				config.Rules = config.Rules.Without(rules.FencedFetch)
			}
			r := leaderReplica(t, config, 10, 1, 2, 3)
			r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: c.epoch, FetchOffset: 10, LastFetchedEpoch: record.NoLeaderEpoch})
			r.HandleListOffsets(ListOffsetsRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: c.epoch, Timestamp: EarliestTimestamp})
			r.HandleOffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest{ReplicaID: 2, CurrentLeaderEpoch: c.epoch, LeaderEpoch: 5})
			ready := r.Ready()
			if got := ready.Answers[0].Fetch.ErrorCode; got != c.want {
				t.Errorf("fetch answered %d, want %d", got, c.want)
			}
			if got := ready.Answers[1].ListOffsets.ErrorCode; got != c.want {
				t.Errorf("list offsets answered %d, want %d", got, c.want)
			}
			if got := ready.Answers[2].OffsetsForLeaderEpoch.ErrorCode; got != c.want {
				t.Errorf("offsets for leader epoch answered %d, want %d", got, c.want)
			}
		})
	}
}

// A fetch from before the follower restarted (an older broker epoch) must
// not count: the restarted follower may have lost what that fetch said it
// had (KIP-903).
func TestFetchFromOlderIncarnationIsRejected(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2, 3)
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 19, CurrentLeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: 5})
	if got := r.Ready().Answers[0].Fetch.ErrorCode; got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from an old incarnation answered %d", got)
	}
	if progress := r.leader.followers[2]; progress.logEndOffset != -1 {
		t.Fatalf("the old incarnation's fetch moved the follower to %d", progress.logEndOffset)
	}
}

// A follower that restarted with an empty log (its data disk replaced)
// fetches from 0 as a newer incarnation than the leader's metadata knows,
// while the leader, cut off from the controller, still has it in the ISR:
// that is no broken invariant, and the high watermark stays where it is.
func TestFetchFromNewerIncarnationBelowTheHighWatermark(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2)
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: 5})
	r.Ready()
	if r.HighWatermark() != 10 {
		t.Fatalf("high watermark %d, want 10", r.HighWatermark())
	}
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 25, CurrentLeaderEpoch: 5, FetchOffset: 0, LastFetchedEpoch: record.NoLeaderEpoch})
	ready := r.Ready()
	if len(ready.Violations) != 0 || r.HighWatermark() != 10 {
		t.Fatalf("violations %v, high watermark %d", ready.Violations, r.HighWatermark())
	}
	// The same incarnation fetching below the high watermark is a bug.
	defer func() {
		if recover() == nil {
			t.Fatal("an ISR member of the known incarnation below the high watermark did not panic")
		}
	}()
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 3, LastFetchedEpoch: 5})
}

func TestProduceErrors(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 2

	follower, _ := New(Config{Broker: 2, Partition: testPartition, MinInsyncReplicas: 1, ReplicaLagTicks: 1, FetchRetryTicks: 1, ProposalRetryTicks: 1, MaxBatchBytes: 1 << 20, MaxPendingProduces: 1}, LogState{})
	follower.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(1), Acks: AcksAll})
	if answers := produceAnswers(follower.Ready()); answers[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("produce to a non-leader answered %d", answers[0].ErrorCode)
	}

	r := leaderReplica(t, config, 0, 1)
	r.HandleProduce(ProduceRequest{ID: 2, Batches: producerBatch(1), Acks: AcksAll})
	if answers := produceAnswers(r.Ready()); answers[0].ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all with the ISR below min.insync.replicas answered %d", answers[0].ErrorCode)
	}
	if r.LogEndOffset() != 0 {
		t.Errorf("a refused produce was appended")
	}

	corrupt := producerBatch(3)
	corrupt[len(corrupt)-1] ^= 1
	r.HandleProduce(ProduceRequest{ID: 3, Batches: corrupt, Acks: AcksLeader})
	if answers := produceAnswers(r.Ready()); answers[0].ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("a corrupt batch answered %d", answers[0].ErrorCode)
	}
}

// acks=all is answered when the high watermark passes the batch; if the ISR
// shrank below min.insync.replicas meanwhile the answer says so; with no
// progress it times out.
func TestAcksAllWaitsForTheISR(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 2
	r := leaderReplica(t, config, 0, 1, 2)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(3), Acks: AcksAll, TimeoutTicks: 100})
	if answers := produceAnswers(r.Ready()); len(answers) != 0 {
		t.Fatalf("acks=all answered before any follower fetched: %+v", answers)
	}
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 3, LastFetchedEpoch: 5})
	answers := produceAnswers(r.Ready())
	if len(answers) != 1 || answers[0].ErrorCode != 0 || answers[0].BaseOffset != 0 {
		t.Fatalf("acks=all after the ISR has the batch: %+v", answers)
	}

	r.HandleProduce(ProduceRequest{ID: 2, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3}, ISR: []metadata.BrokerID{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8})
	r.HandleFetch(FetchRequest{ReplicaID: 2, ReplicaEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 4, LastFetchedEpoch: 5})
	r.HandleFetch(FetchRequest{ReplicaID: 3, ReplicaEpoch: 30, CurrentLeaderEpoch: 5, FetchOffset: 4, LastFetchedEpoch: 5})
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != 0 {
		t.Fatalf("acks=all with a full ISR: %+v", answers)
	}

	r.HandleProduce(ProduceRequest{ID: 3, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3}, ISR: []metadata.BrokerID{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9})
	if answers := produceAnswers(r.Ready()); len(answers) != 0 {
		t.Fatalf("the ISR shrank below min.insync.replicas, yet the high watermark moved: %+v", answers)
	}
	for i := 0; i < 100; i++ {
		r.Tick()
	}
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || answers[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all that cannot commit: %+v, want a timeout", answers)
	}
}

// KAFKA-15583 keeps the high watermark still while the ISR is below
// min.insync.replicas, so a waiting acks=all request normally times out
// instead. Should its batch be found committed with the ISR too small (the
// answer is computed apart from the advance), the answer is Kafka's
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, never success.
func TestAcksAllAfterISRShrinkIsNotEnoughReplicasAfterAppend(t *testing.T) {
	config := testConfig(false, nil)
	config.MinInsyncReplicas = 2
	r := leaderReplica(t, config, 0, 1, 2)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(1), Acks: AcksAll, TimeoutTicks: 100})
	r.Ready()
	r.state.ISR = []metadata.BrokerID{1}
	r.highWatermark = 1
	r.answerLeaderAcks()
	answers := produceAnswers(r.Ready())
	if len(answers) != 1 || answers[0].ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Fatalf("acks=all answered %+v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", answers)
	}
}

// With flush=always a leader's own log counts toward the high watermark only
// once synced, and acks=1 waits for that sync too.
func TestLeaderCountsOnlyDurableData(t *testing.T) {
	r := leaderReplica(t, testConfig(true, nil), 0, 1)
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(2), Acks: AcksLeader, TimeoutTicks: 100})
	ready := r.Ready()
	if !ready.Sync || len(produceAnswers(ready)) != 0 || r.HighWatermark() != 0 {
		t.Fatalf("before the sync: %s, high watermark %d", ready, r.HighWatermark())
	}
	r.Synced(2)
	if answers := produceAnswers(r.Ready()); len(answers) != 1 || r.HighWatermark() != 2 {
		t.Fatalf("after the sync: %+v, high watermark %d", answers, r.HighWatermark())
	}
}

// A new leader records its epoch at its log end offset before any append
// (KAFKA-7415), and the Ready says so in that order.
func TestNewLeaderAssignsEpochBeforeAppending(t *testing.T) {
	config := testConfig(false, nil)
	config.Broker, config.Partition = 1, testPartition
	r, _ := New(config, LogState{LogEndOffset: 4, DurableEndOffset: 4, Epochs: nil})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1}, ISR: []metadata.BrokerID{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3})
	r.HandleProduce(ProduceRequest{ID: 1, Batches: producerBatch(1), Acks: AcksLeader})
	ready := r.Ready()
	if len(ready.Log) != 2 || ready.Log[0].Kind != AssignEpoch || ready.Log[0].Epoch != 3 || ready.Log[1].Kind != Append {
		t.Fatalf("log operations %v", ready.Log)
	}
	if got := record.PartitionLeaderEpoch(ready.Log[1].Batches); got != 3 {
		t.Fatalf("appended batch stamped with epoch %d", got)
	}
	if got := record.BaseOffset(ready.Log[1].Batches); got != 4 {
		t.Fatalf("appended batch stamped with offset %d", got)
	}
}

// A follower with flush=always fetches past what it appended only once that
// is synced: its fetch offset tells the leader it has the data.
func TestFollowerFetchesOnlyDurableData(t *testing.T) {
	config := testConfig(true, nil)
	config.Broker, config.Partition = 2, testPartition
	r, _ := New(config, LogState{})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0})
	fetch := r.Ready().Messages[0].Fetch
	records := record.Build(record.BuildOptions{LeaderEpoch: 0, Records: []record.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	r.HandleFetchResponse(FetchResponse{ID: fetch.ID, HighWatermark: 0, Records: records})
	ready := r.Ready()
	if !ready.Sync || len(ready.Messages) != 0 {
		t.Fatalf("after appending: %s", ready)
	}
	r.Synced(2)
	ready = r.Ready()
	if len(ready.Messages) != 1 || ready.Messages[0].Fetch.FetchOffset != 2 {
		t.Fatalf("after the sync: %+v", ready.Messages)
	}
}

func TestListOffsets(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1)
	for _, c := range []struct {
		timestamp int64
		replica   metadata.BrokerID
		want      record.Offset
		epoch     record.LeaderEpoch
		code      int16
		// lookUpTo, when not -1, says the answer is a lookup by
		// timestamp bounded there.
		lookUpTo record.Offset
	}{
		{EarliestTimestamp, ConsumerReplicaID, 0, 5, 0, -1},
		{EarliestLocalTimestamp, ConsumerReplicaID, 0, 5, 0, -1},
		{LatestTieredTimestamp, ConsumerReplicaID, -1, record.NoLeaderEpoch, 0, -1},
		{LatestTimestamp, ConsumerReplicaID, 10, 5, 0, -1},
		{LatestTimestamp, 2, 10, 5, 0, -1},
		{12345, ConsumerReplicaID, -1, 5, 0, 10},
		{0, ConsumerReplicaID, -1, 5, 0, 10},
		{MaxTimestamp, 2, -1, 5, 0, 10},
		{-6, ConsumerReplicaID, -1, 5, kerr.InvalidRequest.Code, -1},
	} {
		r.HandleListOffsets(ListOffsetsRequest{ReplicaID: c.replica, CurrentLeaderEpoch: 5, Timestamp: c.timestamp})
		answer := r.Ready().Answers[0].ListOffsets
		lookup := c.lookUpTo >= 0
		if answer.Offset != c.want || answer.ErrorCode != c.code || answer.LeaderEpoch != c.epoch || answer.Lookup != lookup ||
			lookup && (answer.LookupUpTo != c.lookUpTo || answer.LookupTimestamp != c.timestamp) {
			t.Errorf("list offsets at %d: %+v, want offset %d epoch %d code %d lookup up to %d", c.timestamp, answer, c.want, c.epoch, c.code, c.lookUpTo)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := testConfig(false, nil)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*Config){
		func(c *Config) { c.Broker = -1 },
		func(c *Config) { c.MinInsyncReplicas = 0 },
		func(c *Config) { c.ReplicaLagTicks = 0 },
		func(c *Config) { c.MaxBatchBytes = 10 },
		func(c *Config) { c.MaxPendingProduces = 0 },
	} {
		bad := good
		change(&bad)
		if _, err := New(bad, LogState{}); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
	if _, err := New(good, LogState{LogStartOffset: 5, LogEndOffset: 3}); err == nil {
		t.Error("New accepted a log that starts after it ends")
	}
}

// naiveHighWatermark is the definition, written plainly: the smallest log end
// offset over the committed ISR plus any member a pending proposal adds, the
// leader counting only what it may (durable data with flush=always); no
// advance while the ISR is below min.insync.replicas or while a member has
// not fetched in this epoch; never below the current value.
func naiveHighWatermark(current record.Offset, isr, pendingAdds []metadata.BrokerID, leaderEnd record.Offset, followers map[metadata.BrokerID]record.Offset, minInsync int) record.Offset {
	if len(isr) < minInsync {
		return current
	}
	members := slices.Clone(isr)
	for _, id := range pendingAdds {
		if !slices.Contains(members, id) {
			members = append(members, id)
		}
	}
	lowest := leaderEnd
	for _, id := range members {
		if id == 1 {
			continue
		}
		end, known := followers[id]
		if !known || end < 0 {
			return current
		}
		lowest = min(lowest, end)
	}
	return max(current, lowest)
}

func TestHighWatermarkMatchesNaiveReference(t *testing.T) {
	random := rand.New(rand.NewPCG(7, 11))
	for run := 0; run < 20000; run++ {
		config := testConfig(random.IntN(2) == 0, nil)
		config.MinInsyncReplicas = 1 + random.IntN(3)
		end := record.Offset(random.IntN(50))
		isr := []metadata.BrokerID{1}
		for _, id := range []metadata.BrokerID{2, 3} {
			if random.IntN(2) == 0 {
				isr = append(isr, id)
			}
		}
		r := leaderReplica(t, config, end, isr...)
		r.log.durable = record.Offset(random.Int64N(int64(end) + 1))
		current := record.Offset(random.Int64N(int64(r.countableEnd()) + 1))
		r.highWatermark = current
		followers := map[metadata.BrokerID]record.Offset{}
		for _, id := range []metadata.BrokerID{2, 3} {
			followers[id] = record.Offset(random.Int64N(int64(end)+2)) - 1
			r.leader.followers[id].logEndOffset = followers[id]
		}
		var pendingAdds []metadata.BrokerID
		if random.IntN(3) == 0 {
			pendingAdds = append(slices.Clone(isr), metadata.BrokerID(2+random.IntN(2)))
			r.leader.pending = &ISRChange{}
			for _, id := range pendingAdds {
				r.leader.pending.NewISR = append(r.leader.pending.NewISR, ISRMember{ID: id})
			}
		}
		want := naiveHighWatermark(current, isr, pendingAdds, r.countableEnd(), followers, config.MinInsyncReplicas)
		func() {
			defer func() { recover() }() // the coverage assertion may fire on impossible random states
			r.maybeAdvanceHighWatermark()
		}()
		if r.highWatermark != want {
			t.Fatalf("run %d: isr %v pending %v followers %v leader end %d min-isr %d current %d: got %d, want %d",
				run, isr, pendingAdds, followers, r.countableEnd(), config.MinInsyncReplicas, current, r.highWatermark, want)
		}
	}
}

// A proposal waiting for its answer is resent at the first tick after the
// controller moved, not a whole ProposalRetryTicks after it was sent; it
// stays pending either way.
func TestPendingProposalIsResentWhenTheControllerMoves(t *testing.T) {
	for _, moved := range []bool{false, true} {
		config := testConfig(true, nil)
		r := leaderReplica(t, config, 10, 1)
		r.leader.pending = &ISRChange{Partition: testPartition, LeaderEpoch: 5, PartitionEpoch: 7,
			NewISR: []ISRMember{{ID: 1, Epoch: 10}, {ID: 2, Epoch: 20}}}
		r.leader.pendingTick = r.now
		if moved {
			r.ControllerMoved()
		}
		r.Tick()
		proposals := r.Ready().Proposals
		if want := map[bool]int{false: 0, true: 1}[moved]; len(proposals) != want {
			t.Fatalf("controller moved %t: %d proposals at the next tick, want %d", moved, len(proposals), want)
		}
		if r.leader.pending == nil {
			t.Fatalf("controller moved %t: the proposal is no longer pending", moved)
		}
	}
}
