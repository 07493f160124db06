package wire

import (
	"bytes"
	"testing"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchRequest builds a fetch of orders partitions 0 and 1 and missing-0.
func testFetchRequest(version int16, offset int64, currentLeaderEpoch int32) *kmsg.FetchRequest {
	request := kmsg.NewPtrFetchRequest()
	request.Version, request.ReplicaID, request.MaxWaitMillis, request.MinBytes, request.MaxBytes = version, -1, 500, 1, 1<<20
	for _, name := range []string{"orders", "missing"} {
		topic := kmsg.NewFetchRequestTopic()
		topic.Topic = name
		for p := range map[string]int{"orders": 2, "missing": 1}[name] {
			partition := kmsg.NewFetchRequestTopicPartition()
			partition.Partition, partition.FetchOffset, partition.PartitionMaxBytes = int32(p), offset, 1<<20
			partition.CurrentLeaderEpoch = currentLeaderEpoch
			topic.Partitions = append(topic.Partitions, partition)
		}
		request.Topics = append(request.Topics, topic)
	}
	return request
}

// storedBatches produces batches into orders-0 and returns the log's bytes.
func storedBatches(t *testing.T, backend *fakeBackend) []byte {
	t.Helper()
	for _, value := range []string{"a", "b"} {
		backend.Produce(tp("orders", 0), replica.ProduceRequest{Batches: testBatch(2, value), Acks: replica.AcksAll}, func(replica.ProduceAnswer) {})
	}
	return bytes.Join(backend.topics["orders"].partitions[0].batches, nil)
}

func TestFetch(t *testing.T) {
	for _, version := range testVersions(t, 1) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 5)
		stored := storedBatches(t, backend)
		h := newTestHandler(t, backend)
		request := testFetchRequest(version, 0, 5)
		request.IsolationLevel = int8(ReadCommitted)
		response := roundTrip(t, h, request).(*kmsg.FetchResponse)
		if response.ErrorCode != 0 || response.SessionID != 0 || len(response.Topics) != 2 {
			t.Fatalf("v%d: error %d session %d, %d topics", version, response.ErrorCode, response.SessionID, len(response.Topics))
		}
		p := response.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 4 || p.LastStableOffset != 4 || !bytes.Equal(p.RecordBatches, stored) {
			t.Fatalf("v%d: partition %+v, want HW = LSO = 4 and the stored batches", version, p)
		}
		if version >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("v%d: log start offset %d", version, p.LogStartOffset)
		}
		if p.AbortedTransactions == nil || p.PreferredReadReplica != -1 {
			t.Fatalf("v%d: aborted transactions %v, preferred read replica %d", version, p.AbortedTransactions, p.PreferredReadReplica)
		}
		missing := kerr.UnknownTopicOrPartition.Code
		if version >= 13 {
			missing = kerr.UnknownTopicID.Code // by an id no topic has
		}
		if got := response.Topics[1].Partitions[0].ErrorCode; got != missing {
			t.Fatalf("v%d: missing partition error %d", version, got)
		}
		// A partition with no records carries an empty record set, never a
		// null one: librdkafka refuses null as a parse failure.
		if empty := response.Topics[0].Partitions[1]; empty.RecordBatches == nil || len(empty.RecordBatches) != 0 {
			t.Fatalf("v%d: an empty partition's records are %v, want an empty set", version, empty.RecordBatches)
		}
		if missing := response.Topics[1].Partitions[0]; missing.RecordBatches == nil {
			t.Fatalf("v%d: an error's records are null", version)
		}
		sent := backend.fetches[0]
		asked := 3
		if version >= 13 {
			asked = 2 // the unknown id never reaches the Backend
		}
		if sent.MaxWaitTicks != 500 || sent.MinBytes != 1 || sent.ReplicaID != replica.ConsumerReplicaID || len(sent.Partitions) != asked {
			t.Fatalf("v%d: backend got %+v", version, sent)
		}
		if want := record.LeaderEpoch(-1); version >= 9 {
			want = 5
			if sent.Partitions[0].CurrentLeaderEpoch != want {
				t.Fatalf("v%d: current leader epoch %d", version, sent.Partitions[0].CurrentLeaderEpoch)
			}
		}
	}
}

func TestFetchFencedAndDiverging(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 5)
	storedBatches(t, backend)
	h := newTestHandler(t, backend)
	for epoch, want := range map[int32]int16{4: kerr.FencedLeaderEpoch.Code, 6: kerr.UnknownLeaderEpoch.Code} {
		response := roundTrip(t, h, testFetchRequest(9, 0, epoch)).(*kmsg.FetchResponse)
		if got := response.Topics[0].Partitions[0]; got.ErrorCode != want || len(got.RecordBatches) != 0 || got.HighWatermark != -1 {
			t.Fatalf("epoch %d: error %d with %d record bytes and HW %d, want %d, none, -1", epoch, got.ErrorCode, len(got.RecordBatches), got.HighWatermark, want)
		}
	}
	backend.diverging = &replica.EpochEndOffset{Epoch: 3, EndOffset: 1}
	request := testFetchRequest(12, 4, 5)
	request.ReplicaID = 2
	request.Topics[0].Partitions[0].LastFetchedEpoch = 4
	response := roundTrip(t, h, request).(*kmsg.FetchResponse)
	got := response.Topics[0].Partitions[0]
	if got.DivergingEpoch.Epoch != 3 || got.DivergingEpoch.EndOffset != 1 || len(got.RecordBatches) != 0 {
		t.Fatalf("diverging epoch %+v with %d record bytes", got.DivergingEpoch, len(got.RecordBatches))
	}
	sent := backend.fetches[len(backend.fetches)-1]
	if sent.ReplicaID != 2 || sent.Partitions[0].ReplicaID != 2 || sent.Partitions[0].LastFetchedEpoch != 4 {
		t.Fatalf("follower fetch reached the backend as %+v", sent.Partitions[0])
	}
}

func TestFetchSessionsDeclined(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	h := newTestHandler(t, backend)
	for _, c := range []struct {
		id, epoch int32
		want      int16
	}{{0, 0, 0}, {0, -1, 0}, {12, 1, kerr.FetchSessionIDNotFound.Code}, {0, 3, kerr.InvalidFetchSessionEpoch.Code}} {
		request := testFetchRequest(12, 0, -1)
		request.SessionID, request.SessionEpoch = c.id, c.epoch
		response := roundTrip(t, h, request).(*kmsg.FetchResponse)
		if response.ErrorCode != c.want || response.SessionID != 0 {
			t.Fatalf("session %d epoch %d: error %d session %d, want %d and no session", c.id, c.epoch, response.ErrorCode, response.SessionID, c.want)
		}
	}
}

// TestFetchLongPoll checks the response waits for the Backend: a fetch
// that finds nothing is answered when data arrives.
func TestFetchLongPoll(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.parkFetches = true
	h := newTestHandler(t, backend)
	request := testFetchRequest(11, 0, -1)
	request.Topics = request.Topics[:1]
	var raw []byte
	h.Handle(encodeRequest(request, 9), func(r []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		raw = r
	})
	if raw != nil {
		t.Fatalf("an empty long-poll fetch was answered at once")
	}
	stored := storedBatches(t, backend)
	if raw == nil {
		t.Fatalf("the fetch was not answered when data arrived")
	}
	response := request.ResponseKind().(*kmsg.FetchResponse)
	decodeResponse(t, raw, 9, response)
	if got := response.Topics[0].Partitions[0].RecordBatches; !bytes.Equal(got, stored[:len(got)]) || len(got) == 0 {
		t.Fatalf("records %x, want a prefix of %x", got, stored)
	}
}
