package fetcher

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// send sends a source's queued OffsetsForLeaderEpoch requests at once, and
// its queued fetches unless a Fetch is in flight: the replicas' next fetches
// wait for it to come back and then leave together (Kafka's
// AbstractFetcherThread batches the same way). The leader holds a Fetch
// until it has data or MaxWaitMillis passes, so an idle follower costs two
// requests a second per source, not a busy loop. A Fetch names its topics
// either by id or by name: the oldest queued fetch chooses, and the
// partitions of the other kind (topics created before topic ids) leave
// with the next one. After an answer, the next Fetch waits (at most
// MaxReadyWaitTicks) for the partitions it served to ask again
// (source.awaiting).
func (f *Fetcher) send(s *source) {
	if s.conn == 0 || len(s.order) == 0 {
		return
	}
	holdFetches := s.fetching
	if len(s.awaiting) > 0 && f.now < s.awaitUntil {
		holdFetches = true
	} else {
		clear(s.awaiting)
	}
	var fetch *kmsg.FetchRequest
	var offsets *kmsg.OffsetForLeaderEpochRequest
	fetching := &sentRequest{fetches: map[metadata.TopicPartition]replica.FetchRequest{}, names: map[metadata.TopicID]string{},
		deadline: f.now + f.config.FetchTimeoutTicks}
	asked := map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{}
	kept := s.order[:0]
	for _, tp := range s.order {
		id := s.topicIDs[tp]
		if request, ok := s.offsets[tp]; ok {
			if offsets == nil {
				offsets = f.newOffsetsRequest()
			}
			addOffsetsPartition(offsets, tp, request)
			asked[tp] = request
			delete(s.offsets, tp)
			delete(s.topicIDs, tp)
			continue
		}
		if fetch == nil && !holdFetches {
			fetch = f.newFetchRequest(s.fetches[tp].ReplicaEpoch, f.fetchesByID(id))
			fetching.version = fetch.Version
		}
		if holdFetches || f.fetchesByID(id) != (fetch.Version >= 13) {
			kept = append(kept, tp)
			continue
		}
		addFetchPartition(fetch, tp, id, min(s.fetches[tp].MaxBytes, int64(f.config.MaxBytes)), s.fetches[tp])
		fetching.fetches[tp] = s.fetches[tp]
		fetching.names[id] = tp.Topic
		delete(s.fetches, tp)
		delete(s.topicIDs, tp)
	}
	clear(s.order[len(kept):])
	s.order = kept
	if offsets != nil {
		f.write(s, offsets, &sentRequest{offsets: asked, deadline: f.now + f.config.RequestTimeoutTicks})
	}
	if fetch != nil {
		s.fetching = true
		f.write(s, fetch, fetching)
	}
}

// fetchesByID reports whether a topic is fetched by its id: whenever it
// has one (rules.FetchByTopicID).
func (f *Fetcher) fetchesByID(id metadata.TopicID) bool {
	return !id.IsZero() && f.config.Rules.On(rules.FetchByTopicID)
}

// write encodes a request, size prefix included, for the runtime to send.
func (f *Fetcher) write(s *source, request kmsg.Request, sent *sentRequest) {
	s.correlation++
	s.inFlight[s.correlation] = sent
	f.outbox.Sends = append(f.outbox.Sends, Send{Source: s.id, Conn: s.conn, Bytes: s.formatter.AppendRequest(nil, request, s.correlation)})
}

func (f *Fetcher) newFetchRequest(epoch metadata.BrokerEpoch, byID bool) *kmsg.FetchRequest {
	request := kmsg.NewPtrFetchRequest()
	request.Version = FetchByNameVersion
	if byID {
		request.Version = FetchVersion
	}
	request.ReplicaID = int32(f.config.Broker)
	request.ReplicaState.ID, request.ReplicaState.Epoch = int32(f.config.Broker), int64(epoch)
	request.MaxWaitMillis = f.config.MaxWaitMillis
	request.MinBytes, request.MaxBytes = f.config.MinBytes, f.config.MaxBytes
	request.SessionID, request.SessionEpoch = 0, -1 // no fetch sessions (KIP-227)
	return request
}

