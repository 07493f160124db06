package server

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/record/recordtest"
)

// fuzzedBatch is one batch of a FuzzServeProduce request: header fields the
// fuzzer chooses, records compressed (or not) with the codec its attributes
// name, and a CRC that matches, so it gets past the CRC to every check
// after it.
func fuzzedBatch(attributes int16, lastOffsetDelta, recordCount int32, producerID int64, baseSequence int32,
	maxTimestampDeltaMs int64, records []byte, compress bool) []byte {
	now := time.Now().UnixMilli()
	header := record.Header{
		PartitionLeaderEpoch: record.NoLeaderEpoch, Attributes: attributes, LastOffsetDelta: lastOffsetDelta,
		BaseTimestampMs: now, MaxTimestampMs: now + maxTimestampDeltaMs,
		ProducerID: producerID, ProducerEpoch: 0, BaseSequence: baseSequence, RecordCount: recordCount,
	}
	payload := records
	if codec := record.Compression(attributes & 0x07); compress && codec <= record.CompressionZstd {
		payload = recordtest.Compress(codec, records)
	}
	return record.EncodeBatch(header, payload)
}

// sendProduce sends request on a fresh connection and, unless it is
// acks=0, reads its answer; it fails the test when the node does not accept
// the connection or does not answer.
func sendProduce(t *testing.T, address string, request *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	t.Helper()
	c, err := net.DialTimeout("tcp", address, time.Second)
	if err != nil {
		t.Fatalf("the node no longer accepts connections: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	c.Write(formatter.AppendRequest(nil, request, 1))
	if request.Acks == 0 {
		return nil
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("no answer to a v%d produce: %v", request.Version, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatal(err)
	}
	response := request.ResponseKind().(*kmsg.ProduceResponse)
	body := frame[4:]
	if response.IsFlexible() {
		body = body[1:]
	}
	if err := response.ReadFrom(body); err != nil {
		t.Fatalf("undecodable produce response: %v", err)
	}
	return response
}

// FuzzServeProduce sends a real node Produce requests built from structured
// fuzz input: one to three CRC-valid batches with arbitrary header fields
// (offset deltas, record counts, codec and control or transactional bits,
// producer ids and sequences, timestamps) over records compressed with the
// codec they name, or arbitrary bytes, at any version served and any acks.
// The node must answer each (acks 1 and -1), and then still take a
// well-formed produce to the same partition: no hostile batch may crash
// the node or take its partition offline, as issue 11's did.
func FuzzServeProduce(f *testing.F) {
	address := startInProcess(f)
	client, err := kgo.NewClient(kgo.SeedBrokers(address))
	if err != nil {
		f.Fatal(err)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = "fuzzed", 1, 1
	create.Topics, create.TimeoutMillis = append(create.Topics, entry), 10000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := create.RequestWith(ctx, client); err != nil {
		f.Fatal(err)
	}
	cancel()
	client.Close()
	plain := record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, Records: []record.Record{{Value: []byte("v")}, {Value: []byte("w")}}})
	records := plain[record.HeaderSize:]
	f.Add(uint8(9), int8(1), uint8(1), int16(0), int32(1), int32(2), int64(-1), int32(-1), int64(0), records, false)
	f.Add(uint8(9), int8(1), uint8(1), int16(4), int32(1), int32(2), int64(-1), int32(-1), int64(0), records, true)
	f.Add(uint8(7), int8(1), uint8(200), int16(4), int32(1<<31-2), int32(1<<31-1), int64(-1), int32(-1), int64(0), []byte("garbage"), false)
	f.Add(uint8(9), int8(-1), uint8(1), int16(1), int32(0), int32(1), int64(-1), int32(-1), int64(0), make([]byte, 1<<20), true)
	f.Add(uint8(8), int8(1), uint8(1), int16(0x20), int32(1), int32(2), int64(5), int32(-1), int64(0), records, false)
	f.Fuzz(func(t *testing.T, version uint8, acks int8, batchCount uint8, attributes int16, lastOffsetDelta, recordCount int32,
		producerID int64, baseSequence int32, maxTimestampDeltaMs int64, records []byte, compress bool) {
		request := hostileRequest(int16(3+version%7), "fuzzed", nil)
		request.Acks = []int16{0, 1, -1}[int(uint8(acks))%3]
		batch := fuzzedBatch(attributes, lastOffsetDelta, recordCount, producerID, baseSequence, maxTimestampDeltaMs, records, compress)
		for range 1 + int(batchCount)%3 {
			request.Topics[0].Partitions[0].Records = append(request.Topics[0].Partitions[0].Records, batch...)
		}
		if response := sendProduce(t, address, request); response != nil && len(response.Topics) != 1 {
			t.Fatalf("a response for %d topics", len(response.Topics))
		}
		check := hostileRequest(9, "fuzzed", record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch,
			BaseTimestampMs: time.Now().UnixMilli(), Records: []record.Record{{Value: []byte("still here")}}}))
		if code := sendProduce(t, address, check).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("after the fuzzed produce, a well-formed one got error %d", code)
		}
	})
}
