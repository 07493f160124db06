package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recorder collects a run's history from the workload's goroutines.
type recorder struct {
	began   time.Time
	mu      sync.Mutex
	history History
}

// ms is the time since the run began, in milliseconds.
func (r *recorder) ms() int64 { return time.Since(r.began).Milliseconds() }

func (r *recorder) add(update func(h *History)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	update(&r.history)
}

// acknowledgedSince counts the acknowledgements answered at or after ms.
func (r *recorder) acknowledgedSince(ms int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.history.Produces {
		if p.Outcome == Acknowledged && p.AnsweredMs >= ms {
			n++
		}
	}
	return n
}

// producer writes unique values round-robin over the topic's partitions at
// a fixed rate, with at most maxInFlightPerPartition records unanswered on
// each partition, and records every outcome. A partition at its limit (its
// leader gone) is skipped, not waited for, so the others go on and the
// timeline shows what the cluster could take.
type producer struct {
	client *kgo.Client
	done   chan struct{}
}

const maxInFlightPerPartition = 100

func startProducer(ctx context.Context, config Config, seeds []string, name string, r *recorder) (*producer, error) {
	options := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(config.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250 * time.Millisecond), kgo.ProducerLinger(0),
		// A restarted node no longer answers from an empty image (it serves
		// no client until caught up with the metadata log), but a broker
		// may still miss a topic for a moment (one created through another
		// broker): franz-go's default gives a record up after four
		// UNKNOWN_TOPIC_OR_PARTITION answers, and this workload never may.
		kgo.UnknownTopicRetries(-1)}
	if config.Acks == "1" {
		options = append(options, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	} else {
		options = append(options, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, err
	}
	p := &producer{client: client, done: make(chan struct{})}
	interval := time.Second * time.Duration(config.Producers) / time.Duration(config.RatePerSecond)
	go func() {
		defer close(p.done)
		slots := make([]chan struct{}, config.Partitions)
		for i := range slots {
			slots[i] = make(chan struct{}, maxInFlightPerPartition)
		}
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for sequence := 0; ; sequence++ {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			partition := int32(sequence % config.Partitions)
			select {
			case slots[partition] <- struct{}{}:
				p.produce(config, fmt.Sprintf("%s-%08d", name, sequence), partition, slots[partition], r)
			default:
			}
		}
	}()
	return p, nil
}

func (p *producer) produce(config Config, value string, partition int32, slots chan struct{}, r *recorder) {
	sent := r.ms()
	p.client.Produce(context.Background(), &kgo.Record{Partition: partition, Value: []byte(value)}, func(record *kgo.Record, err error) {
		<-slots
		outcome := Produce{Value: value, Partition: partition, SentMs: sent, AnsweredMs: r.ms(), Outcome: Acknowledged}
		if err != nil {
			outcome.Outcome, outcome.Error = classify(err), err.Error()
		} else {
			outcome.Offset = record.Offset
		}
		r.add(func(h *History) { h.Produces = append(h.Produces, outcome) })
	})
}

// classify sorts a produce error: a Kafka error the broker answered that
// says the record was refused is definite; anything else (a timeout, a
// closed client, a lost connection, an error that may follow a write) is
// indefinite.
func classify(err error) Outcome {
	var kafkaError *kerr.Error
	if !errors.As(err, &kafkaError) || kafkaError.Retriable {
		return Indefinite
	}
	switch kafkaError {
	case kerr.NotEnoughReplicasAfterAppend, kerr.OutOfOrderSequenceNumber, kerr.DuplicateSequenceNumber,
		kerr.UnknownProducerID, kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.RequestTimedOut:
		return Indefinite
	}
	return Failed
}

// stop stops producing and waits up to timeout for the records in flight;
// those still unanswered then are failed by closing the client and stay
// indefinite.
func (p *producer) stop(timeout time.Duration) {
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p.client.Flush(ctx)
	p.client.Close()
}

// startConsumer reads every partition from its start while the run goes
// on and records each record it reads.
func startConsumer(ctx context.Context, config Config, seeds []string, r *recorder) (chan struct{}, error) {
	partitions := map[int32]kgo.Offset{}
	for p := range int32(config.Partitions) {
		partitions[p] = kgo.NewOffset().AtStart()
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{config.Topic: partitions}))
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer client.Close()
		for ctx.Err() == nil {
			fetches := client.PollFetches(ctx)
			now := r.ms()
			var reads []Read
			fetches.EachRecord(func(record *kgo.Record) {
				reads = append(reads, Read{Partition: record.Partition, Offset: record.Offset, Value: string(record.Value), AtMs: now})
			})
			r.add(func(h *History) { h.Reads = append(h.Reads, reads...) })
		}
	}()
	return done, nil
}

