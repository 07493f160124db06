package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteRecordsRequest(version int16, offsets ...int64) *kmsg.DeleteRecordsRequest {
	request := kmsg.NewPtrDeleteRecordsRequest()
	request.Version, request.TimeoutMillis = version, 1000
	topic := kmsg.NewDeleteRecordsRequestTopic()
	topic.Topic = "orders"
	for p, offset := range offsets {
		partition := kmsg.NewDeleteRecordsRequestTopicPartition()
		partition.Partition, partition.Offset = int32(p), offset
		topic.Partitions = append(topic.Partitions, partition)
	}
	request.Topics = append(request.Topics, topic)
	return request
}

// DeleteRecords answers each partition with the Backend's low watermark or
// error code, in request order, on every served version; a partition named
// twice is INVALID_REQUEST each time and never reaches the Backend.
func TestDeleteRecords(t *testing.T) {
	for _, version := range testVersions(t, 21) {
		backend := newFakeBackend()
		backend.addTopic("orders", 3, 2)
		storedBatches(t, backend) // orders-0 holds offsets 0..3
		h := newTestHandler(t, backend)
		response := roundTrip(t, h, deleteRecordsRequest(version, 2, 0, 9)).(*kmsg.DeleteRecordsResponse)
		got := response.Topics[0].Partitions
		if got[0].ErrorCode != 0 || got[0].LowWatermark != 2 || got[1].ErrorCode != 0 || got[1].LowWatermark != 0 {
			t.Fatalf("v%d: %+v", version, got)
		}
		if got[2].ErrorCode != kerr.OffsetOutOfRange.Code || got[2].LowWatermark != -1 {
			t.Fatalf("v%d: past the end: %+v", version, got[2])
		}
		twice := deleteRecordsRequest(version, 1)
		twice.Topics[0].Partitions = append(twice.Topics[0].Partitions, twice.Topics[0].Partitions[0])
		response = roundTrip(t, h, twice).(*kmsg.DeleteRecordsResponse)
		for _, p := range response.Topics[0].Partitions {
			if p.ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("v%d: a partition named twice: %+v", version, response.Topics[0].Partitions)
			}
		}
		unknown := deleteRecordsRequest(version, 1)
		unknown.Topics[0].Topic = "missing"
		response = roundTrip(t, h, unknown).(*kmsg.DeleteRecordsResponse)
		if p := response.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: unknown topic: %+v", version, p)
		}
	}
}
