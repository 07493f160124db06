package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchEndToEndOptions are tide bench e2e's: the shared load, the rate
// the producers keep, and an uncounted warmup.
type benchEndToEndOptions struct {
	benchOptions
	// rate is records per second over all producers; 0 sends as fast as
	// the producers' buffers take records.
	rate int
}

// endToEndReport is one run of tide bench e2e. Sent and Received count
// the warmup's records too, and the rate is over the whole run; only the
// latency leaves the warmup out.
type endToEndReport struct {
	Cluster          string        `json:"cluster,omitempty"`
	Topic            string        `json:"topic"`
	Partitions       int           `json:"partitions"`
	Acks             string        `json:"acks"`
	ValueBytes       int           `json:"value_bytes"`
	Producers        int           `json:"producers"`
	Consumers        int           `json:"consumers"` // at most one per partition
	RateTarget       int           `json:"rate_target"`
	WarmupSeconds    float64       `json:"warmup_seconds"`
	Sent             int64         `json:"sent"`
	Received         int64         `json:"received"`
	ElapsedSeconds   float64       `json:"elapsed_seconds"`
	RecordsPerSecond float64       `json:"records_per_second"`
	Latency          latencyResult `json:"latency"`
	// Acknowledged is the same records' send to acknowledgement latency:
	// what e2e adds to it is the consumer's side (the fetch's wake-up on a
	// new high watermark and its response).
	Acknowledged latencyResult `json:"acknowledged"`
	Interrupted  bool          `json:"interrupted"`
}

