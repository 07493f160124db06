package wire

import (
	"testing"

	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func listOffsetsRequest(version int16, currentLeaderEpoch int32, timestamps ...int64) *kmsg.ListOffsetsRequest {
	request := kmsg.NewPtrListOffsetsRequest()
	request.Version, request.ReplicaID = version, -1
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = "orders"
	for p, timestamp := range timestamps {
		partition := kmsg.NewListOffsetsRequestTopicPartition()
		partition.Partition, partition.Timestamp, partition.CurrentLeaderEpoch = int32(p%2), timestamp, currentLeaderEpoch
		topic.Partitions = append(topic.Partitions, partition)
	}
	request.Topics = append(request.Topics, topic)
	return request
}

func TestListOffsets(t *testing.T) {
	for _, version := range testVersions(t, 2) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 2)
		storedBatches(t, backend) // orders-0 holds offsets 0..3
		h := newTestHandler(t, backend)
		request := listOffsetsRequest(version, 2, replica.EarliestTimestamp, replica.LatestTimestamp, 1_700_000_000_000)
		response := roundTrip(t, h, request).(*kmsg.ListOffsetsResponse)
		got := response.Topics[0].Partitions
		if got[0].ErrorCode != 0 || got[0].Offset != 0 || got[1].ErrorCode != 0 || got[1].Offset != 0 {
			t.Fatalf("v%d: earliest of orders-0 and latest of orders-1: %+v %+v", version, got[0], got[1])
		}
		if got[0].Timestamp != -1 {
			t.Fatalf("v%d: timestamp %d for a special lookup", version, got[0].Timestamp)
		}
		if got[2].ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("v%d: timestamp lookup error %d, want the backend's INVALID_REQUEST", version, got[2].ErrorCode)
		}
		if version >= 4 && got[0].LeaderEpoch != 2 {
			t.Fatalf("v%d: leader epoch %d", version, got[0].LeaderEpoch)
		}
		latest := roundTrip(t, h, listOffsetsRequest(version, -1, replica.LatestTimestamp)).(*kmsg.ListOffsetsResponse)
		if p := latest.Topics[0].Partitions[0]; p.Offset != 4 {
			t.Fatalf("v%d: latest of orders-0 %d, want 4", version, p.Offset)
		}
	}
}

func TestListOffsetsCodesPassThrough(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 1, 2)
	backend.offsetNotAvailable = true
	h := newTestHandler(t, backend)
	for _, c := range []struct {
		version   int16
		epoch     int32
		timestamp int64
		want      int16
	}{
		{1, -1, replica.LatestTimestamp, kerr.OffsetNotAvailable.Code}, // KIP-207: a new leader's HW
		{7, -1, replica.LatestTimestamp, kerr.OffsetNotAvailable.Code},
		{7, -1, replica.EarliestTimestamp, 0},
		{4, 1, replica.EarliestTimestamp, kerr.FencedLeaderEpoch.Code},
		{6, 3, replica.EarliestTimestamp, kerr.UnknownLeaderEpoch.Code},
	} {
		response := roundTrip(t, h, listOffsetsRequest(c.version, c.epoch, c.timestamp)).(*kmsg.ListOffsetsResponse)
		if got := response.Topics[0].Partitions[0]; got.ErrorCode != c.want || c.want != 0 && (got.Offset != -1 || got.LeaderEpoch != -1) {
			t.Fatalf("v%d epoch %d timestamp %d: error %d, want %d", c.version, c.epoch, c.timestamp, got.ErrorCode, c.want)
		}
	}
}

// MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4) and LATEST_TIERED (-5) are
// UNSUPPORTED_VERSION below the versions that brought them (v7, v8, v9),
// for that partition only, as Kafka answers them; from those versions on
// they reach the Backend.
func TestListOffsetsSpecialTimestampsNeedTheirVersion(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 2)
	h := newTestHandler(t, backend)
	for _, c := range []struct {
		timestamp  int64
		minVersion int16
	}{{replica.MaxTimestamp, 7}, {replica.EarliestLocalTimestamp, 8}, {replica.LatestTieredTimestamp, 9}} {
		for _, version := range []int16{c.minVersion - 1, c.minVersion} {
			response := roundTrip(t, h, listOffsetsRequest(version, -1, c.timestamp, replica.EarliestTimestamp)).(*kmsg.ListOffsetsResponse)
			got := response.Topics[0].Partitions
			refused := got[0].ErrorCode == kerr.UnsupportedVersion.Code
			if refused != (version < c.minVersion) || got[0].Offset != -1 || got[1].ErrorCode != 0 {
				t.Errorf("v%d timestamp %d: %+v, then earliest %+v", version, c.timestamp, got[0], got[1])
			}
		}
	}
}
