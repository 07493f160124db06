package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchConsumeOptions are tide bench consume's: the shared load, whose
// producer settings fill the topic first when the run starts the cluster.
type benchConsumeOptions struct {
	benchOptions
	// profileRead has --cpuprofile cover the read alone (tide bench
	// consume); compare profiles its whole run instead.
	profileRead bool
}

// consumeReport is one run of tide bench consume.
type consumeReport struct {
	Cluster    string `json:"cluster,omitempty"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Consumers  int    `json:"consumers"` // at most one per partition
	// Passes is how many times the range was read; the figures are the
	// sums over them (compare reads until a minimum time has passed).
	Passes           int     `json:"passes"`
	Records          int64   `json:"records"`
	ValueBytes       int64   `json:"value_bytes"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	RecordsPerSecond float64 `json:"records_per_second"`
	MiBPerSecond     float64 `json:"mib_per_second"`
	Interrupted      bool    `json:"interrupted"`
	// Fill is the throughput phase that filled the topic of a cluster
	// started with --dev.
	Fill *throughputResult `json:"fill,omitempty"`
	// CPU is measured when the cluster runs in this process (--dev).
	CPU *cpuFigure `json:"cpu,omitempty"`
}

func newBenchConsumeCommand() *cobra.Command {
	var options benchConsumeOptions
	command := &cobra.Command{
		Use:   "consume",
		Short: "Measure how fast a topic is read from its start (records/s, MiB/s)",
		Long: `Reads every partition of a topic from its earliest offset up to the high
watermark it has when the run starts, with franz-go's defaults (several
partitions per fetch, pipelined across brokers), and reports records/s
and MiB/s of values. --consumers clients read the partitions dealt among
them. Fill the topic first, e.g. with tide bench produce; the records are
read from the brokers' page cache when they fit in it, which is what the
figure then measures.

With --dev N the run starts its own cluster, fills the topic with a
throughput phase of tide bench produce (--records, --duration, --size,
--acks, --producers, --partitions), then reads it and reports the CPU
seconds of the whole process per GiB read; without --dev those flags are
refused rather than ignored.

  tide bench consume --topic bench --json
  tide bench consume --dev 3 --duration 5s --consumers 3`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchConsume(ctx, cmd, options)
		},
	}
	flags := command.Flags()
	options.addLoadFlags(flags, 10*time.Second)
	flags.Uint64Var(&options.seed, "seed", 1, "seed of the random values of the fill (producer i takes seed+i)")
	return command
}

