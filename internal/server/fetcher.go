package server

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// Replication between brokers runs over the Kafka protocol, as Kafka's
// does: a follower's replicas hand the node fetches and OffsetsForLeaderEpoch
// requests addressed to their leaders, and one fetcher per source broker
// carries them in real Kafka requests to that broker's Kafka listener. The
// leader serves them with the same code that serves consumers (kafkafetch.go),
// long poll included; only the replica id and broker epoch differ.
//
// A fetcher keeps one Fetch in flight at a time, holding every partition
// that fetches from its source: the replicas' next fetches wait for it to
// come back and then leave together in the next request (Kafka's
// AbstractFetcherThread batches the same way). The leader holds the fetch
// until it has data or replicaFetchMaxWait passes, so an idle follower costs
// two requests a second per source, not a busy loop.
const (
	// fetchVersion is the Fetch version followers send: the newest that
	// names topics by name (v13+ use topic ids, which tide does not have).
	// It carries CurrentLeaderEpoch (KIP-320), LastFetchedEpoch and
	// DivergingEpoch (KIP-595 style), and ReplicaState (KIP-903) as a
	// tagged field.
	fetchVersion = 12
	// offsetsVersion is OffsetForLeaderEpoch's: v3 is the first with the
	// replica id and v4 is flexible; v3 suffices.
	offsetsVersion = 3
	// listOffsetsVersion is the ListOffsets a follower sends after
	// OFFSET_OUT_OF_RANGE: v4 carries CurrentLeaderEpoch.
	listOffsetsVersion = 4
	// replicaFetchMaxWait is replica.fetch.wait.max.ms, replicaFetchMinBytes
	// replica.fetch.min.bytes and replicaFetchMaxBytes
	// replica.fetch.response.max.bytes.
	replicaFetchMaxWait  = 500 * time.Millisecond
	replicaFetchMinBytes = 1
	replicaFetchMaxBytes = 10 << 20
	// replicaRequestTimeout bounds a request's wait for its response beyond
	// the long poll (replica.socket.timeout.ms): past it the connection is
	// closed and its requests fail, so a paused leader cannot hold its
	// followers forever.
	replicaRequestTimeout = 10 * time.Second
	// maxReplicaResponseBytes bounds a response the fetcher reads.
	maxReplicaResponseBytes = 2*replicaFetchMaxBytes + 1<<20
)

// replication owns the fetchers, on the node loop.
type replication struct {
	s        *Server
	ctx      context.Context
	fetchers map[metadata.BrokerID]*fetcher
	// unknown are the brokers without a Kafka address, logged once.
	unknown map[metadata.BrokerID]bool
	// now counts the node loop's ticks.
	now int64
	// errors counts the partition errors fetchers received, by Kafka error
	// name, for Status: how an operator (and a test) sees a follower fenced.
	errors map[string]int64
}

func newReplication(s *Server) *replication {
	return &replication{s: s, ctx: context.Background(), fetchers: map[metadata.BrokerID]*fetcher{},
		unknown: map[metadata.BrokerID]bool{}, errors: map[string]int64{}}
}

// fetcher carries one source broker's replication traffic.
type fetcher struct {
	r      *replication
	source metadata.BrokerID
	// address is the source's Kafka address, kept current by the node
	// loop (a restarted broker may register another) and read by the
	// dialer at each attempt.
	address atomic.Pointer[string]
	// client is the live connection, or nil.
	client      *clientConn
	correlation int32
	formatter   *kmsg.RequestFormatter
	// queued are the partitions' next requests, the newest per partition,
	// in the order they came.
	fetches map[metadata.TopicPartition]replica.FetchRequest
	offsets map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest
	order   []metadata.TopicPartition
	// inFlight are the requests sent and not yet answered, by correlation
	// id; fetching says one of them is a Fetch.
	inFlight map[int32]*sentRequest
	fetching bool
}