// startPoller asks every broker, every interval, for the latest offset
// (the high watermark) of each partition, with the newest leader epoch any
// broker has answered: a leader that missed that epoch is fenced rather
// than answering from its stale state (KIP-320).
func startPoller(ctx context.Context, config Config, seeds []string, r *recorder) (chan struct{}, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	epochs := &knownEpochs{epochs: make([]int32, config.Partitions)}
	for i := range epochs.epochs {
		epochs.epochs[i] = -1
	}
	done := make(chan struct{})
	var wait sync.WaitGroup
	// Seed broker i is the node whose Kafka listener is seeds[i].
	for index, broker := range client.SeedBrokers() {
		wait.Add(1)
		go func() {
			defer wait.Done()
			for ctx.Err() == nil {
				pollOnce(ctx, config, int32(index+1), broker, epochs, r)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	go func() {
		wait.Wait()
		client.Close()
		close(done)
	}()
	return done, nil
}

type knownEpochs struct {
	mu     sync.Mutex
	epochs []int32
}

func pollOnce(ctx context.Context, config Config, id int32, broker *kgo.Broker, epochs *knownEpochs, r *recorder) {
	request := kmsg.NewPtrListOffsetsRequest()
	request.ReplicaID = -1
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = config.Topic
	// The sample starts before the epochs are read, and ends after they
	// are updated: a sample that starts after another ended carries at
	// least the epoch that one saw.
	start := r.ms()
	epochs.mu.Lock()
	for p := range int32(config.Partitions) {
		partition := kmsg.NewListOffsetsRequestTopicPartition()
		partition.Partition, partition.Timestamp, partition.CurrentLeaderEpoch = p, -1, epochs.epochs[p]
		topic.Partitions = append(topic.Partitions, partition)
	}
	epochs.mu.Unlock()
	request.Topics = append(request.Topics, topic)
	attempt, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	response, err := broker.RetriableRequest(attempt, request)
	if err != nil {
		return
	}
	var samples []Sample
	fenced := false
	epochs.mu.Lock()
	for _, t := range response.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			fenced = fenced || p.ErrorCode == kerr.FencedLeaderEpoch.Code
			if p.ErrorCode != 0 || p.Partition < 0 || int(p.Partition) >= len(epochs.epochs) {
				continue
			}
			epochs.epochs[p.Partition] = max(epochs.epochs[p.Partition], p.LeaderEpoch)
			samples = append(samples, Sample{Broker: id, Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.Offset, StartMs: start})
		}
	}
	end := r.ms()
	epochs.mu.Unlock()
	for i := range samples {
		samples[i].EndMs = end
	}
	r.add(func(h *History) { h.Samples = append(h.Samples, samples...) })
	if fenced {
		learnEpochs(attempt, config, broker, epochs)
	}
}

// learnEpochs takes the leader epochs a broker's Metadata has: one that
// fenced a request knows a newer epoch than the poller, and a new leader
// is only asked with its own epoch once the poller has learned it.
func learnEpochs(ctx context.Context, config Config, broker *kgo.Broker, epochs *knownEpochs) {
	request := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr(config.Topic)
	request.Topics = append(request.Topics, topic)
	response, err := broker.RetriableRequest(ctx, request)
	if err != nil {
		return
	}
	epochs.mu.Lock()
	defer epochs.mu.Unlock()
	for _, t := range response.(*kmsg.MetadataResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Partition >= 0 && int(p.Partition) < len(epochs.epochs) {
				epochs.epochs[p.Partition] = max(epochs.epochs[p.Partition], p.LeaderEpoch)
			}
		}
	}
}