// addFetchPartition adds one partition, under its topic's id at v13+ and
// its name below.
func addFetchPartition(request *kmsg.FetchRequest, tp metadata.TopicPartition, id metadata.TopicID, maxBytes int64, fetch replica.FetchRequest) {
	partition := kmsg.NewFetchRequestTopicPartition()
	partition.Partition = tp.Partition
	partition.CurrentLeaderEpoch = int32(fetch.CurrentLeaderEpoch)
	partition.FetchOffset = int64(fetch.FetchOffset)
	partition.LastFetchedEpoch = int32(fetch.LastFetchedEpoch)
	partition.LogStartOffset = int64(fetch.LogStartOffset)
	partition.PartitionMaxBytes = int32(maxBytes)
	for i := range request.Topics {
		if request.Version >= 13 && request.Topics[i].TopicID == id || request.Version < 13 && request.Topics[i].Topic == tp.Topic {
			request.Topics[i].Partitions = append(request.Topics[i].Partitions, partition)
			return
		}
	}
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic, topic.Partitions = tp.Topic, []kmsg.FetchRequestTopicPartition{partition}
	if request.Version >= 13 {
		topic.TopicID = id
	}
	request.Topics = append(request.Topics, topic)
}

func (f *Fetcher) newOffsetsRequest() *kmsg.OffsetForLeaderEpochRequest {
	request := kmsg.NewPtrOffsetForLeaderEpochRequest()
	request.Version = OffsetsVersion
	request.ReplicaID = int32(f.config.Broker)
	return request
}

func addOffsetsPartition(request *kmsg.OffsetForLeaderEpochRequest, tp metadata.TopicPartition, asked replica.OffsetsForLeaderEpochRequest) {
	partition := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	partition.Partition = tp.Partition
	partition.CurrentLeaderEpoch = int32(asked.CurrentLeaderEpoch)
	partition.LeaderEpoch = int32(asked.LeaderEpoch)
	for i := range request.Topics {
		if request.Topics[i].Topic == tp.Topic {
			request.Topics[i].Partitions = append(request.Topics[i].Partitions, partition)
			return
		}
	}
	topic := kmsg.NewOffsetForLeaderEpochRequestTopic()
	topic.Topic, topic.Partitions = tp.Topic, []kmsg.OffsetForLeaderEpochRequestTopicPartition{partition}
	request.Topics = append(request.Topics, topic)
}

// fetchResponse reads a Fetch response: each partition's answer goes to its
// replica, except OFFSET_OUT_OF_RANGE, held back while the leader is asked
// for its log end offset; a partition the response leaves out fails.
func (f *Fetcher) fetchResponse(s *source, sent *sentRequest, body []byte) ([]Delivery, error) {
	body, err := skipResponseTags(body)
	if err != nil {
		return nil, err
	}
	response := kmsg.NewPtrFetchResponse()
	response.Version = sent.version
	if err := response.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: fetch: %v", errMalformed, err)
	}
	var out []Delivery
	answered := map[metadata.TopicPartition]bool{}
	outOfRange := map[metadata.TopicPartition]replica.FetchResponse{}
	for _, topic := range response.Topics {
		name := topic.Topic
		if sent.version >= 13 {
			name = sent.names[topic.TopicID] // "" for an id not asked: skipped
		}
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: name, Partition: partition.Partition}
			asked, ok := sent.fetches[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			answer := fetchAnswer(asked, response.ErrorCode, partition)
			if answer.ErrorCode == kerr.OffsetOutOfRange.Code {
				// Held past this response, so without its bytes: the
				// runtime reuses them (Received). An error carries no
				// records to apply anyway.
				answer.Records = nil
				outOfRange[tp] = answer
				continue
			}
			out = f.deliver(s, out, tp, broker.PeerMessage{FetchResponse: &answer})
		}
	}
	f.askLogEnd(s, outOfRange, sent.fetches)
	missing := &sentRequest{fetches: map[metadata.TopicPartition]replica.FetchRequest{}}
	for tp, asked := range sent.fetches {
		if !answered[tp] {
			missing.fetches[tp] = asked
		}
	}
	return f.failRequest(s, out, missing, kerr.UnknownServerError.Code), nil
}

// fetchAnswer is one partition of a Fetch response as its replica takes it.
func fetchAnswer(asked replica.FetchRequest, topLevel int16, partition kmsg.FetchResponseTopicPartition) replica.FetchResponse {
	answer := replica.FetchResponse{ID: asked.ID, ErrorCode: partition.ErrorCode,
		HighWatermark: record.Offset(partition.HighWatermark), LogStartOffset: record.Offset(partition.LogStartOffset),
		LogEndOffset: -1, LeaderEpoch: record.LeaderEpoch(partition.CurrentLeader.LeaderEpoch), Records: partition.RecordBatches}
	if topLevel != 0 {
		answer.ErrorCode = topLevel
	}
	if partition.DivergingEpoch.Epoch >= 0 {
		answer.DivergingEpoch = &replica.EpochEndOffset{Epoch: record.LeaderEpoch(partition.DivergingEpoch.Epoch),
			EndOffset: record.Offset(partition.DivergingEpoch.EndOffset)}
	}
	return answer
}

