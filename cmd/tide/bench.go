package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
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

// benchOptions are tide bench produce's: the shared load and the
// settings of its producers and phases.
type benchOptions struct {
	benchLoad
	warmup             time.Duration
	idempotent         bool
	keys               bool
	mode               string
	maxBufferedRecords int
	seed               uint64
	// brokerMetrics are metrics endpoints, one per broker process, whose
	// process CPU the throughput phase reads before and after.
	brokerMetrics []string
}

func newBenchCommand() *cobra.Command {
	command := &cobra.Command{
		Use:   "bench",
		Short: "Measure a cluster's throughput and latency",
		Long: `Measures a Kafka cluster (tide or any other) with franz-go: produce
throughput and latency, consume throughput, produce-to-consume latency,
and the same load on tide and on franz-go's kfake side by side. Every
mode takes the same load flags: --acks, --size, --partitions,
--producers, --consumers, --records, --duration, --json, and --dev N to
start a tide dev cluster in this process instead of --bootstrap.`,
	}
	command.AddCommand(newBenchProduceCommand(), newBenchConsumeCommand(), newBenchEndToEndCommand(), newBenchCompareCommand())
	command.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "",
		"write a CPU profile of this process (with --dev: brokers and client together) to this file (go tool pprof reads it); in consume, of the read alone")
	for _, mode := range command.Commands() {
		run := mode.RunE
		mode.RunE = func(cmd *cobra.Command, args []string) error {
			if cpuProfile == "" || mode.Name() == "consume" {
				return run(cmd, args)
			}
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			return errors.Join(run(cmd, args), stop())
		}
	}
	return command
}

// cpuProfile is --cpuprofile, the file a profile of the run goes to. Every
// mode but consume profiles the whole run; consume profiles only its read
// (measureConsume), so that the fill of a --dev cluster, which is produce,
// does not blur where the reading's CPU goes.
var cpuProfile string

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func() error, err error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		file.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return file.Close()
	}, nil
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

--producers N runs N clients side by side, each with its share of
--records (the latency phase then pools N one-at-a-time streams). With
--dev N the run starts a tide dev cluster of N brokers in this process
(a new temporary directory, removed after) and also reports the CPU
seconds of the whole process, brokers and client together, per GiB
acknowledged in the throughput phase; --broker-metrics reads the CPU of
brokers in processes of their own from their metrics endpoints (one per
process), the client left out. On a terminal a progress line on
standard error shows each phase's records/s once a second.

  tide bench produce --bootstrap 127.0.0.1:9092 --duration 10s
  tide bench produce --dev 3 --producers 2 --size 100
  tide bench produce --mode latency --records 10000 --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchProduce(ctx, cmd, options)
		},
	}
	flags := command.Flags()
	options.addLoadFlags(flags, 10*time.Second)
	flags.DurationVar(&options.warmup, "warmup", time.Second, "produce for this long, uncounted, before measuring")
	flags.BoolVar(&options.idempotent, "idempotent", true, "idempotent producer (needs --acks all; default off with leader and none)")
	flags.BoolVar(&options.keys, "keys", false, "give each record a distinct 8-byte key (default: no key)")
	flags.StringVar(&options.mode, "mode", "both", "throughput, latency or both")
	flags.IntVar(&options.maxBufferedRecords, "max-buffered-records", 100_000, "records each producer may buffer before Produce blocks (kgo's default is 50000)")
	flags.Uint64Var(&options.seed, "seed", 1, "seed of the random values (producer i takes seed+i)")
	flags.StringSliceVar(&options.brokerMetrics, "broker-metrics", nil,
		"metrics URLs, one per broker process (http://127.0.0.1:9644/metrics), whose process_cpu_seconds_total the throughput phase reads before and after")
	return command
}