// sentRequest is one request on the wire: what each partition asked.
type sentRequest struct {
	fetches map[metadata.TopicPartition]replica.FetchRequest
	offsets map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest
	// outOfRange are fetch answers of OFFSET_OUT_OF_RANGE held back while a
	// ListOffsets asks the leader for its log end offset.
	outOfRange map[metadata.TopicPartition]replica.FetchResponse
	// deadline is the replication tick past which the response is overdue.
	deadline int64
}

// enqueue takes the node's peer messages: each replaces what its partition
// had queued, at whichever source.
func (r *replication) enqueue(messages []broker.Outbound) {
	for _, out := range messages {
		m := out.Message
		if m.Fetch == nil && m.OffsetsForLeaderEpoch == nil {
			continue // answers to peers travel as Kafka responses instead
		}
		for id, other := range r.fetchers {
			if id != out.To {
				other.dequeue(m.Partition)
			}
		}
		f := r.fetcher(out.To)
		if f == nil {
			continue // the replica's fetch timeout sends it again
		}
		f.dequeue(m.Partition)
		if m.Fetch != nil {
			f.fetches[m.Partition] = *m.Fetch
		} else {
			f.offsets[m.Partition] = *m.OffsetsForLeaderEpoch
		}
		f.order = append(f.order, m.Partition)
	}
}

// fetcher returns the source's fetcher, starting it on first use, or nil
// when the source has no known Kafka address.
func (r *replication) fetcher(source metadata.BrokerID) *fetcher {
	address := r.s.kafkaAddress(source)
	if f, ok := r.fetchers[source]; ok {
		if address != "" && address != *f.address.Load() {
			f.address.Store(&address)
		}
		return f
	}
	if address == "" {
		if !r.unknown[source] {
			r.unknown[source] = true
			r.s.log.Warn("no Kafka address for a leader: its partitions are not replicated here", "broker", int(source))
		}
		return nil
	}
	f := &fetcher{r: r, source: source,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tide-replica-" + strconv.Itoa(int(r.s.config.ID)))),
		fetches:   map[metadata.TopicPartition]replica.FetchRequest{},
		offsets:   map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{},
		inFlight:  map[int32]*sentRequest{}}
	f.address.Store(&address)
	r.fetchers[source] = f
	go f.dialLoop(r.ctx)
	return f
}

func (f *fetcher) dequeue(tp metadata.TopicPartition) {
	_, fetch := f.fetches[tp]
	_, offsets := f.offsets[tp]
	if !fetch && !offsets {
		return
	}
	delete(f.fetches, tp)
	delete(f.offsets, tp)
	f.order = slices.DeleteFunc(f.order, func(queued metadata.TopicPartition) bool { return queued == tp })
}

// sendAll sends what every fetcher may send now.
func (r *replication) sendAll() {
	for _, f := range r.fetchers {
		f.send()
	}
}

// send sends the queued OffsetsForLeaderEpoch requests at once, and the
// queued fetches unless a fetch is in flight.
func (f *fetcher) send() {
	if f.client == nil || len(f.order) == 0 {
		return
	}
	var fetch *kmsg.FetchRequest
	var offsets *kmsg.OffsetForLeaderEpochRequest
	fetched := map[metadata.TopicPartition]replica.FetchRequest{}
	asked := map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{}
	kept := f.order[:0]
	for _, tp := range f.order {
		if request, ok := f.offsets[tp]; ok {
			if offsets == nil {
				offsets = f.newOffsetsRequest()
			}
			addOffsetsPartition(offsets, tp, request)
			asked[tp] = request
			delete(f.offsets, tp)
			continue
		}
		if f.fetching {
			kept = append(kept, tp)
			continue
		}
		if fetch == nil {
			fetch = f.newFetchRequest(f.fetches[tp].ReplicaEpoch)
		}
		addFetchPartition(fetch, tp, f.fetches[tp])
		fetched[tp] = f.fetches[tp]
		delete(f.fetches, tp)
	}
	clear(f.order[len(kept):])
	f.order = kept
	if offsets != nil {
		f.write(offsets, &sentRequest{offsets: asked, deadline: f.r.deadline(replicaRequestTimeout)})
	}
	if fetch != nil {
		f.fetching = true
		f.write(fetch, &sentRequest{fetches: fetched, deadline: f.r.deadline(replicaFetchMaxWait + replicaRequestTimeout)})
	}
}