func (f *Fetcher) offsetsResponse(s *source, sent *sentRequest, body []byte) ([]Delivery, error) {
	response := kmsg.NewPtrOffsetForLeaderEpochResponse()
	response.Version = OffsetsVersion
	if err := response.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: OffsetForLeaderEpoch: %v", errMalformed, err)
	}
	var out []Delivery
	answered := map[metadata.TopicPartition]bool{}
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			asked, ok := sent.offsets[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			out = f.deliver(s, out, tp, broker.PeerMessage{OffsetsForLeaderEpochAnswer: &replica.OffsetsForLeaderEpochAnswer{ID: asked.ID,
				ErrorCode: partition.ErrorCode, LeaderEpoch: record.LeaderEpoch(partition.LeaderEpoch), EndOffset: record.Offset(partition.EndOffset)}})
		}
	}
	missing := &sentRequest{offsets: map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{}}
	for tp, asked := range sent.offsets {
		if !answered[tp] {
			missing.offsets[tp] = asked
		}
	}
	return f.failRequest(s, out, missing, kerr.UnknownServerError.Code), nil
}

// askLogEnd asks the leader for the log end offset of each partition whose
// fetch was OFFSET_OUT_OF_RANGE, which a Fetch response does not carry and
// the follower needs: ahead of the leader's log end it truncates to it
// (Kafka's fetchOffsetAndTruncate asks ListOffsets the same way). A
// ListOffsets from a replica id is answered with the log end offset, not
// the high watermark.
func (f *Fetcher) askLogEnd(s *source, outOfRange map[metadata.TopicPartition]replica.FetchResponse, asked map[metadata.TopicPartition]replica.FetchRequest) {
	if len(outOfRange) == 0 {
		return
	}
	request := kmsg.NewPtrListOffsetsRequest()
	request.Version = ListOffsetsVersion
	request.ReplicaID = int32(f.config.Broker)
	for _, tp := range sortedPartitions(outOfRange) {
		partition := kmsg.NewListOffsetsRequestTopicPartition()
		partition.Partition, partition.Timestamp = tp.Partition, -1
		partition.CurrentLeaderEpoch = int32(asked[tp].CurrentLeaderEpoch)
		i := slices.IndexFunc(request.Topics, func(topic kmsg.ListOffsetsRequestTopic) bool { return topic.Topic == tp.Topic })
		if i < 0 {
			topic := kmsg.NewListOffsetsRequestTopic()
			topic.Topic = tp.Topic
			request.Topics, i = append(request.Topics, topic), len(request.Topics)
		}
		request.Topics[i].Partitions = append(request.Topics[i].Partitions, partition)
	}
	f.write(s, request, &sentRequest{outOfRange: outOfRange, deadline: f.now + f.config.RequestTimeoutTicks})
}

func (f *Fetcher) listOffsetsResponse(s *source, sent *sentRequest, body []byte) ([]Delivery, error) {
	response := kmsg.NewPtrListOffsetsResponse()
	response.Version = ListOffsetsVersion
	if err := response.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: ListOffsets: %v", errMalformed, err)
	}
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			if answer, ok := sent.outOfRange[tp]; ok && partition.ErrorCode == 0 {
				answer.LogEndOffset = record.Offset(partition.Offset)
				sent.outOfRange[tp] = answer
			}
		}
	}
	var out []Delivery
	for _, tp := range sortedPartitions(sent.outOfRange) {
		answer := sent.outOfRange[tp]
		out = f.deliver(s, out, tp, broker.PeerMessage{FetchResponse: &answer})
	}
	return out, nil
}

// skipResponseTags skips a flexible response header's tagged fields.
func skipResponseTags(body []byte) ([]byte, error) {
	reader := kbin.Reader{Src: body}
	for n := reader.Uvarint(); n > 0 && reader.Ok(); n-- {
		reader.Uvarint()
		reader.Span(int(reader.Uvarint()))
	}
	if !reader.Ok() {
		return nil, fmt.Errorf("%w: response header tags: %v", errMalformed, kbin.ErrNotEnoughData)
	}
	return reader.Src, nil
}
