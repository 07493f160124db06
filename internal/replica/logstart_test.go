package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

func deleteRecords(r *Replica, offset record.Offset) (DeleteRecordsAnswer, Ready) {
	r.HandleDeleteRecords(DeleteRecordsRequest{ID: 7, Offset: offset})
	ready := r.Ready()
	return *ready.Answers[0].DeleteRecords, ready
}

// DeleteRecords (API 21) moves a leader's log start offset, never past its
// high watermark; -1 means the high watermark. With its followers' brokers
// fenced, the leader's own log start is the low watermark, and the answer
// comes at once.
func TestDeleteRecordsOnTheLeader(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1)
	r.SetBrokers([]metadata.BrokerState{{ID: 1, Epoch: 10}, {ID: 2, Epoch: 20, Fenced: true}, {ID: 3, Epoch: 30, Fenced: true}})
	if r.HighWatermark() != 10 {
		t.Fatalf("high watermark %d, want 10", r.HighWatermark())
	}
	for _, offset := range []record.Offset{11, -2} {
		answer, ready := deleteRecords(r, offset)
		if answer.ErrorCode != kerr.OffsetOutOfRange.Code || answer.LowWatermark != -1 || ready.LogStartOffset != nil {
			t.Fatalf("delete records to %d: %+v, %s", offset, answer, ready)
		}
	}
	answer, ready := deleteRecords(r, 4)
	if answer.ErrorCode != 0 || answer.LowWatermark != 4 || ready.LogStartOffset == nil || *ready.LogStartOffset != 4 || r.LogStartOffset() != 4 {
		t.Fatalf("delete records to 4: %+v, %s", answer, ready)
	}
	if answer, ready = deleteRecords(r, 2); answer.ErrorCode != 0 || answer.LowWatermark != 4 || ready.LogStartOffset != nil {
		t.Fatalf("delete records to 2, below the log start 4: %+v, %s (the log start only moves up)", answer, ready)
	}
	if answer, _ = deleteRecords(r, DeleteRecordsHighWatermark); answer.ErrorCode != 0 || answer.LowWatermark != 10 || r.LogStartOffset() != 10 {
		t.Fatalf("delete records to the high watermark: %+v", answer)
	}
	r.HandleFetch(FetchRequest{ID: 1, ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: 5, FetchOffset: 5, MaxBytes: 100})
	if fetch := r.Ready().Answers[0].Fetch; fetch.ErrorCode != kerr.OffsetOutOfRange.Code || fetch.LogStartOffset != 10 {
		t.Fatalf("a fetch below the new log start: %+v", fetch)
	}
}

// The answer waits for every follower on a live broker, in the ISR or not,
// to report a log start at or past the offset (Kafka's
// DelayedDeleteRecords): a client told the records are gone must not read
// them from the follower it fails over to. The low watermark it gives is
// the smallest of them.
func TestDeleteRecordsWaitsForTheFollowers(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2)
	for _, id := range []metadata.BrokerID{2, 3} {
		r.HandleFetch(FetchRequest{ID: 1, ReplicaID: id, ReplicaEpoch: metadata.BrokerEpoch(id * 10), CurrentLeaderEpoch: 5, FetchOffset: 10, MaxBytes: 100, LogStartOffset: 0})
	}
	r.Ready()
	if r.HighWatermark() != 10 {
		t.Fatalf("high watermark %d, want 10", r.HighWatermark())
	}
	r.HandleDeleteRecords(DeleteRecordsRequest{ID: 7, Offset: 6, TimeoutTicks: 100})
	if ready := r.Ready(); len(ready.Answers) != 0 || r.LogStartOffset() != 6 {
		t.Fatalf("answered before any follower followed: %s, log start %d", ready, r.LogStartOffset())
	}
	fetch := func(id metadata.BrokerID, start record.Offset) []Answer {
		r.HandleFetch(FetchRequest{ID: 2, ReplicaID: id, ReplicaEpoch: metadata.BrokerEpoch(id * 10), CurrentLeaderEpoch: 5, FetchOffset: 10, MaxBytes: 100, LogStartOffset: start})
		return r.Ready().Answers
	}
	if answers := fetch(2, 6); len(answers) != 1 || answers[0].Fetch == nil || answers[0].Fetch.LogStartOffset != 6 {
		t.Fatalf("with follower 3, outside the ISR but live, still at 0: %+v", answers)
	}
	answers := fetch(3, 8)
	if len(answers) != 2 || answers[0].DeleteRecords == nil || *answers[0].DeleteRecords != (DeleteRecordsAnswer{ID: 7, LowWatermark: 6}) {
		t.Fatalf("once both followers are past 6: %+v", answers)
	}

	r.HandleDeleteRecords(DeleteRecordsRequest{ID: 8, Offset: 9, TimeoutTicks: 3})
	for range 2 {
		r.Tick()
	}
	if ready := r.Ready(); len(ready.Answers) != 0 {
		t.Fatalf("answered before its timeout: %s", ready)
	}
	r.Tick()
	if answers := r.Ready().Answers; len(answers) != 1 || *answers[0].DeleteRecords != (DeleteRecordsAnswer{ID: 8, ErrorCode: kerr.RequestTimedOut.Code, LowWatermark: -1}) || r.LogStartOffset() != 9 {
		t.Fatalf("past its timeout: %+v, log start %d", answers, r.LogStartOffset())
	}

	r.HandleDeleteRecords(DeleteRecordsRequest{ID: 9, Offset: 10, TimeoutTicks: 100})
	r.Ready()
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2, 3},
		ISR: []metadata.BrokerID{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 8})
	if answers := r.Ready().Answers; len(answers) != 1 || answers[0].DeleteRecords == nil || answers[0].DeleteRecords.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("after losing the leadership: %+v", answers)
	}
}