func runBenchConsume(ctx context.Context, cmd *cobra.Command, options benchConsumeOptions) error {
	if err := options.validateLoad(1); err != nil {
		return err
	}
	if options.devBrokers == 0 {
		if err := refuseFlags(cmd, "shape the fill of a --dev cluster only", "producers", "acks", "size", "records", "duration", "seed",
			"partitions", "replication-factor"); err != nil {
			return err
		}
	}
	options.mode, options.maxBufferedRecords, options.idempotent = "throughput", 100_000, options.acks == "all"
	options.profileRead = true
	cluster, err := options.startBenchCluster(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	progress := progressFor(cmd)
	var fill *throughputResult
	if cluster != nil {
		var filled *benchReport
		if filled, err = options.measure(ctx, progress, false); filled != nil {
			fill = filled.Throughput
		}
	}
	var report *consumeReport
	if err == nil {
		report, err = options.measureConsume(ctx, progress, cluster != nil, 0)
	}
	if cluster != nil && report != nil {
		report.Cluster, report.Fill = cluster.name, fill
	}
	var printed benchRunReport
	if report != nil {
		printed = *report
	}
	return endBenchRun(cmd, "consume", options.json, cluster, printed, err)
}

// benchConsumePassesMax bounds the passes of one consume phase: a
// minimum read time on a small topic must still end.
const benchConsumePassesMax = 10_000

// measureConsume reads the topic from its start to the high watermarks
// of the moment, and reads that same range again, each time with new
// consumers, until the reads add up to at least minimum (0: once), so
// that a short read is not a figure one scheduling hiccup decides. The
// figures are the sums over the passes: connecting and listing offsets
// are not counted. No report when the run failed before reading.
func (o benchConsumeOptions) measureConsume(ctx context.Context, progress *benchProgress, inProcess bool, minimum time.Duration) (*consumeReport, error) {
	offsets, partitions, err := o.topicRange(ctx)
	if err != nil {
		return nil, err
	}
	report := &consumeReport{Topic: o.topic, Partitions: partitions}
	stopProfile := func() error { return nil }
	if o.profileRead && cpuProfile != "" {
		if stopProfile, err = startCPUProfile(cpuProfile); err != nil {
			return nil, err
		}
	}
	var elapsed, cpu time.Duration
	for report.Passes < benchConsumePassesMax && ctx.Err() == nil && (report.Passes == 0 || elapsed < minimum) {
		var pass consumePass
		pass, err = o.readOnce(ctx, progress, offsets)
		report.Passes++
		report.Records, report.ValueBytes, report.Consumers = report.Records+pass.records, report.ValueBytes+pass.valueBytes, pass.consumers
		elapsed, cpu = elapsed+pass.elapsed, cpu+pass.cpu
		if err != nil || pass.records == 0 {
			break
		}
	}
	err = errors.Join(err, stopProfile())
	if inProcess {
		report.CPU = newCPUFigure(cpu, report.ValueBytes)
	}
	report.Interrupted = ctx.Err() != nil
	report.ElapsedSeconds = elapsed.Seconds()
	if elapsed > 0 {
		report.RecordsPerSecond = float64(report.Records) / elapsed.Seconds()
		report.MiBPerSecond = float64(report.ValueBytes) / bytesPerMiB / elapsed.Seconds()
	}
	return report, err
}

// topicRange lists the topic's partitions and their earliest and latest
// offsets: the range every pass of a consume phase reads.
func (o benchConsumeOptions) topicRange(ctx context.Context) (partitionOffsets, int, error) {
	admin, metadata, err := o.connect(ctx, []string{o.topic})
	if err != nil {
		return nil, 0, err
	}
	defer admin.Close()
	topic, err := topicMetadata(metadata, o.topic)
	if err != nil {
		return nil, 0, fmt.Errorf("topic %s: %w", o.topic, err)
	}
	var partitions []int32
	for _, partition := range topic.Partitions {
		partitions = append(partitions, partition.Partition)
	}
	offsets, err := o.listOffsets(ctx, admin, o.topic, partitions)
	return offsets, len(partitions), err
}

// consumePass is one read of the range: what it read, with how many
// consumers, how long the read took and the process CPU it used.
type consumePass struct {
	records, valueBytes int64
	consumers           int
	elapsed, cpu        time.Duration
}

// readOnce connects new consumers and reads the range once; the clock
// and the CPU count runs from the first fetch to the last record.
func (o benchConsumeOptions) readOnce(ctx context.Context, progress *benchProgress, offsets partitionOffsets) (consumePass, error) {
	readers, err := o.connectRangeReaders(ctx, offsets)
	if err != nil {
		return consumePass{}, err
	}
	defer readers.close()
	progress.begin("consume", readers.records.Load)
	before, began := processCPU(), time.Now()
	err = readers.run(ctx)
	pass := consumePass{elapsed: time.Since(began), cpu: processCPU() - before, consumers: len(readers.clients)}
	progress.end()
	pass.records, pass.valueBytes = readers.records.Load(), readers.valueBytes.Load()
	return pass, err
}

// rangeReaders are the consumers of tide bench consume: each reads the
// partitions dealt to it from their earliest offset up to the end listed.
type rangeReaders struct {
	clients    []*kgo.Client
	ends       []map[int32]int64 // per client: partition to the end, exclusive
	records    atomic.Int64
	valueBytes atomic.Int64
}

// connectRangeReaders connects up to --consumers clients, partition p
// going to client p mod --consumers; an empty partition is not read, and
// a client that would get no partition is not made.
func (o benchConsumeOptions) connectRangeReaders(ctx context.Context, offsets partitionOffsets) (*rangeReaders, error) {
	count := min(o.consumers, max(1, len(offsets)))
	starts, ends := make([]map[int32]kgo.Offset, count), make([]map[int32]int64, count)
	for partition, known := range offsets {
		if known.latest <= known.earliest {
			continue
		}
		index := int(partition) % count
		if starts[index] == nil {
			starts[index], ends[index] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		starts[index][partition], ends[index][partition] = kgo.NewOffset().At(known.earliest), known.latest
	}
	readers := &rangeReaders{}
	for i := range starts {
		if starts[i] == nil {
			continue
		}
		client, _, err := o.connect(ctx, []string{o.topic}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: starts[i]}))
		if err != nil {
			readers.close()
			return nil, err
		}
		readers.clients, readers.ends = append(readers.clients, client), append(readers.ends, ends[i])
	}
	return readers, nil
}

