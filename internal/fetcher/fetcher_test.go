package fetcher

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

func newTestFetcher(t *testing.T) *Fetcher {
	t.Helper()
	f, err := New(Config{Broker: 2, MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 1 << 20, FetchTimeoutTicks: 10,
		RequestTimeoutTicks: 5, MaxResponseBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var (
	tp0 = metadata.TopicPartition{Topic: "t", Partition: 0}
	tp1 = metadata.TopicPartition{Topic: "t", Partition: 1}
	// topicT is topic t's id.
	topicT = metadata.TopicID{0: 't', 15: 1}
)

func fetchFor(tp metadata.TopicPartition, id uint64, offset int64) broker.Outbound {
	return broker.Outbound{To: 1, Message: broker.PeerMessage{Partition: tp, TopicID: topicT, Fetch: &replica.FetchRequest{ID: id, ReplicaID: 2,
		ReplicaEpoch: 7, CurrentLeaderEpoch: 3, FetchOffset: record.Offset(offset), LastFetchedEpoch: 3, MaxBytes: 4096}}}
}

// sent decodes the one request the fetcher wrote: its header and body.
func sent(t *testing.T, out Outbox, request kmsg.Request) int32 {
	t.Helper()
	if len(out.Sends) != 1 {
		t.Fatalf("want one request sent, got %d", len(out.Sends))
	}
	data := out.Sends[0].Bytes
	if size := binary.BigEndian.Uint32(data); int(size) != len(data)-4 {
		t.Fatalf("size prefix %d for %d bytes", size, len(data)-4)
	}
	header := data[4:]
	key, version, correlation := int16(binary.BigEndian.Uint16(header)), int16(binary.BigEndian.Uint16(header[2:])), int32(binary.BigEndian.Uint32(header[4:]))
	if key != request.Key() {
		t.Fatalf("sent key %d, want %d", key, request.Key())
	}
	request.SetVersion(version)
	body := header[8:]
	clientID := int(binary.BigEndian.Uint16(body))
	body = body[2+clientID:]
	if request.IsFlexible() {
		body = body[1:] // no header tags
	}
	if err := request.ReadFrom(body); err != nil {
		t.Fatalf("the request does not decode: %v", err)
	}
	return correlation
}

func respond(correlation int32, response kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(correlation))
	if response.IsFlexible() {
		out = append(out, 0)
	}
	return response.AppendTo(out)
}

// Every partition that follows one leader rides in one Fetch carrying the
// replica id, broker epoch and epochs; the next waits for its answer; the
// answer goes to each partition's replica.
func TestFetchesBatchPerSource(t *testing.T) {
	f := newTestFetcher(t)
	f.Enqueue(fetchFor(tp0, 1, 5), "leader:9092")
	f.Enqueue(fetchFor(tp1, 2, 9), "leader:9092")
	if got := f.Sources(); len(got) != 1 || got[0] != (Source{ID: 1, Address: "leader:9092"}) {
		t.Fatalf("sources %v", got)
	}
	f.SendAll()
	if out := f.TakeOutbox(); len(out.Sends) != 0 {
		t.Fatalf("sent %d requests without a connection", len(out.Sends))
	}
	f.Connected(1, 11)
	request := kmsg.NewPtrFetchRequest()
	correlation := sent(t, f.TakeOutbox(), request)
	if request.Version != FetchVersion || request.Topics[0].TopicID != topicT || request.ReplicaID != 2 || request.ReplicaState.Epoch != 7 || len(request.Topics) != 1 ||
		len(request.Topics[0].Partitions) != 2 || request.Topics[0].Partitions[1].FetchOffset != 9 ||
		request.Topics[0].Partitions[0].CurrentLeaderEpoch != 3 || request.Topics[0].Partitions[0].LastFetchedEpoch != 3 {
		t.Fatalf("fetch %+v", request)
	}
	f.Enqueue(fetchFor(tp0, 3, 6), "leader:9092")
	f.SendAll()
	if out := f.TakeOutbox(); len(out.Sends) != 0 {
		t.Fatal("a second fetch went out while one was in flight")
	}
	response := kmsg.NewPtrFetchResponse()
	response.Version = FetchVersion
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = topicT
	for _, p := range []int32{0, 1} {
		partition := kmsg.NewFetchResponseTopicPartition()
		partition.Partition, partition.HighWatermark = p, 42
		topic.Partitions = append(topic.Partitions, partition)
	}
	response.Topics = append(response.Topics, topic)
	deliveries := f.Received(1, 11, respond(correlation, response))
	if len(deliveries) != 2 || deliveries[0].Message.FetchResponse.ID != 1 || deliveries[1].Message.FetchResponse.HighWatermark != 42 {
		t.Fatalf("deliveries %+v", deliveries)
	}
	// The next Fetch waits for tp1, which the answer served, to ask
	// again, but no longer than MaxReadyWaitTicks.
	for range MaxReadyWaitTicks {
		f.SendAll()
		if out := f.TakeOutbox(); len(out.Sends) != 0 {
			t.Fatal("the next fetch left before tp1 asked again or the wait ran out")
		}
		f.Tick()
	}
	f.SendAll()
	next := kmsg.NewPtrFetchRequest()
	sent(t, f.TakeOutbox(), next)
	if len(next.Topics[0].Partitions) != 1 || next.Topics[0].Partitions[0].FetchOffset != 6 {
		t.Fatalf("the queued fetch %+v", next)
	}
}

// After an answer, the next Fetch leaves as soon as every partition the
// answer served without error has asked again: the one that took records
// asks only after syncing them, and a Fetch of the idle partition alone,
// sent first, would be parked by the leader for its whole long poll. A
// partition answered with an error backs off, and is not waited for.
func TestNextFetchWaitsForTheAnsweredPartitions(t *testing.T) {
	f := newTestFetcher(t)
	tp2 := metadata.TopicPartition{Topic: "t", Partition: 2}
	for i, tp := range []metadata.TopicPartition{tp0, tp1, tp2} {
		f.Enqueue(fetchFor(tp, uint64(i+1), 5), "leader:9092")
	}
	f.Connected(1, 11)
	correlation := sent(t, f.TakeOutbox(), kmsg.NewPtrFetchRequest())
	response := kmsg.NewPtrFetchResponse()
	response.Version = FetchVersion
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = topicT
	for _, p := range []int32{0, 1, 2} {
		partition := kmsg.NewFetchResponseTopicPartition()
		partition.Partition = p
		if p == 2 {
			partition.ErrorCode = kerr.NotLeaderForPartition.Code
		}
		topic.Partitions = append(topic.Partitions, partition)
	}
	response.Topics = append(response.Topics, topic)
	f.Received(1, 11, respond(correlation, response))
	f.Enqueue(fetchFor(tp1, 4, 5), "leader:9092") // the idle partition, at once
	f.SendAll()
	if out := f.TakeOutbox(); len(out.Sends) != 0 {
		t.Fatal("the idle partition's fetch left alone")
	}
	f.Enqueue(fetchFor(tp0, 5, 9), "leader:9092") // after its sync
	f.SendAll()
	next := kmsg.NewPtrFetchRequest()
	sent(t, f.TakeOutbox(), next)
	if len(next.Topics[0].Partitions) != 2 {
		t.Fatalf("the next fetch %+v, want both partitions", next)
	}
}

// A Fetch whose answer is overdue gives the connection up: every request
// on it fails, and the runtime is asked to close it.
func TestOverdueFetchGivesTheConnectionUp(t *testing.T) {
	f := newTestFetcher(t)
	f.Enqueue(fetchFor(tp0, 1, 5), "leader:9092")
	f.Connected(1, 11)
	sent(t, f.TakeOutbox(), kmsg.NewPtrFetchRequest())
	for range 10 {
		if failed := f.Tick(); len(failed) != 0 {
			t.Fatal("failed before its timeout")
		}
	}
	failed := f.Tick()
	if len(failed) != 1 || failed[0].Message.FetchResponse.ErrorCode != kerr.NetworkException.Code {
		t.Fatalf("failed %+v", failed)
	}
	out := f.TakeOutbox()
	if len(out.Closes) != 1 || out.Closes[0].Conn != 11 {
		t.Fatalf("closes %+v", out.Closes)
	}
	if late := f.Received(1, 11, respond(1, kmsg.NewPtrFetchResponse())); late != nil {
		t.Fatalf("a response on the given-up connection was taken: %+v", late)
	}
	if f.ErrorCounts()["NETWORK_EXCEPTION"] != 1 {
		t.Fatalf("errors %v", f.ErrorCounts())
	}
}

// OFFSET_OUT_OF_RANGE is held back while ListOffsets asks the leader for its
// log end offset, which the replica needs and a Fetch response lacks.
func TestOutOfRangeAsksForTheLogEnd(t *testing.T) {
	f := newTestFetcher(t)
	f.Enqueue(fetchFor(tp0, 1, 500), "leader:9092")
	f.Connected(1, 11)
	correlation := sent(t, f.TakeOutbox(), kmsg.NewPtrFetchRequest())
	response := kmsg.NewPtrFetchResponse()
	response.Version = FetchVersion
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = topicT
	partition := kmsg.NewFetchResponseTopicPartition()
	partition.ErrorCode = kerr.OffsetOutOfRange.Code
	topic.Partitions = append(topic.Partitions, partition)
	response.Topics = append(response.Topics, topic)
	if deliveries := f.Received(1, 11, respond(correlation, response)); len(deliveries) != 0 {
		t.Fatalf("delivered before the log end was known: %+v", deliveries)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	correlation = sent(t, f.TakeOutbox(), list)
	if list.ReplicaID != 2 || list.Topics[0].Partitions[0].Timestamp != -1 {
		t.Fatalf("list offsets %+v", list)
	}
	answer := kmsg.NewPtrListOffsetsResponse()
	answer.Version = ListOffsetsVersion
	answerTopic := kmsg.NewListOffsetsResponseTopic()
	answerTopic.Topic = "t"
	answerPartition := kmsg.NewListOffsetsResponseTopicPartition()
	answerPartition.Offset = 120
	answerTopic.Partitions = append(answerTopic.Partitions, answerPartition)
	answer.Topics = append(answer.Topics, answerTopic)
	deliveries := f.Received(1, 11, respond(correlation, answer))
	if len(deliveries) != 1 || deliveries[0].Message.FetchResponse.ErrorCode != kerr.OffsetOutOfRange.Code ||
		deliveries[0].Message.FetchResponse.LogEndOffset != 120 {
		t.Fatalf("deliveries %+v", deliveries)
	}
}

// A response that does not decode fails its request and the connection.
func TestMalformedResponseFailsTheConnection(t *testing.T) {
	f := newTestFetcher(t)
	f.Enqueue(fetchFor(tp0, 1, 5), "leader:9092")
	f.Connected(1, 11)
	correlation := sent(t, f.TakeOutbox(), kmsg.NewPtrFetchRequest())
	payload := binary.BigEndian.AppendUint32(nil, uint32(correlation))
	payload = append(payload, 0, 0xff, 0xff)
	deliveries := f.Received(1, 11, payload)
	if len(deliveries) != 1 || deliveries[0].Message.FetchResponse.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("deliveries %+v", deliveries)
	}
	out := f.TakeOutbox()
	if len(out.Closes) != 1 || len(out.Warnings) != 1 {
		t.Fatalf("outbox %+v", out)
	}
}

// A leader with no known address gets no session, and one warning.
func TestUnknownLeaderIsWarnedOnce(t *testing.T) {
	f := newTestFetcher(t)
	f.Enqueue(fetchFor(tp0, 1, 5), "")
	f.Enqueue(fetchFor(tp0, 2, 5), "")
	if len(f.Sources()) != 0 {
		t.Fatal("a source without an address")
	}
	if out := f.TakeOutbox(); len(out.Warnings) != 1 {
		t.Fatalf("warnings %q", out.Warnings)
	}
}

// A topic with an id is fetched by it (v13, KIP-516) and its answer, named
// by id, goes to the partition that asked; UNKNOWN_TOPIC_ID (the leader's
// topic of that name is another incarnation) reaches the replica, which
// backs off. A topic created before topic ids is fetched by name (v12) in a
// Fetch of its own, which leaves next: neither kind waits for ever.
func TestFetchesByTopicIDAndByNameWithout(t *testing.T) {
	f := newTestFetcher(t)
	old := metadata.TopicPartition{Topic: "old", Partition: 0}
	withoutID := fetchFor(old, 2, 7)
	withoutID.Message.TopicID = metadata.NoTopicID
	f.Enqueue(fetchFor(tp0, 1, 5), "leader:9092")
	f.Enqueue(withoutID, "leader:9092")
	f.Connected(1, 11)
	byID := kmsg.NewPtrFetchRequest()
	correlation := sent(t, f.TakeOutbox(), byID)
	if byID.Version != FetchVersion || len(byID.Topics) != 1 || byID.Topics[0].TopicID != topicT || len(byID.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch by id %+v", byID)
	}
	response := kmsg.NewPtrFetchResponse()
	response.Version = FetchVersion
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = topicT
	partition := kmsg.NewFetchResponseTopicPartition()
	partition.ErrorCode = kerr.UnknownTopicID.Code
	topic.Partitions = append(topic.Partitions, partition)
	response.Topics = append(response.Topics, topic)
	deliveries := f.Received(1, 11, respond(correlation, response))
	if len(deliveries) != 1 || deliveries[0].Message.Partition != tp0 || deliveries[0].Message.FetchResponse.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("deliveries %+v", deliveries)
	}
	f.SendAll()
	byName := kmsg.NewPtrFetchRequest()
	sent(t, f.TakeOutbox(), byName)
	if byName.Version != FetchByNameVersion || len(byName.Topics) != 1 || byName.Topics[0].Topic != "old" {
		t.Fatalf("fetch by name %+v", byName)
	}
}

// With rule recreated-topic off, every topic is fetched by name, as before
// topic ids.
func TestLegacyFetchesByName(t *testing.T) {
	f, err := New(Config{Broker: 2, MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 1 << 20, FetchTimeoutTicks: 10,
		RequestTimeoutTicks: 5, MaxResponseBytes: 2 << 20, Rules: rules.Rules{}.Without(rules.FetchByTopicID)})
	if err != nil {
		t.Fatal(err)
	}
	f.Enqueue(fetchFor(tp0, 1, 5), "leader:9092")
	f.Connected(1, 11)
	request := kmsg.NewPtrFetchRequest()
	sent(t, f.TakeOutbox(), request)
	if request.Version != FetchByNameVersion || request.Topics[0].Topic != "t" {
		t.Fatalf("fetch %+v", request)
	}
}