func TestDeleteRecordsOnAFollower(t *testing.T) {
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	r, _ := New(config, LogState{LogEndOffset: 10, DurableEndOffset: 10, HighWatermark: 10})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 0})
	r.Ready()
	if answer, ready := deleteRecords(r, 3); answer.ErrorCode != kerr.NotLeaderForPartition.Code || ready.LogStartOffset != nil {
		t.Fatalf("delete records on a follower: %+v, %s", answer, ready)
	}
}

// Rule log-start-below-high-watermark: retention's log start is capped at
// the high watermark, whatever the log asks.
func TestRetentionNeverPassesTheHighWatermark(t *testing.T) {
	r := leaderReplica(t, testConfig(false, nil), 10, 1, 2)
	hw := r.HighWatermark()
	r.AdvanceLogStartOffset(hw + 5)
	ready := r.Ready()
	if r.LogStartOffset() != hw || (hw > 0 && (ready.LogStartOffset == nil || *ready.LogStartOffset != hw)) {
		t.Fatalf("retention asked for %d with the high watermark at %d: log start %d, %s", hw+5, hw, r.LogStartOffset(), ready)
	}
}

// Rule follower-follows-log-start: a follower moves its log start to the
// leader's, after the data and the high watermark of the same response,
// never past its own high watermark.
func TestFollowerFollowsTheLeadersLogStart(t *testing.T) {
	config := testConfig(false, nil)
	config.Broker, config.Partition = 2, testPartition
	r, _ := New(config, LogState{})
	r.ApplyPartitionState(metadata.PartitionState{TopicPartition: testPartition, Replicas: []metadata.BrokerID{1, 2}, ISR: []metadata.BrokerID{1, 2}, Leader: 1, LeaderEpoch: 0})
	fetch := r.Ready().Messages[0].Fetch
	records := record.Build(record.BuildOptions{LeaderEpoch: 0, Records: make([]record.Record, 6)})
	r.HandleFetchResponse(FetchResponse{ID: fetch.ID, HighWatermark: 4, LogStartOffset: 5, LogEndOffset: 10, Records: records})
	ready := r.Ready()
	if ready.LogStartOffset == nil || *ready.LogStartOffset != 4 || r.LogStartOffset() != 4 {
		t.Fatalf("leader's log start 5, follower's high watermark 4: %s, log start %d", ready, r.LogStartOffset())
	}
	if ready.HighWatermark == nil || *ready.HighWatermark != 4 {
		t.Fatalf("the high watermark must come with the log start: %s", ready)
	}
}

// On a LogAppendTime topic the leader stamps each batch with the
// produce's append time (attribute bit, max timestamp, CRC recomputed;
// records untouched) and answers that time; on a CreateTime topic the
// producer's timestamps stay and the answer carries none.
func TestLogAppendTimeStamping(t *testing.T) {
	for _, logAppendTime := range []bool{false, true} {
		config := testConfig(false, nil)
		config.LogAppendTime = logAppendTime
		r := leaderReplica(t, config, 0, 1)
		batch := record.Build(record.BuildOptions{BaseTimestampMs: 1000, Records: []record.Record{{Value: []byte("v")}}, LeaderEpoch: record.NoLeaderEpoch})
		r.HandleProduce(ProduceRequest{ID: 1, Batches: batch, Acks: AcksLeader, AppendTimeMs: 5000})
		ready := r.Ready()
		var appended []byte
		for _, op := range ready.Log {
			if op.Kind == Append {
				appended = op.Batches
			}
		}
		header, err := record.Validate(appended, record.Limits{MaxBatchBytes: 1 << 20})
		if err != nil {
			t.Fatalf("LogAppendTime=%v: appended batch: %v", logAppendTime, err)
		}
		answers := produceAnswers(ready)
		if len(answers) != 1 || answers[0].ErrorCode != 0 {
			t.Fatalf("LogAppendTime=%v: answers %+v", logAppendTime, answers)
		}
		wantTimestamp := int64(1000)
		if logAppendTime {
			wantTimestamp = 5000
		}
		if header.IsLogAppendTime() != logAppendTime || header.MaxTimestampMs != wantTimestamp || header.BaseTimestampMs != 1000 {
			t.Errorf("LogAppendTime=%v: header %+v", logAppendTime, header)
		}
		if answers[0].LogAppendTime != logAppendTime || logAppendTime && answers[0].LogAppendTimeMs != 5000 {
			t.Errorf("LogAppendTime=%v: answer %+v", logAppendTime, answers[0])
		}
	}
}
