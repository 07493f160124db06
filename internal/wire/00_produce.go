package wire

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v3-v9.
//
// Each partition's batches go to the Backend as the producer sent them:
// RecordBatch v2 bytes (v3+ is the floor for magic 2, KIP-98, and what
// librdkafka needs for idempotence and headers), never decoded or copied
// here; the replica validates the CRC and stamps the base offset and its
// leader epoch in place. The response is assembled as the partitions'
// answers arrive: an acks=all answer comes only once the high watermark
// has passed the batch.
//
//   - acks=0 gets no response at all, as in Kafka: the client does not
//     read one. acks other than 0, 1 and -1 is INVALID_REQUIRED_ACKS.
//   - A transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
//     partition: tide has no transactions (KIP-98's transactional half),
//     and InitProducerId refuses transactional ids the same way. So is a
//     transactional batch without one, as Kafka's handleProduceRequest
//     answers it.
//   - Each partition carries exactly one batch, of magic 2: none, or more
//     than one, is INVALID_RECORD, and zstd below v7 (KIP-110) is
//     UNSUPPORTED_COMPRESSION_TYPE, for that partition only, as Kafka's
//     ProduceRequest.validateRecords decides. Everything inside the batch
//     is the replica's to check (replica.HandleProduce).
//   - v5+ LogStartOffset (KIP-107); v7 is what sarama uses from V2_1 and
//     what librdkafka needs for zstd (KIP-110); v8+ carries the record
//     errors and error message of a batch refused for particular records
//     (KIP-467); v9 is flexible.
//   - LogAppendTime is the time the leader stamped the batches with on a
//     topic with message.timestamp.type=LogAppendTime, and -1 for
//     CreateTime, where the log keeps the producer's timestamps.
//   - A partition named more than once is appended to and answered once,
//     where it was first named, with the records it was last given (Kafka
//     reads a produce into a map by partition).
//   - An internal topic (__consumer_offsets) is INVALID_TOPIC_EXCEPTION,
//     as Kafka answers "cannot append to internal topic": only its group
//     coordinators write there, and a client's record would be read back
//     as a group's state.
//   - v10+ (KIP-951 leader hints, KIP-890 transactions) and v13 (topic ids)
//     are not served yet.

func init() { register(0, 3, 9, (*Handler).handleProduce) }

func (h *Handler) handleProduce(x *exchange) error {
	request := x.request.(*kmsg.ProduceRequest)
	partitions := 0
	for _, topic := range request.Topics {
		partitions += len(topic.Partitions)
	}
	if err := h.checkCounts(len(request.Topics), partitions); err != nil {
		return err
	}
	dedupeProducePartitions(request)
	response := request.ResponseKind().(*kmsg.ProduceResponse)
	refusal := produceRefusal(request)
	response.Topics = make([]kmsg.ProduceResponseTopic, len(request.Topics))
	for i, topic := range request.Topics {
		response.Topics[i] = kmsg.NewProduceResponseTopic()
		response.Topics[i].Topic = topic.Topic
		response.Topics[i].Partitions = make([]kmsg.ProduceResponseTopicPartition, len(topic.Partitions))
		for j, partition := range topic.Partitions {
			entry := kmsg.NewProduceResponseTopicPartition()
			entry.Partition, entry.ErrorCode = partition.Partition, refusal
			if refusal == 0 && InternalTopic(topic.Topic) {
				entry.ErrorCode = kerr.InvalidTopicException.Code // only the coordinators write there
			}
			if entry.ErrorCode == 0 {
				entry.ErrorCode = batchRefusal(request.Version, partition.Records)
			}
			entry.BaseOffset, entry.LogAppendTime, entry.LogStartOffset = -1, -1, -1
			response.Topics[i].Partitions[j] = entry
		}
	}
	if refusal != 0 {
		x.respond(h.produceResponse(request, response))
		return nil
	}
	if request.Acks == replica.AcksNone {
		// Answer (with nothing) first: the client is not waiting, and the
		// Backend's answers are dropped.
		x.respond(nil)
		h.issueProduces(request, response, func() {})
		return nil
	}
	h.issueProduces(request, response, func() { x.respond(response) })
	return nil
}

// produceRefusal is the code every partition gets when the request as a
// whole cannot be served, or 0.
func produceRefusal(request *kmsg.ProduceRequest) int16 {
	switch {
	case request.TransactionID != nil || hasTransactionalBatch(request):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case request.Acks != replica.AcksNone && request.Acks != replica.AcksLeader && request.Acks != replica.AcksAll:
		return kerr.InvalidRequiredAcks.Code
	}
	return 0
}