// run reads until every client reached its ends, one failed or ctx ended.
func (r *rangeReaders) run(ctx context.Context) error {
	errs := make([]error, len(r.clients))
	var running sync.WaitGroup
	for i, client := range r.clients {
		running.Go(func() { errs[i] = r.read(ctx, client, r.ends[i]) })
	}
	running.Wait()
	return errors.Join(errs...)
}

// read is one client's loop; remaining is its own, emptied as it goes.
func (r *rangeReaders) read(ctx context.Context, client *kgo.Client, remaining map[int32]int64) error {
	for len(remaining) > 0 && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if err := firstFetchError(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(record *kgo.Record) {
			end, counting := remaining[record.Partition]
			if !counting || record.Offset >= end {
				return
			}
			r.records.Add(1)
			r.valueBytes.Add(int64(len(record.Value)))
			if record.Offset+1 >= end {
				delete(remaining, record.Partition)
			}
		})
	}
	return nil
}

func (r *rangeReaders) close() {
	for _, client := range r.clients {
		client.Close()
	}
}

func (r consumeReport) print(out io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	if r.Cluster != "" {
		fmt.Fprintf(out, "cluster: %s, started in this process\n", r.Cluster)
	}
	if f := r.Fill; f != nil {
		fmt.Fprintf(out, "filled with %d records (%d value bytes) in %.2fs: %.0f records/s, %.2f MiB/s\n",
			f.Records, f.ValueBytes, f.ElapsedSeconds, f.RecordsPerSecond, f.MiBPerSecond)
	}
	interrupted := ""
	if r.Interrupted {
		interrupted = " (interrupted)"
	}
	passes := ""
	if r.Passes > 1 {
		passes = fmt.Sprintf(" (the range read %d times)", r.Passes)
	}
	_, err := fmt.Fprintf(out, "read %d records (%d value bytes) from %d partitions of %s with %d consumers in %.2fs%s: %.0f records/s, %.2f MiB/s%s\n",
		r.Records, r.ValueBytes, r.Partitions, r.Topic, r.Consumers, r.ElapsedSeconds, passes, r.RecordsPerSecond, r.MiBPerSecond, interrupted)
	if err == nil && r.CPU != nil {
		_, err = fmt.Fprintf(out, "reading: %.2f CPU seconds of this whole process (brokers and client), %.2f per GiB of values\n",
			r.CPU.ProcessCPUSeconds, r.CPU.ProcessCPUSecondsPerGiB)
	}
	return err
}

// firstFetchError is the first error a poll returned, except the end of
// the context, which ends the run as an interruption.
func firstFetchError(fetches kgo.Fetches) error {
	var first error
	fetches.EachError(func(topic string, partition int32, err error) {
		if first == nil && err != context.Canceled && err != context.DeadlineExceeded {
			first = fmt.Errorf("%s-%d: %w", topic, partition, err)
		}
	})
	return first
}
