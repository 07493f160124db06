package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/record"
)

// describeKafka is one line for Kafka bytes on a connection, as the
// scripts print what they hold, deliver and drop: the request or response
// by its name (fetch, fetch-response, offsets-for-leader-epoch, ...) and
// what a reader of the seed documents needs of it. A response is
// described by the request it answers, which its connection remembers.
func (w *world) describeKafka(packet *kafkaPacket) string {
	if packet.request {
		request, err := decodeRequest(packet.bytes)
		if err != nil {
			return "kafka-request malformed"
		}
		return describeRequestBody(request)
	}
	c, ok := w.kafka.conns[packet.conn]
	if !ok || len(packet.bytes) < 4 {
		return "kafka-response on a closed connection"
	}
	info, ok := c.requests[int32(binary.BigEndian.Uint32(packet.bytes))]
	if !ok {
		return "kafka-response"
	}
	request := kmsg.RequestForKey(info.key)
	request.SetVersion(info.version)
	response, err := decodeResponse(request, packet.bytes[4:])
	if err != nil {
		return fmt.Sprintf("%s-response malformed", kafkaName(info.key))
	}
	return describeResponseBody(response, info)
}

// decodeRequest decodes a request's header and body.
func decodeRequest(data []byte) (kmsg.Request, error) {
	reader := kbin.Reader{Src: data}
	key, version := reader.Int16(), reader.Int16()
	reader.Int32()
	reader.NullableString()
	request := kmsg.RequestForKey(key)
	if request == nil || !reader.Ok() {
		return nil, fmt.Errorf("bad header")
	}
	request.SetVersion(version)
	if request.IsFlexible() {
		kmsg.SkipTags(&reader)
	}
	if err := request.ReadFrom(reader.Src); err != nil {
		return nil, err
	}
	return request, nil
}

// kafkaName is an API key's name as the scripts print it.
func kafkaName(key int16) string {
	switch key {
	case 0:
		return "produce"
	case 1:
		return "fetch"
	case 2:
		return "list-offsets"
	case 3:
		return "kafka-metadata"
	case 18:
		return "api-versions"
	case 23:
		return "offsets-for-leader-epoch"
	}
	return fmt.Sprintf("kafka-%d", key)
}

func describeRequestBody(request kmsg.Request) string {
	switch request := request.(type) {
	case *kmsg.FetchRequest:
		if len(request.Topics) > 0 && len(request.Topics[0].Partitions) > 0 {
			p := request.Topics[0].Partitions[0]
			return fmt.Sprintf("fetch offset=%d epoch=%d last-fetched-epoch=%d", p.FetchOffset, p.CurrentLeaderEpoch, p.LastFetchedEpoch)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		if len(request.Topics) > 0 && len(request.Topics[0].Partitions) > 0 {
			p := request.Topics[0].Partitions[0]
			return fmt.Sprintf("offsets-for-leader-epoch epoch=%d current-epoch=%d", p.LeaderEpoch, p.CurrentLeaderEpoch)
		}
	}
	return kafkaName(request.Key())
}

func describeResponseBody(response kmsg.Response, info requestInfo) string {
	switch response := response.(type) {
	case *kmsg.FetchResponse:
		if response.ErrorCode != 0 {
			return "fetch-response " + errorName(response.ErrorCode)
		}
		if len(response.Topics) == 0 || len(response.Topics[0].Partitions) == 0 {
			return "fetch-response empty"
		}
		p := response.Topics[0].Partitions[0]
		switch {
		case p.ErrorCode != 0:
			return "fetch-response " + errorName(p.ErrorCode)
		case p.DivergingEpoch.Epoch >= 0:
			return fmt.Sprintf("fetch-response diverging epoch=%d end=%d", p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset)
		}
		from := fetchOffsetOf(info)
		return fmt.Sprintf("fetch-response records=[%d, %d) hw=%d", from, batchesEnd(p.RecordBatches, from), p.HighWatermark)
	case *kmsg.OffsetForLeaderEpochResponse:
		if len(response.Topics) > 0 && len(response.Topics[0].Partitions) > 0 {
			p := response.Topics[0].Partitions[0]
			if p.ErrorCode != 0 {
				return "offsets-for-leader-epoch-response " + errorName(p.ErrorCode)
			}
			return fmt.Sprintf("offsets-for-leader-epoch-response epoch=%d end=%d", p.LeaderEpoch, p.EndOffset)
		}
	}
	return kafkaName(info.key) + "-response"
}

// fetchOffsetOf is the offset the remembered fetch read from, or -1.
func fetchOffsetOf(info requestInfo) record.Offset {
	if info.fetch == nil {
		return -1
	}
	request, err := decodeRequest(info.fetch)
	if fetch, ok := request.(*kmsg.FetchRequest); err == nil && ok && len(fetch.Topics) > 0 && len(fetch.Topics[0].Partitions) > 0 {
		return record.Offset(fetch.Topics[0].Partitions[0].FetchOffset)
	}
	return -1
}

// batchesEnd is the offset after the last batch of a record set, or from
// when it has none. A leader returns whole batches, so the first may begin
// below from.
func batchesEnd(batches []byte, from record.Offset) record.Offset {
	end := from
	it := record.NewIterator(batches, record.Limits{MaxBatchBytes: 1 << 30})
	for it.Next() {
		end = it.Header().NextOffset()
	}
	return end
}

// capFetchBytes rewrites a Fetch request's byte limits down to maxBytes,
// as a follower with a smaller replica.fetch.max.bytes would have sent it;
// any other request is returned as it is.
func capFetchBytes(data []byte, maxBytes int64) []byte {
	request, err := decodeRequest(data)
	fetch, ok := request.(*kmsg.FetchRequest)
	if err != nil || !ok {
		return data
	}
	fetch.MaxBytes = int32(min(int64(fetch.MaxBytes), maxBytes))
	for t := range fetch.Topics {
		for p := range fetch.Topics[t].Partitions {
			partition := &fetch.Topics[t].Partitions[p]
			partition.PartitionMaxBytes = int32(min(int64(partition.PartitionMaxBytes), maxBytes))
		}
	}
	reader := kbin.Reader{Src: data}
	reader.Int16()
	reader.Int16()
	correlation := reader.Int32()
	clientID := reader.NullableString()
	formatter := kmsg.NewRequestFormatter()
	if clientID != nil {
		formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	}
	return formatter.AppendRequest(nil, fetch, correlation)[4:]
}
