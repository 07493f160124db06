package frontend

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/wire"
)

// waitingFetch is one fetch being served: its partitions' answers as they
// come from the node, and, while it waits for data, where each partition
// stood when it was last read.
type waitingFetch struct {
	request  wire.FetchRequest
	done     func([]replica.FetchResponse, [][]wire.FileRange)
	deadline int64
	answers  []replica.FetchResponse
	// files are the answers' records left in the log's files (sendfile).
	files   [][]wire.FileRange
	awaited int
	seen    []partitionPosition
}

// partitionPosition is what a waiting fetch watches: a change in any of it
// can change the fetch's answer (new records under the high watermark, a
// truncation, a lost leadership), so the fetch is served again.
type partitionPosition struct {
	hosted         bool
	role           replica.Role
	highWatermark  record.Offset
	logEndOffset   record.Offset
	logStartOffset record.Offset
}

// FetchFiles reads every partition at once; with too few bytes and no error
// the fetch waits, up to MaxWait, and is read again whenever one of its
// partitions changes (Kafka's DelayedFetch). A change is seen at most once
// per pass of the node loop, so a waiting fetch costs the replica one read
// per change, not one per tick.
func (b *backend) FetchFiles(request wire.FetchRequest, done func([]replica.FetchResponse, [][]wire.FileRange)) {
	if request.ReplicaID >= 0 && request.ReplicaEpoch == metadata.NoBrokerEpoch {
		done(refuseFollowerFetch(request), nil)
		return
	}
	fetch := &waitingFetch{request: request, done: done, deadline: b.now + request.MaxWaitTicks}
	b.serveFetch(fetch)
}