func (f *fetcher) write(request kmsg.Request, sent *sentRequest) {
	f.correlation++
	f.inFlight[f.correlation] = sent
	if !f.client.send(f.formatter.AppendRequest(nil, request, f.correlation)) {
		f.fail(f.client, "send queue full")
	}
}

func (f *fetcher) newFetchRequest(epoch metadata.BrokerEpoch) *kmsg.FetchRequest {
	request := kmsg.NewPtrFetchRequest()
	request.Version = fetchVersion
	request.ReplicaID = int32(f.r.s.config.ID)
	request.ReplicaState.ID, request.ReplicaState.Epoch = int32(f.r.s.config.ID), int64(epoch)
	request.MaxWaitMillis = int32(replicaFetchMaxWait / time.Millisecond)
	request.MinBytes, request.MaxBytes = replicaFetchMinBytes, replicaFetchMaxBytes
	request.SessionID, request.SessionEpoch = 0, -1 // no fetch sessions (KIP-227)
	return request
}

func addFetchPartition(request *kmsg.FetchRequest, tp metadata.TopicPartition, fetch replica.FetchRequest) {
	partition := kmsg.NewFetchRequestTopicPartition()
	partition.Partition = tp.Partition
	partition.CurrentLeaderEpoch = int32(fetch.CurrentLeaderEpoch)
	partition.FetchOffset = int64(fetch.FetchOffset)
	partition.LastFetchedEpoch = int32(fetch.LastFetchedEpoch)
	partition.PartitionMaxBytes = int32(min(fetch.MaxBytes, replicaFetchMaxBytes))
	for i := range request.Topics {
		if request.Topics[i].Topic == tp.Topic {
			request.Topics[i].Partitions = append(request.Topics[i].Partitions, partition)
			return
		}
	}
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic, topic.Partitions = tp.Topic, []kmsg.FetchRequestTopicPartition{partition}
	request.Topics = append(request.Topics, topic)
}

