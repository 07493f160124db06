package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// maxBenchValueBytes bounds --size at half of kgo's and the broker's
	// largest batch (about 1 MB), so one record and its batch overhead
	// always fit in a batch and a run never fails with MESSAGE_TOO_LARGE.
	maxBenchValueBytes = 512 << 10
	// maxLatencySamples bounds the memory of the latency phase: it keeps
	// every sample (8 bytes each) to compute percentiles exactly, and ends
	// at this many even if --records and --duration would go on.
	maxLatencySamples = 1_000_000
)

type benchOptions struct {
	clientOptions
	topic              string
	partitions         int32
	replicationFactor  int32
	records            int64
	duration           time.Duration
	warmup             time.Duration
	size               int
	acks               string
	idempotent         bool
	keys               bool
	mode               string
	maxBufferedRecords int
	seed               uint64
	json               bool
}

func newBenchCommand() *cobra.Command {
	command := &cobra.Command{
		Use:   "bench",
		Short: "Measure a cluster's throughput and latency",
	}
	command.AddCommand(newBenchProduceCommand(), newBenchConsumeCommand())
	return command
}

func newBenchProduceCommand() *cobra.Command {
	var options benchOptions
	command := &cobra.Command{
		Use:   "produce",
		Short: "Measure produce throughput (records/s, MiB/s) and one-at-a-time latency",
		Long: `Produces random, incompressible values (--size bytes, no compression) to a
topic with franz-go, in two phases:

  throughput  records sent asynchronously with kgo's pipelining, linger and
              batching defaults; counts what was acknowledged per second
  latency     one record at a time, each waiting for its acknowledgement
              before the next is sent; reports exact percentiles

Each phase ends after --records records or --duration, whichever comes
first (0 turns a bound off); the throughput phase's time runs on to the
last acknowledgement, so it is a little longer than --duration. With
--acks none nothing is acknowledged: a record counts once it is written to
the socket, so the figures are of the client's sending, and a backlog the
broker still holds after the throughput phase delays the first latency
samples. Before them --warmup runs the first phase's
kind of produce without counting it. The topic is created if missing, with
--partitions and --replication-factor (-1: the broker's default), and is
left in place afterwards. Any record not acknowledged fails the run (exit 1)
after the figures are printed. An interruption (SIGINT, SIGTERM) ends the
run early: what was sent is still waited for, and the figures so far are
printed, marked interrupted.

  tide bench produce --bootstrap 127.0.0.1:9092 --duration 10s
  tide bench produce --mode latency --records 10000 --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchProduce(ctx, cmd, options)
		},
	}
	options.addFlags(command.Flags())
	flags := command.Flags()
	flags.StringVar(&options.topic, "topic", "bench", "the topic to produce to, created if missing")
	flags.Int32Var(&options.partitions, "partitions", 3, "partitions of the topic when it is created")
	flags.Int32Var(&options.replicationFactor, "replication-factor", -1, "replicas per partition when the topic is created (-1: the broker's default)")
	flags.Int64Var(&options.records, "records", 0, "records per phase (0: bounded by --duration only)")
	flags.DurationVar(&options.duration, "duration", 10*time.Second, "length of each phase (0: bounded by --records only)")
	flags.DurationVar(&options.warmup, "warmup", time.Second, "produce for this long, uncounted, before measuring")
	flags.IntVar(&options.size, "size", 1024, "bytes of each record's value")
	flags.StringVar(&options.acks, "acks", "all", "all or -1 (every in-sync replica), 1 or leader, 0 or none")
	flags.BoolVar(&options.idempotent, "idempotent", true, "idempotent producer (needs --acks all; default off with leader and none)")
	flags.BoolVar(&options.keys, "keys", false, "give each record a distinct 8-byte key (default: no key)")
	flags.StringVar(&options.mode, "mode", "both", "throughput, latency or both")
	flags.IntVar(&options.maxBufferedRecords, "max-buffered-records", 100_000, "records kgo may buffer before Produce blocks (kgo's default is 50000)")
	flags.Uint64Var(&options.seed, "seed", 1, "seed of the random values")
	flags.BoolVar(&options.json, "json", false, "print one JSON object instead of a table")
	return command
}

// validate rejects a bad command line before any connection (exit 2).
func (o *benchOptions) validate(cmd *cobra.Command) error {
	acks, err := parseAcks(o.acks)
	if err != nil {
		return err
	}
	o.acks = acks
	switch {
	case o.mode != "throughput" && o.mode != "latency" && o.mode != "both":
		return usageError{fmt.Errorf("--mode %q: want throughput, latency or both", o.mode)}
	case o.size < 1 || o.size > maxBenchValueBytes:
		return usageError{fmt.Errorf("--size %d: want 1 to %d bytes", o.size, maxBenchValueBytes)}
	case o.records < 0 || o.duration < 0 || o.warmup < 0:
		return usageError{fmt.Errorf("--records, --duration and --warmup must not be negative")}
	case o.records == 0 && o.duration == 0:
		return usageError{fmt.Errorf("--records 0 and --duration 0: a phase needs at least one bound")}
	case o.partitions < 1 || (o.replicationFactor < 1 && o.replicationFactor != -1):
		return usageError{fmt.Errorf("--partitions must be at least 1, --replication-factor at least 1 or -1")}
	case o.maxBufferedRecords < 1:
		return usageError{fmt.Errorf("--max-buffered-records %d: want at least 1", o.maxBufferedRecords)}
	}
	// Idempotence follows acks unless asked for: kgo's default is
	// idempotent, and it refuses idempotence without acks=all.
	if !cmd.Flags().Changed("idempotent") {
		o.idempotent = o.acks == "all"
	}
	if o.idempotent && o.acks != "all" {
		return usageError{fmt.Errorf("--idempotent needs --acks all (Kafka clients allow idempotence only with acks=all)")}
	}
	return nil
}

// producerOptions are kgo's defaults but for the settings a benchmark must
// pin: no compression, so the broker handles every value byte; the acks
// asked for; and a buffer large enough that Produce blocks only when the
// cluster is the bottleneck.
func (o benchOptions) producerOptions() []kgo.Opt {
	options := []kgo.Opt{
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(o.maxBufferedRecords),
		kgo.RecordDeliveryTimeout(o.timeout),
		kgo.ProduceRequestTimeout(o.timeout),
		kgo.DefaultProduceTopic(o.topic),
	}
	options = append(options, kgo.RequiredAcks(requiredAcks(o.acks)))
	if !o.idempotent {
		options = append(options, kgo.DisableIdempotentWrite())
	}
	return options
}

func runBenchProduce(ctx context.Context, cmd *cobra.Command, options benchOptions) error {
	if err := options.validate(cmd); err != nil {
		return err
	}
	client, metadata, err := options.connect(ctx, []string{options.topic}, options.producerOptions()...)
	if err != nil {
		return err
	}
	defer client.Close()
	report, err := options.newReport(client)
	if err != nil {
		return err
	}
	if report.Partitions, report.TopicCreated, err = options.ensureTopic(ctx, client, metadata); err != nil {
		return fmt.Errorf("bench produce: topic %s: %w", options.topic, err)
	}
	values := newValueSource(options.seed, options.size, options.keys)
	err = options.runPhases(ctx, client, values, &report)
	report.Interrupted = ctx.Err() != nil
	if printErr := report.print(cmd.OutOrStdout(), options.json); printErr != nil && err == nil {
		err = printErr
	}
	if err != nil {
		return fmt.Errorf("bench produce: %w", err)
	}
	return nil
}

// runPhases runs the warmup and the phases --mode asks for, filling the
// report as each ends; the first failure ends the run, and an interruption
// (ctx done) ends the phase under way and skips the rest.
func (o benchOptions) runPhases(ctx context.Context, client *kgo.Client, values *valueSource, report *benchReport) error {
	bound := phaseBound{records: o.records, duration: o.duration}
	warmup := phaseBound{duration: o.warmup}
	if o.warmup > 0 {
		var err error
		if o.mode == "latency" {
			var result latencyResult
			result, err = runLatency(ctx, client, values, warmup)
			report.WarmupRecords = int64(result.Count)
		} else {
			var result throughputResult
			result, err = runThroughput(ctx, client, values, warmup)
			report.WarmupRecords = result.Records
		}
		if err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
	}
	if o.mode != "latency" && ctx.Err() == nil {
		result, err := runThroughput(ctx, client, values, bound)
		report.Throughput = &result
		if err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if o.mode != "throughput" && ctx.Err() == nil {
		result, err := runLatency(ctx, client, values, bound)
		report.Latency = &result
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	return nil
}

// ensureTopic finds the topic in the Metadata connect fetched, or creates
// it. It answers the topic's partition count and whether it was created.
func (o benchOptions) ensureTopic(ctx context.Context, client *kgo.Client, metadata *kmsg.MetadataResponse) (int, bool, error) {
	for _, topic := range metadata.Topics {
		if topic.Topic == nil || *topic.Topic != o.topic {
			continue
		}
		if topic.ErrorCode == 0 {
			return len(topic.Partitions), false, nil
		}
		if topic.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			return 0, false, kafkaError(topic.ErrorCode, nil)
		}
	}
	request := kmsg.NewPtrCreateTopicsRequest()
	request.TimeoutMillis = int32(o.timeout.Milliseconds())
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = o.topic, o.partitions, int16(o.replicationFactor)
	request.Topics = append(request.Topics, entry)
	answer, err := o.request(ctx, client, request)
	if err != nil {
		return 0, false, err
	}
	created := answer.(*kmsg.CreateTopicsResponse).Topics[0]
	// Another bench started at the same moment may have created it.
	if created.ErrorCode == kerr.TopicAlreadyExists.Code {
		return int(o.partitions), false, nil
	}
	if err := kafkaError(created.ErrorCode, created.ErrorMessage); err != nil {
		return 0, false, err
	}
	return int(o.partitions), true, nil
}

// phaseBound ends a phase at whichever comes first: records records or
// duration elapsed. A zero field is no bound; validate ensures one is set.
type phaseBound struct {
	records  int64
	duration time.Duration
}

func (b phaseBound) more(done int64, elapsed time.Duration) bool {
	return (b.records == 0 || done < b.records) && (b.duration == 0 || elapsed < b.duration)
}

// valuePoolBytes is the size of the random pool values are cut from:
// far larger than a batch, so records of one batch rarely overlap.
const valuePoolBytes = 16 << 20

// valueSource makes the benchmark's records. Each value is a fresh buffer
// (kgo owns a value until the record is acknowledged) copied from a random
// offset of a pool of random bytes, with its first 8 bytes then drawn anew,
// so values are incompressible and, but with odds of 2^-64 a pair, distinct.
// Copying rather than generating each value keeps the client's cost per
// record small: it shares the machine's CPUs with the broker it measures.
// It is used from one goroutine.
type valueSource struct {
	random   *rand.Rand
	pool     []byte
	size     int
	keys     bool
	sequence uint64
}

func newValueSource(seed uint64, size int, keys bool) *valueSource {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	stream := rand.NewChaCha8(key)
	pool := make([]byte, valuePoolBytes+size)
	_, _ = stream.Read(pool) // ChaCha8's Read always fills p
	return &valueSource{random: rand.New(stream), pool: pool, size: size, keys: keys}
}

// next is a new record for the client's default produce topic.
func (s *valueSource) next() *kgo.Record {
	value := make([]byte, s.size)
	copy(value, s.pool[s.random.IntN(valuePoolBytes):])
	var head [8]byte
	binary.LittleEndian.PutUint64(head[:], s.random.Uint64())
	copy(value, head[:])
	record := &kgo.Record{Value: value}
	if s.keys {
		record.Key = binary.BigEndian.AppendUint64(nil, s.sequence)
	}
	s.sequence++
	return record
}