// Fetch is FetchFiles with the records read into memory; wire calls
// FetchFiles, since the backend is a wire.FileFetcher.
func (b *backend) Fetch(request wire.FetchRequest, done func([]replica.FetchResponse)) {
	b.FetchFiles(request, func(answers []replica.FetchResponse, files [][]wire.FileRange) {
		for i := range files {
			if len(files[i]) == 0 {
				continue
			}
			records, err := wire.Response{Bytes: []byte{}, Splices: []wire.Splice{{Ranges: files[i]}}}.Flatten()
			if err != nil {
				answers[i] = replica.FetchResponse{ID: answers[i].ID, ErrorCode: kerr.UnknownServerError.Code, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
				continue
			}
			answers[i].Records = records
		}
		done(answers)
	})
}

// refuseFollowerFetch answers a fetch that names a replica id but no broker
// epoch with CLUSTER_AUTHORIZATION_FAILED for every partition, as Kafka
// answers a client without the ClusterAction right. A follower's fetch
// moves the high watermark and the ISR, and the leader must know which
// incarnation of the follower has the log it claims (KIP-903): tide's
// followers always say (ReplicaState), so a fetch that does not is a
// client standing in for a follower. This is a guard against mistakes,
// not authentication: tide has no authentication yet.
func refuseFollowerFetch(request wire.FetchRequest) []replica.FetchResponse {
	answers := make([]replica.FetchResponse, len(request.Partitions))
	for i, partition := range request.Partitions {
		answers[i] = replica.FetchResponse{ID: partition.ID, ErrorCode: kerr.ClusterAuthorizationFailed.Code,
			HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	}
	return answers
}

// serveFetch reads every partition of the fetch once.
//
// The reads share the fetch's MaxBytes as Kafka's readFromLog does: each
// partition may read no more than what the partitions before it left, the
// first one with records excepted (KIP-74: a consumer always progresses),
// and one the budget no longer covers reads nothing. So a fetch's work on
// the node loop is bounded by its MaxBytes (fetch.max.bytes at most) and
// one batch, however many partitions it names. The node answers a fetch
// at once, so each read's size is known before the next is issued.
func (b *backend) serveFetch(fetch *waitingFetch) {
	partitions := fetch.request.Partitions
	fetch.answers = make([]replica.FetchResponse, len(partitions))
	fetch.files = make([][]wire.FileRange, len(partitions))
	fetch.seen = make([]partitionPosition, len(partitions))
	fetch.awaited = len(partitions) + 1 // held until every read is issued
	used := int64(0)
	for i, partition := range partitions {
		fetch.seen[i] = b.position(partition)
		request := partition.FetchRequest
		if used > 0 {
			request.MaxBytes = max(0, min(request.MaxBytes, int64(fetch.request.MaxBytes)-used))
		}
		b.issue(broker.ClientRequest{Partition: partition.TopicPartition, Fetch: &request}, 0, func(answer broker.ClientAnswer) {
			fetch.answers[i] = fetchAnswer(partition, answer)
			fetch.files[i] = fileRanges(answer.FetchChunks)
			b.fetchRead(fetch)
		})
		b.deliverOutbox()
		used += recordsSize(fetch.answers[i], fetch.files[i])
	}
	b.fetchRead(fetch)
}

// fetchAnswer is the node's answer for one partition, or the error it gave
// in place of one.
func fetchAnswer(partition wire.FetchPartition, answer broker.ClientAnswer) replica.FetchResponse {
	if answer.Fetch == nil {
		code := answer.ErrorCode
		if code == 0 {
			code = kerr.UnknownServerError.Code
		}
		return replica.FetchResponse{ID: partition.ID, ErrorCode: code, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	}
	return *answer.Fetch
}

// fetchRead counts one partition read; after the last it answers the fetch
// or parks it.
func (b *backend) fetchRead(fetch *waitingFetch) {
	fetch.awaited--
	if fetch.awaited > 0 {
		return
	}
	total, failed := int64(0), false
	for i, answer := range fetch.answers {
		total += recordsSize(answer, fetch.files[i])
		failed = failed || answer.ErrorCode != 0
	}
	if failed || total >= int64(fetch.request.MinBytes) || b.now >= fetch.deadline || len(b.fetches) >= b.config.MaxWaitingFetches ||
		b.followerBehind(fetch) {
		limitFetchBytes(fetch.answers, fetch.files, fetch.request.MaxBytes)
		b.noteFollowerHW(fetch)
		fetch.done(fetch.answers, fetch.files)
		return
	}
	b.fetches = append(b.fetches, fetch)
}

// followerPartition is one follower's replica of one partition.
type followerPartition struct {
	follower  metadata.BrokerID
	partition metadata.TopicPartition
}

// followerBehind reports whether a follower's fetch would carry a high
// watermark past the one this leader last sent it for some partition: the
// fetch then completes at once, records or not (Kafka's DelayedFetch does
// the same), so a follower learns the high watermark within a round trip
// rather than at the end of the long poll. A follower's high watermark is
// what it serves if it becomes leader, and what tide topic describe shows.
func (b *backend) followerBehind(fetch *waitingFetch) bool {
	if fetch.request.ReplicaID < 0 {
		return false
	}
	for i, partition := range fetch.request.Partitions {
		answer := fetch.answers[i]
		sent, known := b.followerHW[followerPartition{fetch.request.ReplicaID, partition.TopicPartition}]
		if answer.ErrorCode == 0 && answer.HighWatermark >= 0 && (!known || answer.HighWatermark > sent) {
			return true
		}
	}
	return false
}

// noteFollowerHW remembers the high watermarks a follower's fetch answer
// carries.
func (b *backend) noteFollowerHW(fetch *waitingFetch) {
	if fetch.request.ReplicaID < 0 {
		return
	}
	for i, partition := range fetch.request.Partitions {
		if answer := fetch.answers[i]; answer.ErrorCode == 0 && answer.HighWatermark >= 0 {
			b.followerHW[followerPartition{fetch.request.ReplicaID, partition.TopicPartition}] = answer.HighWatermark
		}
	}
}

// limitFetchBytes drops the records of the partitions that would take the
// response over the fetch's MaxBytes, keeping the first partition with
// records whatever its size so a consumer always progresses (KIP-74). The
// partitions left out are read again by the consumer's next fetch.
func limitFetchBytes(answers []replica.FetchResponse, files [][]wire.FileRange, maxBytes int32) {
	total := int64(0)
	for i := range answers {
		size := recordsSize(answers[i], files[i])
		if size > 0 && total > 0 && total+size > int64(maxBytes) {
			answers[i].Records, files[i] = nil, nil
			continue
		}
		total += size
	}
}

// recordsSize is the size of a partition's records, in memory or in files.
func recordsSize(answer replica.FetchResponse, files []wire.FileRange) int64 {
	size := int64(len(answer.Records))
	for _, file := range files {
		size += file.Size
	}
	return size
}

// fileRanges turns the log's chunks into file ranges for wire, which the
// runtime writes from where they are (sendfile, for real files).
func fileRanges(chunks []commitlog.Chunk) []wire.FileRange {
	if len(chunks) == 0 {
		return nil
	}
	ranges := make([]wire.FileRange, len(chunks))
	for i, chunk := range chunks {
		if chunk.File == nil {
			// A memory chunk holds bytes not yet written (commitlog.Chunk):
			// the broker copies those into Records, and never hands them
			// here, where they would reach sendfile as a nil file.
			panic(fmt.Sprintf("frontend: a zero-copy fetch answer holds a memory chunk at position %d", chunk.Position))
		}
		ranges[i] = wire.FileRange{File: chunk.File, Position: chunk.Position, Size: chunk.Size}
	}
	return ranges
}

// position is where a fetched partition stands on this broker now.
func (b *backend) position(partition wire.FetchPartition) partitionPosition {
	node := b.node()
	if node == nil {
		return partitionPosition{}
	}
	r, _, ok := node.Replica(partition.TopicPartition)
	if !ok {
		return partitionPosition{}
	}
	return partitionPosition{hosted: true, role: r.Role(), highWatermark: r.HighWatermark(),
		logEndOffset: r.LogEndOffset(), logStartOffset: r.LogStartOffset()}
}

// wakeFetches serves again every waiting fetch whose wait ended or one of
// whose partitions changed, and reports whether it served any.
func (b *backend) wakeFetches() bool {
	var woken []*waitingFetch
	kept := b.fetches[:0]
	for _, fetch := range b.fetches {
		if b.now >= fetch.deadline || b.changed(fetch) {
			woken = append(woken, fetch)
			continue
		}
		kept = append(kept, fetch)
	}
	clear(b.fetches[len(kept):])
	b.fetches = kept
	for _, fetch := range woken {
		b.serveFetch(fetch)
	}
	return len(woken) > 0
}

func (b *backend) changed(fetch *waitingFetch) bool {
	for i, partition := range fetch.request.Partitions {
		if b.position(partition) != fetch.seen[i] {
			return true
		}
	}
	return false
}