func (f *fetcher) newOffsetsRequest() *kmsg.OffsetForLeaderEpochRequest {
	request := kmsg.NewPtrOffsetForLeaderEpochRequest()
	request.Version = offsetsVersion
	request.ReplicaID = int32(f.r.s.config.ID)
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

// connected adopts a new connection and sends what is queued.
func (f *fetcher) connected(client *clientConn) {
	if f.client != nil {
		f.fail(f.client, "replaced")
	}
	f.client = client
	f.send()
}

// fail drops a connection: every request in flight on it is answered with
// an error, after which each replica backs off and fetches again.
func (f *fetcher) fail(client *clientConn, reason string) {
	if f.client != client || client == nil {
		return
	}
	f.r.s.log.Debug("replica fetcher connection failed", "source", int(f.source), "reason", reason)
	client.close()
	f.client = nil
	f.fetching = false
	sent := f.inFlight
	f.inFlight = map[int32]*sentRequest{}
	for _, correlation := range slices.Sorted(maps.Keys(sent)) {
		f.failRequest(sent[correlation], kerr.NetworkException.Code)
	}
}

// failRequest answers every partition of a request with code.
func (f *fetcher) failRequest(sent *sentRequest, code int16) {
	for _, tp := range sortedPartitions(sent.fetches) {
		f.deliver(tp, broker.PeerMessage{FetchResponse: &replica.FetchResponse{ID: sent.fetches[tp].ID, ErrorCode: code,
			HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, LeaderEpoch: record.NoLeaderEpoch}})
	}
	for _, tp := range sortedPartitions(sent.offsets) {
		f.deliver(tp, broker.PeerMessage{OffsetsForLeaderEpochAnswer: &replica.OffsetsForLeaderEpochAnswer{ID: sent.offsets[tp].ID,
			ErrorCode: code, LeaderEpoch: record.NoLeaderEpoch, EndOffset: -1}})
	}
	for _, tp := range sortedPartitions(sent.outOfRange) {
		answer := sent.outOfRange[tp] // still OFFSET_OUT_OF_RANGE, without a log end
		f.deliver(tp, broker.PeerMessage{FetchResponse: &answer})
	}
}

func sortedPartitions[V any](m map[metadata.TopicPartition]V) []metadata.TopicPartition {
	return slices.SortedFunc(maps.Keys(m), func(a, b metadata.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}

// deliver hands one partition's answer to the node's replica.
func (f *fetcher) deliver(tp metadata.TopicPartition, message broker.PeerMessage) {
	node := f.r.s.lifecycle.Node()
	if node == nil {
		return
	}
	code := int16(0)
	if message.FetchResponse != nil {
		code = message.FetchResponse.ErrorCode
	} else if message.OffsetsForLeaderEpochAnswer != nil {
		code = message.OffsetsForLeaderEpochAnswer.ErrorCode
	}
	if code != 0 {
		name := strconv.Itoa(int(code))
		if known, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			name = known.Message
		}
		f.r.errors[name]++
	}
	message.Partition = tp
	node.HandlePeer(f.source, message)
}

// received handles one response from the source.
func (f *fetcher) received(client *clientConn, payload []byte) {
	if f.client != client {
		return // from a connection already given up
	}
	if len(payload) < 4 {
		f.fail(client, "short response")
		return
	}
	correlation := int32(binary.BigEndian.Uint32(payload))
	sent, ok := f.inFlight[correlation]
	if !ok {
		f.fail(client, fmt.Sprintf("response to unknown request %d", correlation))
		return
	}
	delete(f.inFlight, correlation)
	var err error
	switch {
	case sent.fetches != nil:
		f.fetching = false
		err = f.fetchResponse(sent, payload[4:])
	case sent.outOfRange != nil:
		err = f.listOffsetsResponse(sent, payload[4:])
	default:
		err = f.offsetsResponse(sent, payload[4:])
	}
	if err != nil {
		f.r.s.log.Warn("undecodable response from a leader", "source", int(f.source), "error", err)
		f.failRequest(sent, kerr.CorruptMessage.Code)
		f.fail(client, err.Error())
	}
}

func (f *fetcher) fetchResponse(sent *sentRequest, body []byte) error {
	body, err := skipResponseTags(body)
	if err != nil {
		return err
	}
	response := kmsg.NewPtrFetchResponse()
	response.Version = fetchVersion
	if err := response.ReadFrom(body); err != nil {
		return fmt.Errorf("fetch response: %w", err)
	}
	answered := map[metadata.TopicPartition]bool{}
	outOfRange := map[metadata.TopicPartition]replica.FetchResponse{}
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			asked, ok := sent.fetches[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			answer := replica.FetchResponse{ID: asked.ID, ErrorCode: partition.ErrorCode,
				HighWatermark: record.Offset(partition.HighWatermark), LogStartOffset: record.Offset(partition.LogStartOffset),
				LogEndOffset: -1, LeaderEpoch: record.LeaderEpoch(partition.CurrentLeader.LeaderEpoch), Records: partition.RecordBatches}
			if response.ErrorCode != 0 {
				answer.ErrorCode = response.ErrorCode
			}
			if partition.DivergingEpoch.Epoch >= 0 {
				answer.DivergingEpoch = &replica.EpochEndOffset{Epoch: record.LeaderEpoch(partition.DivergingEpoch.Epoch),
					EndOffset: record.Offset(partition.DivergingEpoch.EndOffset)}
			}
			if answer.ErrorCode == kerr.OffsetOutOfRange.Code {
				outOfRange[tp] = answer
				continue
			}
			f.deliver(tp, broker.PeerMessage{FetchResponse: &answer})
		}
	}
	f.askLogEnd(outOfRange, sent.fetches)
	missing := &sentRequest{fetches: map[metadata.TopicPartition]replica.FetchRequest{}}
	for tp, asked := range sent.fetches {
		if !answered[tp] {
			missing.fetches[tp] = asked
		}
	}
	f.failRequest(missing, kerr.UnknownServerError.Code)
	return nil
}

func (f *fetcher) offsetsResponse(sent *sentRequest, body []byte) error {
	response := kmsg.NewPtrOffsetForLeaderEpochResponse()
	response.Version = offsetsVersion
	if err := response.ReadFrom(body); err != nil {
		return fmt.Errorf("OffsetForLeaderEpoch response: %w", err)
	}
	answered := map[metadata.TopicPartition]bool{}
	for _, topic := range response.Topics {
		for _, partition := range topic.Partitions {
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			asked, ok := sent.offsets[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			f.deliver(tp, broker.PeerMessage{OffsetsForLeaderEpochAnswer: &replica.OffsetsForLeaderEpochAnswer{ID: asked.ID,
				ErrorCode: partition.ErrorCode, LeaderEpoch: record.LeaderEpoch(partition.LeaderEpoch), EndOffset: record.Offset(partition.EndOffset)}})
		}
	}
	missing := &sentRequest{offsets: map[metadata.TopicPartition]replica.OffsetsForLeaderEpochRequest{}}
	for tp, asked := range sent.offsets {
		if !answered[tp] {
			missing.offsets[tp] = asked
		}
	}
	f.failRequest(missing, kerr.UnknownServerError.Code)
	return nil
}

// askLogEnd asks the leader for the log end offset of each partition whose
// fetch was OFFSET_OUT_OF_RANGE, which a Fetch response does not carry and
// the follower needs: ahead of the leader's log end it truncates to it
// (Kafka's fetchOffsetAndTruncate asks ListOffsets the same way). A
// ListOffsets from a replica id is answered with the log end offset, not
// the high watermark.
func (f *fetcher) askLogEnd(outOfRange map[metadata.TopicPartition]replica.FetchResponse, asked map[metadata.TopicPartition]replica.FetchRequest) {
	if len(outOfRange) == 0 {
		return
	}
	request := kmsg.NewPtrListOffsetsRequest()
	request.Version = listOffsetsVersion
	request.ReplicaID = int32(f.r.s.config.ID)
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
	f.write(request, &sentRequest{outOfRange: outOfRange, deadline: f.r.deadline(replicaRequestTimeout)})
}

func (f *fetcher) listOffsetsResponse(sent *sentRequest, body []byte) error {
	response := kmsg.NewPtrListOffsetsResponse()
	response.Version = listOffsetsVersion
	if err := response.ReadFrom(body); err != nil {
		return fmt.Errorf("ListOffsets response: %w", err)
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
	for _, tp := range sortedPartitions(sent.outOfRange) {
		answer := sent.outOfRange[tp]
		f.deliver(tp, broker.PeerMessage{FetchResponse: &answer})
	}
	return nil
}

// skipResponseTags skips a flexible response header's tagged fields.
func skipResponseTags(body []byte) ([]byte, error) {
	reader := kbin.Reader{Src: body}
	for n := reader.Uvarint(); n > 0 && reader.Ok(); n-- {
		reader.Uvarint()
		reader.Span(int(reader.Uvarint()))
	}
	if !reader.Ok() {
		return nil, fmt.Errorf("response header tags: %w", kbin.ErrNotEnoughData)
	}
	return reader.Src, nil
}

// tick times out requests whose response is overdue. Time is counted in
// the node loop's ticks, as the cores count it, not read from the clock: a
// process paused with SIGSTOP and resumed finds its requests as overdue as
// when it stopped, and handles the responses that arrived meanwhile first.
func (r *replication) tick() {
	r.now++
	for _, f := range r.fetchers {
		for _, sent := range f.inFlight {
			if r.now > sent.deadline {
				f.fail(f.client, "request timed out")
				break
			}
		}
	}
}

// deadline is the tick d from now.
func (r *replication) deadline(d time.Duration) int64 { return r.now + r.s.config.ticks(d) }

// errorCounts is a copy of the fetch errors seen, for Status.
func (r *replication) errorCounts() map[string]int64 { return maps.Clone(r.errors) }