// hasTransactionalBatch reports whether any partition's first batch is
// transactional, the test Kafka's RequestUtils.hasTransactionalRecords makes.
func hasTransactionalBatch(request *kmsg.ProduceRequest) bool {
	for _, topic := range request.Topics {
		for _, partition := range topic.Partitions {
			if header, ok := firstBatch(partition.Records); ok && header.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// firstBatch parses the header of the first batch of records, if records
// hold a whole one.
func firstBatch(records []byte) (record.Header, bool) {
	header, err := record.ParseHeader(records)
	if err != nil || header.Size() > len(records) {
		return record.Header{}, false
	}
	return header, true
}

// zstdMinVersion is the first Produce version that may carry zstd
// batches (KIP-110): older clients could not read them back.
const zstdMinVersion = 7

// batchRefusal is the code one partition's records get before they reach
// the replica, or 0: Kafka's ProduceRequest.validateRecords for v3+. A
// buffer too short or too damaged to show a batch header is left to the
// replica, which classifies it (CORRUPT_MESSAGE for a cut-short batch).
func batchRefusal(version int16, records []byte) int16 {
	if len(records) == 0 {
		return kerr.InvalidRecord.Code // at least one batch per partition
	}
	if len(records) > record.MagicPosition && records[record.MagicPosition] != record.Magic {
		return kerr.InvalidRecord.Code // only magic 2 from v3
	}
	header, ok := firstBatch(records)
	switch {
	case !ok:
		return 0
	case header.Compression() == record.CompressionZstd && version < zstdMinVersion:
		return kerr.UnsupportedCompressionType.Code
	case header.Size() < len(records):
		return kerr.InvalidRecord.Code // exactly one batch per partition
	}
	return 0
}

// produceResponse is the answer to a refused request, or nothing for a
// refused acks=0 request.
func (h *Handler) produceResponse(request *kmsg.ProduceRequest, response *kmsg.ProduceResponse) kmsg.Response {
	if request.Acks == replica.AcksNone {
		return nil
	}
	return response
}

// issueProduces hands every partition to the Backend; complete runs once
// all have answered into response.
func (h *Handler) issueProduces(request *kmsg.ProduceRequest, response *kmsg.ProduceResponse, complete func()) {
	g := newGather(complete)
	id := uint64(0)
	timeoutTicks := h.config.ticks(request.TimeoutMillis)
	for i, topic := range request.Topics {
		for j, partition := range topic.Partitions {
			entry := &response.Topics[i].Partitions[j]
			if entry.ErrorCode != 0 {
				continue // refused by batchRefusal
			}
			var answer replica.ProduceAnswer
			deliver := g.expect(func() { fillProduceEntry(entry, answer) })
			tp := metadata.TopicPartition{Topic: topic.Topic, Partition: partition.Partition}
			produce := replica.ProduceRequest{ID: id, Batches: partition.Records, Acks: request.Acks, TimeoutTicks: timeoutTicks}
			h.backend.Produce(tp, produce, func(a replica.ProduceAnswer) { answer = a; deliver() })
			id++
		}
	}
	g.release()
}

// fillProduceEntry writes a partition's answer into its response entry. The
// record errors and message reach only v8+ clients: the encoder drops them
// below v8.
func fillProduceEntry(entry *kmsg.ProduceResponseTopicPartition, answer replica.ProduceAnswer) {
	entry.ErrorCode = answer.ErrorCode
	if answer.ErrorCode == 0 {
		entry.BaseOffset, entry.LogStartOffset = int64(answer.BaseOffset), int64(answer.LogStartOffset)
		if answer.LogAppendTime {
			entry.LogAppendTime = answer.LogAppendTimeMs
		}
		return
	}
	if answer.ErrorMessage != "" {
		message := answer.ErrorMessage
		entry.ErrorMessage = &message
	}
	for _, recordError := range answer.RecordErrors {
		errorRecord := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		message := recordError.Message
		errorRecord.RelativeOffset, errorRecord.ErrorMessage = recordError.BatchIndex, &message
		entry.ErrorRecords = append(entry.ErrorRecords, errorRecord)
	}
}

// dedupeProducePartitions keeps one entry per partition, where it was first
// named, with the records it was last given: Kafka reads a produce into a
// map by partition, so a partition named twice is appended to and answered
// once, and a request cannot make the broker append one partition
// thousands of times.
func dedupeProducePartitions(request *kmsg.ProduceRequest) {
	request.Topics, _ = dedupePartitions(request.Topics,
		func(t *kmsg.ProduceRequestTopic) (string, *[]kmsg.ProduceRequestTopicPartition) {
			return t.Topic, &t.Partitions
		},
		func(p *kmsg.ProduceRequestTopicPartition) int32 { return p.Partition })
}