func newBenchEndToEndCommand() *cobra.Command {
	var options benchEndToEndOptions
	command := &cobra.Command{
		Use:   "e2e",
		Short: "Measure end-to-end latency: from a record's produce to its consumption",
		Long: `Produces records stamped with their send time and consumes them in the
same process, from the topic's end as it was when the run started; each
record's latency is its receive time less its send time (one clock, so
no skew), and the percentiles are exact over the records received (up
to a million samples, split evenly among the consumers).

--producers clients send --rate records/s between them (0: as fast as
their buffers take records, so the latency then includes the queue), with
linger 0 so that a record waits for no batch; --consumers clients read
the partitions dealt among them with franz-go's defaults. --warmup's
records are consumed but not counted. The run ends after --records or
--duration, then waits (--timeout at most) for every record acknowledged
to be received. Values are random and at least 8 bytes: the stamp.

  tide bench e2e --dev 3 --rate 5000 --duration 10s
  tide bench e2e --bootstrap 127.0.0.1:9092 --acks 1 --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchEndToEnd(ctx, cmd, options)
		},
	}
	flags := command.Flags()
	options.addLoadFlags(flags, 10*time.Second)
	flags.IntVar(&options.rate, "rate", 1000, "records per second over all producers (0: as fast as they go)")
	flags.DurationVar(&options.warmup, "warmup", time.Second, "produce and consume for this long, uncounted, before measuring")
	flags.Uint64Var(&options.seed, "seed", 1, "seed of the random values (producer i takes seed+i)")
	return command
}

func (o *benchEndToEndOptions) validate() error {
	if err := o.validateLoad(benchTimestampBytes); err != nil {
		return err
	}
	if o.rate < 0 || o.warmup < 0 {
		return usageError{fmt.Errorf("--rate and --warmup must not be negative")}
	}
	o.mode, o.maxBufferedRecords, o.idempotent = "e2e", 100_000, o.acks == "all"
	return nil
}

func runBenchEndToEnd(ctx context.Context, cmd *cobra.Command, options benchEndToEndOptions) error {
	if err := options.validate(); err != nil {
		return err
	}
	cluster, err := options.startBenchCluster(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	report, err := options.measure(ctx, progressFor(cmd))
	if cluster != nil && report != nil {
		report.Cluster = cluster.name
	}
	var printed benchRunReport
	if report != nil {
		printed = *report
	}
	return endBenchRun(cmd, "e2e", options.json, cluster, printed, err)
}

// measure runs one end-to-end phase; no report when it failed before.
func (o benchEndToEndOptions) measure(ctx context.Context, progress *benchProgress) (*endToEndReport, error) {
	producers, metadata, err := o.connectProducers(ctx, kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer producers.close()
	report := &endToEndReport{Topic: o.topic, Acks: o.acks, ValueBytes: o.size, Producers: o.producers, Consumers: o.consumers,
		RateTarget: o.rate, WarmupSeconds: o.warmup.Seconds()}
	partitions, created, err := o.ensureTopic(ctx, producers[0].client, metadata)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", o.topic, err)
	}
	report.Partitions = partitions
	ends, err := o.topicEnds(ctx, producers[0].client, partitions, created)
	if err != nil {
		return nil, err
	}
	consumers, err := o.connectStampReaders(ctx, ends)
	if err != nil {
		return nil, err
	}
	defer consumers.close()
	report.Consumers = len(consumers.clients)
	err = o.runEndToEnd(ctx, producers, consumers, report, progress)
	report.Interrupted = ctx.Err() != nil
	return report, err
}

// runEndToEnd produces at the rate while the consumers receive, then waits
// for every record acknowledged to be received.
func (o benchEndToEndOptions) runEndToEnd(ctx context.Context, producers benchProducers, consumers *stampReaders, report *endToEndReport, progress *benchProgress) error {
	base := time.Now()
	consumers.start(base, o.warmup)
	progress.begin("e2e", consumers.received.Load)
	defer progress.end()
	acknowledged := &stampedAcknowledgements{base: base, warmup: o.warmup}
	sent, err := runStampedProducers(ctx, producers, o.rate, acknowledged, phaseBound{records: o.records, duration: o.duration})
	report.Sent, report.Acknowledged = sent, summarizeLatency(acknowledged.take())
	if err == nil {
		err = consumers.await(ctx, sent, o.timeout)
	}
	samples, received := consumers.stop()
	if failed := consumers.failure(); failed != nil && err == nil {
		err = failed
	}
	elapsed := time.Since(base)
	report.Received, report.Latency = received, summarizeLatency(samples)
	report.ElapsedSeconds = elapsed.Seconds()
	if elapsed > 0 {
		report.RecordsPerSecond = float64(received) / elapsed.Seconds()
	}
	return err
}

// runStampedProducers has each producer send its share of the rate, each
// value stamped with its send time in nanoseconds since base, through the
// warmup and then until its share of the bound; the bound counts records
// sent after the warmup. It answers how many of those were acknowledged.
func runStampedProducers(ctx context.Context, producers benchProducers, rate int, stamped *stampedAcknowledgements, bound phaseBound) (int64, error) {
	sending := context.WithoutCancel(ctx) // as in runThroughput
	base, warmup := stamped.base, stamped.warmup
	acknowledged := &stamped.acknowledgements
	var running sync.WaitGroup
	for i, producer := range producers {
		share := bound.share(i, len(producers))
		running.Go(func() {
			interval := time.Duration(0)
			if rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(len(producers)) / float64(rate))
			}
			counted := int64(0)
			for next := 0; ctx.Err() == nil && acknowledged.errors.Load() == 0; next++ {
				if wait := time.Duration(next)*interval - time.Since(base); wait > 0 {
					time.Sleep(wait)
				}
				record := producer.values.next()
				// One reading decides both whether the record counts and
				// its stamp, so the consumers sample exactly those counted.
				stamp := time.Since(base)
				if stamp >= warmup && !share.more(counted, stamp-warmup) {
					break
				}
				binary.LittleEndian.PutUint64(record.Value, uint64(stamp))
				if stamp >= warmup {
					counted++
				}
				producer.client.Produce(sending, record, stamped.done)
			}
		})
	}
	running.Wait()
	var flushErrs []error
	for _, producer := range producers {
		flushErrs = append(flushErrs, producer.client.Flush(sending))
	}
	acknowledged.mutex.Lock()
	defer acknowledged.mutex.Unlock()
	if acknowledged.first != nil {
		return acknowledged.records.Load(), fmt.Errorf("%d records not acknowledged, the first: %w", acknowledged.errors.Load(), acknowledged.first)
	}
	return acknowledged.records.Load(), errors.Join(flushErrs...)
}

func (r endToEndReport) print(out io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	if r.Cluster != "" {
		fmt.Fprintf(out, "cluster: %s, started in this process\n", r.Cluster)
	}
	rate := "as fast as they go"
	if r.RateTarget > 0 {
		rate = fmt.Sprintf("%d records/s", r.RateTarget)
	}
	fmt.Fprintf(out, "topic %s (partitions %d), acks=%s, %d-byte values, %d producers (%s, linger 0), %d consumers; warmup %gs\n",
		r.Topic, r.Partitions, r.Acks, r.ValueBytes, r.Producers, rate, r.Consumers, r.WarmupSeconds)
	if r.Interrupted {
		fmt.Fprintln(out, "interrupted: the figures are of the records received before")
	}
	fmt.Fprintf(out, "sent and acknowledged %d, received %d in %.2fs: %.0f records/s\n\n", r.Sent, r.Received, r.ElapsedSeconds, r.RecordsPerSecond)
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	l := r.Latency
	fmt.Fprintln(table, "latency\tcount\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tmean ms")
	fmt.Fprintf(table, "end to end\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", l.Count, l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs, l.MeanMs)
	a := r.Acknowledged
	fmt.Fprintf(table, "acknowledged\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", a.Count, a.P50Ms, a.P90Ms, a.P99Ms, a.P999Ms, a.MaxMs, a.MeanMs)
	return table.Flush()
}

// stampedAcknowledgements counts the e2e producers' answers and keeps the
// send to acknowledgement latency of each record stamped after the warmup
// (up to maxLatencySamples): the produce side of the e2e latency.
type stampedAcknowledgements struct {
	acknowledgements
	base    time.Time
	warmup  time.Duration
	samples []time.Duration // guarded by acknowledgements.mutex
}

func (s *stampedAcknowledgements) done(record *kgo.Record, err error) {
	s.acknowledgements.done(record, err)
	if err != nil || len(record.Value) < benchTimestampBytes {
		return
	}
	now := time.Since(s.base)
	stamp := time.Duration(binary.LittleEndian.Uint64(record.Value))
	if stamp < s.warmup {
		return
	}
	s.mutex.Lock()
	defer s.mutex.Unlock()
	if len(s.samples) < maxLatencySamples {
		s.samples = append(s.samples, now-stamp)
	}
}

// take answers the samples; called once every record is answered.
func (s *stampedAcknowledgements) take() []time.Duration {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	return s.samples
}