// validate rejects a bad command line before any connection (exit 2).
func (o *benchOptions) validate(cmd *cobra.Command) error {
	if err := o.validateLoad(1); err != nil {
		return err
	}
	if err := refuseFlags(cmd, "bench produce runs no consumer", "consumers"); err != nil {
		return err
	}
	switch {
	case o.mode != "throughput" && o.mode != "latency" && o.mode != "both":
		return usageError{fmt.Errorf("--mode %q: want throughput, latency or both", o.mode)}
	case o.warmup < 0:
		return usageError{fmt.Errorf("--warmup must not be negative")}
	case o.maxBufferedRecords < 1:
		return usageError{fmt.Errorf("--max-buffered-records %d: want at least 1", o.maxBufferedRecords)}
	}
	for _, endpoint := range o.brokerMetrics {
		if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
			return usageError{fmt.Errorf("--broker-metrics %q: want an http:// or https:// URL", endpoint)}
		}
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
	cluster, err := options.startBenchCluster(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	report, err := options.measure(ctx, progressFor(cmd), cluster != nil)
	if cluster != nil && report != nil {
		report.Cluster = cluster.name
	}
	var printed benchRunReport
	if report != nil {
		printed = *report
	}
	return endBenchRun(cmd, "produce", options.json, cluster, printed, err)
}

// measure runs the phases against the load's bootstrap. It answers no
// report when the run failed before its first phase. inProcess says the
// cluster runs in this process, so that its CPU time is measured.
func (o benchOptions) measure(ctx context.Context, progress *benchProgress, inProcess bool) (*benchReport, error) {
	producers, metadata, err := o.connectProducers(ctx)
	if err != nil {
		return nil, err
	}
	defer producers.close()
	report, err := o.newReport(producers[0].client)
	if err != nil {
		return nil, err
	}
	if report.Partitions, report.TopicCreated, err = o.ensureTopic(ctx, producers[0].client, metadata); err != nil {
		return nil, fmt.Errorf("topic %s: %w", o.topic, err)
	}
	err = o.runPhases(ctx, producers, &report, progress, inProcess)
	report.Interrupted = ctx.Err() != nil
	return &report, err
}

// runPhases runs the warmup and the phases --mode asks for, filling the
// report as each ends; the first failure ends the run, and an interruption
// (ctx done) ends the phase under way and skips the rest.
func (o benchOptions) runPhases(ctx context.Context, producers benchProducers, report *benchReport, progress *benchProgress, inProcess bool) error {
	bound := phaseBound{records: o.records, duration: o.duration}
	warmup := phaseBound{duration: o.warmup}
	if o.warmup > 0 {
		var err error
		if o.mode == "latency" {
			var result latencyResult
			result, err = runLatency(ctx, producers, warmup, progress, "warmup")
			report.WarmupRecords = int64(result.Count)
		} else {
			var result throughputResult
			result, err = runThroughput(ctx, producers, warmup, progress, "warmup")
			report.WarmupRecords = result.Records
		}
		if err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
	}
	if o.mode != "latency" && ctx.Err() == nil {
		if err := o.runThroughputPhase(ctx, producers, bound, report, progress, inProcess); err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if o.mode != "throughput" && ctx.Err() == nil {
		result, err := runLatency(ctx, producers, bound, progress, "latency")
		report.Latency = &result
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	return nil
}

// runThroughputPhase runs the throughput phase and measures the CPU it
// cost: the whole process's when the cluster runs in it, the brokers'
// processes' when --broker-metrics names their endpoints.
func (o benchOptions) runThroughputPhase(ctx context.Context, producers benchProducers, bound phaseBound, report *benchReport,
	progress *benchProgress, inProcess bool) error {
	var brokersBefore float64
	if len(o.brokerMetrics) > 0 {
		var err error
		if brokersBefore, err = scrapeProcessCPU(ctx, o.brokerMetrics); err != nil {
			return err
		}
	}
	before := processCPU()
	result, err := runThroughput(ctx, producers, bound, progress, "throughput")
	if inProcess {
		result.CPU = newCPUFigure(processCPU()-before, result.ValueBytes)
	}
	report.Throughput = &result
	if err != nil || len(o.brokerMetrics) == 0 {
		return err
	}
	// The phase's figures stand even if an interruption ended it.
	brokersAfter, err := scrapeProcessCPU(context.WithoutCancel(ctx), o.brokerMetrics)
	if err != nil {
		return err
	}
	used := brokersAfter - brokersBefore
	result.BrokerCPU = &brokerCPUFigure{Endpoints: len(o.brokerMetrics), BrokerCPUSeconds: used}
	if result.ValueBytes > 0 {
		result.BrokerCPU.BrokerCPUSecondsPerGiB = used / (float64(result.ValueBytes) / bytesPerGiB)
	}
	return nil
}

// benchProducer is one of --producers: a client and the values it sends.
type benchProducer struct {
	client *kgo.Client
	values *valueSource
}

type benchProducers []benchProducer

// connectProducers connects --producers clients, producer i drawing its
// values from seed+i, and answers the first one's Metadata of the topic.
func (o benchOptions) connectProducers(ctx context.Context, extra ...kgo.Opt) (benchProducers, *kmsg.MetadataResponse, error) {
	var producers benchProducers
	var first *kmsg.MetadataResponse
	for i := range o.producers {
		client, metadata, err := o.connect(ctx, []string{o.topic}, append(o.producerOptions(), extra...)...)
		if err != nil {
			producers.close()
			return nil, nil, err
		}
		if first == nil {
			first = metadata
		}
		producers = append(producers, benchProducer{client: client, values: newValueSource(o.seed+uint64(i), o.size, o.keys)})
	}
	return producers, first, nil
}

func (p benchProducers) close() {
	for _, producer := range p {
		producer.client.Close()
	}
}
