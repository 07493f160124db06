package wire

import (
	"fmt"
	"io"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v4-v15.
//
// A consumer or a follower reads one or more partitions; the Backend holds
// the fetch until MinBytes of records are available or MaxWait has passed
// (Kafka's long poll), and the records come back as the log holds them,
// RecordBatch v2 bytes, never decoded here.
//
//   - v4+ IsolationLevel and LastStableOffset: tide has no transactions, so
//     the last stable offset is the high watermark and read_committed reads
//     what read_uncommitted reads (librdkafka reads read_committed by
//     default and would stall on any other LSO). AbortedTransactions is
//     empty at read_committed and null otherwise, as in Kafka.
//   - v5+ LogStartOffset (KIP-107).
//   - v7+ fetch sessions (KIP-227): declined. Every fetch is a full fetch
//     answered with session id 0, which KIP-227 allows and which kgo,
//     librdkafka, sarama and the Java client take as "no session" (they
//     keep sending full fetches). A fetch naming a session id is
//     FETCH_SESSION_ID_NOT_FOUND (none was ever handed out); session id 0
//     with an epoch other than 0 (create) or -1 (sessionless) is
//     INVALID_FETCH_SESSION_EPOCH. ForgottenTopics only matter in a
//     session and are ignored.
//   - v9+ CurrentLeaderEpoch (KIP-320): the Backend answers
//     FENCED_LEADER_EPOCH to an older epoch and UNKNOWN_LEADER_EPOCH to a
//     newer one, so a zombie follower or a stale consumer is never served
//     (KAFKA-6880).
//   - v11+ RackID is ignored and PreferredReadReplica is -1 (no KIP-392
//     follower fetching).
//   - v12+ LastFetchedEpoch and DivergingEpoch (KIP-595 style, Kafka 2.7):
//     a follower whose log diverged gets the epoch and end offset to
//     truncate to, and no records (KAFKA-14704). v12 is flexible.
//   - ReplicaID (v0-v14) is the follower's broker id, -1 for consumers;
//     -2 (Kafka's debugging id) passes through as replica.DebugReplicaID,
//     answered by a follower too with its own high watermark and log start
//     offset, never past that high watermark; other negative ids are read
//     as a consumer's.
//   - ReplicaState (KIP-903: the follower's broker id and broker epoch) is
//     a tagged field, tag 1, which Kafka sends from v15 on, where it
//     replaces ReplicaID. tide's followers fetch with v13 (v12 for a topic
//     without an id) and send it there too: a tagged field any v12 reader
//     may skip. A follower fetch without
//     it, or whose ReplicaState names another broker, carries no broker
//     epoch, and the Backend may refuse it.
//   - A partition named more than once is read and answered once, where it
//     was first named, with what it was last asked (Kafka reads a fetch
//     into a map by partition).
//   - v13+ name topics by id alone (KIP-516), resolved with the Backend's
//     metadata; the answer names them by id too. An id this broker does
//     not know (the zero id included) is UNKNOWN_TOPIC_ID for each of its
//     partitions, answered after the known topics, and never reaches the
//     Backend: a client holding a deleted topic's id is not served the
//     topic that took its name, and a follower whose metadata lags behind
//     a deletion and re-creation is neither served nor counted toward the
//     new topic's high watermark (rules.FetchByTopicID). Kafka answers
//     INCONSISTENT_TOPIC_ID where its metadata knows the id but the log
//     holds another; a tide broker serves no partition whose directory
//     holds another topic's id, so that case does not arise. v14 adds nothing tide uses (no tiered
//     storage).
//   - LogEndOffsetTag (v12+, flexible): a debugging fetch (replica id -2)
//     carrying this tagged field gets, in the same tag of each partition
//     answered without error, the answering replica's log end offset, a
//     varlong, taken with its high watermark and log start offset from one
//     answer of the replica. Kafka has no request that gives both, and
//     asking for them apart can show a high watermark above the log end
//     it raced with. It is tide's own extension, asked for only by
//     `tide topic describe`: a fetch without the tag never sees it.

func init() { register(1, 4, 15, (*Handler).handleFetch) }

// LogEndOffsetTag is the tagged field, in a Fetch request and in its
// response's partitions, of tide's log-end-offset extension for debugging
// fetches; the same number as PartitionEpochTag, far above any tag
// Kafka's schemas use.
const LogEndOffsetTag = 0x7469_6465 // "tide"

// wantsLogEndOffset reports whether a fetch asks for LogEndOffsetTag: a
// flexible debugging fetch carrying it.
func wantsLogEndOffset(request *kmsg.FetchRequest) bool {
	sentID := request.ReplicaID
	if request.Version >= 15 {
		sentID = request.ReplicaState.ID
	}
	return request.IsFlexible() && metadata.BrokerID(sentID) == replica.DebugReplicaID && hasTag(&request.UnknownTags, LogEndOffsetTag)
}

func (h *Handler) handleFetch(x *exchange) error {
	request := x.request.(*kmsg.FetchRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	partitions = dedupeFetchPartitions(request)
	unknown := resolveFetchTopicIDs(h.backend, request)
	if request.IsolationLevel != int8(ReadUncommitted) && request.IsolationLevel != int8(ReadCommitted) {
		return fmt.Errorf("%w: fetch isolation level %d", ErrMalformedRequest, request.IsolationLevel)
	}
	response := request.ResponseKind().(*kmsg.FetchResponse)
	if code := fetchSessionError(request); code != 0 {
		response.ErrorCode = code
		x.respond(response)
		return nil
	}
	fetch := h.fetchRequest(request, partitions)
	if files, ok := h.backend.(FileFetcher); ok {
		files.FetchFiles(fetch, func(answers []replica.FetchResponse, ranges [][]FileRange) {
			checkFetchAnswers(len(answers), len(fetch.Partitions))
			respondFetchSpliced(x, h.config.Random, request, response, answers, ranges, unknown)
		})
		return nil
	}
	h.backend.Fetch(fetch, func(answers []replica.FetchResponse) {
		checkFetchAnswers(len(answers), len(fetch.Partitions))
		size := fillFetchResponse(request, response, answers)
		response.Topics = append(response.Topics, unknown...)
		x.respondSized(response, size)
	})
	return nil
}

// resolveFetchTopicIDs names the topics of a v13+ fetch, which come by id
// alone, and takes out those whose id the Backend does not know: it
// returns their answers, UNKNOWN_TOPIC_ID for every partition.
func resolveFetchTopicIDs(backend Backend, request *kmsg.FetchRequest) []kmsg.FetchResponseTopic {
	if request.Version < 13 {
		return nil
	}
	var unknown []kmsg.FetchResponseTopic
	known := request.Topics[:0]
	for _, topic := range request.Topics {
		if resolved, ok := backend.TopicByID(metadata.TopicID(topic.TopicID)); ok {
			topic.Topic = resolved.Name
			known = append(known, topic)
			continue
		}
		entry := kmsg.NewFetchResponseTopic()
		entry.TopicID = topic.TopicID
		for _, partition := range topic.Partitions {
			entry.Partitions = append(entry.Partitions,
				fetchPartitionResponse(request, partition.Partition, replica.FetchResponse{ErrorCode: kerr.UnknownTopicID.Code}))
		}
		unknown = append(unknown, entry)
	}
	request.Topics = known
	return unknown
}

// dedupeFetchPartitions keeps one entry per partition, where it was first
// named, with what it was last asked: Kafka reads a fetch into a map by
// partition, so a partition named twice is read and answered once, and a
// client naming one partition 10,000 times costs one read, not 10,000.
// v13+ name topics by id alone, and are told apart by it. It returns how
// many partitions are left (an upper bound at v13+, where unknown ids are
// then answered without a read).
func dedupeFetchPartitions(request *kmsg.FetchRequest) int {
	var left int
	request.Topics, left = dedupePartitions(request.Topics,
		func(t *kmsg.FetchRequestTopic) (string, *[]kmsg.FetchRequestTopicPartition) {
			if request.Version >= 13 {
				return string(t.TopicID[:]), &t.Partitions
			}
			return t.Topic, &t.Partitions
		},
		func(p *kmsg.FetchRequestTopicPartition) int32 { return p.Partition })
	return left
}

func checkFetchAnswers(answers, partitions int) {
	if answers != partitions {
		panic(fmt.Sprintf("wire: a Backend answered %d partitions of a fetch of %d", answers, partitions))
	}
}

// respondFetchSpliced answers a fetch whose record sets are written from
// where they are: every partition's records, in memory or in files, become
// a splice (see markers). Should the markers not come out where they must,
// the file ranges are read and the response encoded whole.
func respondFetchSpliced(x *exchange, random io.Reader, request *kmsg.FetchRequest, response *kmsg.FetchResponse, answers []replica.FetchResponse,
	ranges [][]FileRange, unknown []kmsg.FetchResponseTopic) {
	fillFetchResponse(request, response, answers)
	response.Topics = append(response.Topics, unknown...)
	m := newMarkers(random)
	var sets []Splice
	var entries []*kmsg.FetchResponseTopicPartition
	next := 0
	for t := range response.Topics {
		for p := range response.Topics[t].Partitions {
			entry := &response.Topics[t].Partitions[p]
			set := Splice{Bytes: entry.RecordBatches}
			if next < len(ranges) && entry.ErrorCode == 0 && entry.DivergingEpoch.Epoch < 0 {
				set.Ranges = ranges[next]
			}
			next++
			if set.size() == 0 {
				continue
			}
			entry.RecordBatches = m.marker(len(sets))
			sets = append(sets, set)
			entries = append(entries, entry)
		}
	}
	if len(sets) == 0 {
		x.respond(response)
		return
	}
	if spliced, ok := m.splice(encodeResponse(x.header.CorrelationID, response), sets, response.IsFlexible()); ok {
		x.respondWith(spliced)
		return
	}
	for i, entry := range entries {
		flat, err := Response{Bytes: []byte{}, Splices: []Splice{{Bytes: sets[i].Bytes, Ranges: sets[i].Ranges}}}.Flatten()
		if err != nil {
			x.fail(err)
			return
		}
		entry.RecordBatches = flat
	}
	x.respond(response)
}

// fetchSessionError is the top-level error of a fetch that asks for a
// session state tide never created, or 0.
func fetchSessionError(request *kmsg.FetchRequest) int16 {
	switch {
	case request.Version < 7:
		return 0
	case request.SessionID != 0:
		return kerr.FetchSessionIDNotFound.Code
	case request.SessionEpoch != 0 && request.SessionEpoch != -1:
		return kerr.InvalidFetchSessionEpoch.Code
	}
	return 0
}

// fetchRequest translates a fetch into the Backend's terms.
func (h *Handler) fetchRequest(request *kmsg.FetchRequest, partitions int) FetchRequest {
	sentID := request.ReplicaID
	if request.Version >= 15 {
		sentID = request.ReplicaState.ID // v15 moved it into ReplicaState (KIP-903)
	}
	replicaID := metadata.BrokerID(sentID)
	if replicaID < 0 && replicaID != replica.DebugReplicaID {
		replicaID = replica.ConsumerReplicaID
	}
	replicaEpoch := metadata.NoBrokerEpoch
	if replicaID >= 0 && request.ReplicaState.ID == sentID && request.ReplicaState.Epoch >= 0 {
		replicaEpoch = metadata.BrokerEpoch(request.ReplicaState.Epoch)
	}
	fetch := FetchRequest{
		ReplicaID: replicaID, ReplicaEpoch: replicaEpoch,
		MaxWaitTicks: h.config.ticks(request.MaxWaitMillis), MinBytes: request.MinBytes, MaxBytes: max(0, min(request.MaxBytes, h.config.MaxFetchBytes)),
		IsolationLevel: IsolationLevel(request.IsolationLevel),
		Partitions:     make([]FetchPartition, 0, partitions),
	}
	for _, topic := range request.Topics {
		for _, partition := range topic.Partitions {
			// Below v9 and v12 kmsg leaves CurrentLeaderEpoch and
			// LastFetchedEpoch at their default, -1: no check, no epoch.
			fetch.Partitions = append(fetch.Partitions, FetchPartition{
				TopicPartition: metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition},
				FetchRequest: replica.FetchRequest{
					ID: uint64(len(fetch.Partitions)), ReplicaID: replicaID, ReplicaEpoch: replicaEpoch,
					CurrentLeaderEpoch: record.LeaderEpoch(partition.CurrentLeaderEpoch),
					FetchOffset:        record.Offset(partition.FetchOffset),
					LastFetchedEpoch:   record.LeaderEpoch(partition.LastFetchedEpoch),
					LogStartOffset:     record.Offset(partition.LogStartOffset),
					MaxBytes:           int64(max(0, min(partition.PartitionMaxBytes, h.config.MaxFetchBytes))),
				},
			})
		}
	}
	return fetch
}

// fillFetchResponse builds the response from the Backend's answers, which
// are in request order, and returns about how large it will encode.
func fillFetchResponse(request *kmsg.FetchRequest, response *kmsg.FetchResponse, answers []replica.FetchResponse) int {
	const overheadBytes = 64 // per partition and topic, with room to spare
	next, size := 0, overheadBytes
	for _, topic := range request.Topics {
		entry := kmsg.NewFetchResponseTopic()
		entry.Topic, entry.TopicID = topic.Topic, topic.TopicID
		for _, partition := range topic.Partitions {
			entry.Partitions = append(entry.Partitions, fetchPartitionResponse(request, partition.Partition, answers[next]))
			size += overheadBytes + len(entry.Partitions[len(entry.Partitions)-1].RecordBatches)
			next++
		}
		response.Topics = append(response.Topics, entry)
		size += overheadBytes + len(topic.Topic)
	}
	return size
}

func fetchPartitionResponse(request *kmsg.FetchRequest, partition int32, answer replica.FetchResponse) kmsg.FetchResponseTopicPartition {
	entry := kmsg.NewFetchResponseTopicPartition()
	entry.Partition, entry.ErrorCode = partition, answer.ErrorCode
	entry.PreferredReadReplica = -1
	// Records are never null on the wire, as Kafka sends them: librdkafka
	// (kcat) refuses a null record set as a parse failure and stops
	// fetching the partition.
	entry.RecordBatches = []byte{}
	if answer.ErrorCode != 0 {
		// As in Kafka, an error carries no offsets and no records: a
		// client must not take a fenced replica's high watermark for the
		// partition's.
		entry.HighWatermark, entry.LastStableOffset, entry.LogStartOffset = -1, -1, -1
		return entry
	}
	entry.HighWatermark = int64(answer.HighWatermark)
	entry.LastStableOffset = int64(answer.HighWatermark) // no transactions: LSO = HW
	entry.LogStartOffset = int64(answer.LogStartOffset)
	if wantsLogEndOffset(request) {
		entry.UnknownTags.Set(LogEndOffsetTag, kbin.AppendVarlong(nil, int64(answer.LogEndOffset)))
	}
	if request.IsolationLevel == int8(ReadCommitted) {
		entry.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	if answer.DivergingEpoch != nil {
		// A diverging log carries no records: the follower truncates first.
		entry.DivergingEpoch.Epoch = int32(answer.DivergingEpoch.Epoch)
		entry.DivergingEpoch.EndOffset = int64(answer.DivergingEpoch.EndOffset)
		return entry
	}
	if answer.Records != nil {
		entry.RecordBatches = answer.Records
	}
	return entry
}
