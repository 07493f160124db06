package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

type benchConsumeOptions struct {
	clientOptions
	topic string
	json  bool
}

// consumeReport is one run of tide bench consume.
type consumeReport struct {
	Topic            string  `json:"topic"`
	Partitions       int     `json:"partitions"`
	Records          int64   `json:"records"`
	ValueBytes       int64   `json:"value_bytes"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	RecordsPerSecond float64 `json:"records_per_second"`
	MiBPerSecond     float64 `json:"mib_per_second"`
	Interrupted      bool    `json:"interrupted"`
}

func newBenchConsumeCommand() *cobra.Command {
	var options benchConsumeOptions
	command := &cobra.Command{
		Use:   "consume",
		Short: "Measure how fast a topic is read from its start (records/s, MiB/s)",
		Long: `Reads every partition of a topic from its earliest offset up to the high
watermark it has when the run starts, with franz-go's defaults (several
partitions per fetch, pipelined across brokers), and reports records/s
and MiB/s of values. Fill the topic first, e.g. with tide bench produce;
the records are read from the brokers' page cache when they fit in it,
which is what the figure then measures.

  tide bench consume --topic bench --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchConsume(ctx, cmd.OutOrStdout(), options)
		},
	}
	options.addFlags(command.Flags())
	command.Flags().StringVar(&options.topic, "topic", "bench", "the topic to read")
	command.Flags().BoolVar(&options.json, "json", false, "print one JSON object instead of a line")
	return command
}

func runBenchConsume(ctx context.Context, out io.Writer, options benchConsumeOptions) error {
	admin, metadata, err := options.connect(ctx, []string{options.topic})
	if err != nil {
		return err
	}
	topic, err := topicMetadata(metadata, options.topic)
	if err != nil {
		admin.Close()
		return fmt.Errorf("bench consume: topic %s: %w", options.topic, err)
	}
	var partitions []int32
	for _, partition := range topic.Partitions {
		partitions = append(partitions, partition.Partition)
	}
	offsets, err := options.listOffsets(ctx, admin, options.topic, partitions)
	admin.Close()
	if err != nil {
		return fmt.Errorf("bench consume: %w", err)
	}
	start := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	var want int64
	for partition, known := range offsets {
		start[partition] = kgo.NewOffset().At(known.earliest)
		if known.latest > known.earliest {
			remaining[partition] = known.latest
			want += known.latest - known.earliest
		}
	}
	consumer, _, err := options.connect(ctx, []string{options.topic}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{options.topic: start}))
	if err != nil {
		return err
	}
	defer consumer.Close()
	report := consumeReport{Topic: options.topic, Partitions: len(partitions)}
	began := time.Now()
	for len(remaining) > 0 && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		if err := firstFetchError(fetches); err != nil {
			return fmt.Errorf("bench consume: %w", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, counting := remaining[r.Partition]
			if !counting || r.Offset >= end {
				return
			}
			report.Records++
			report.ValueBytes += int64(len(r.Value))
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	elapsed := time.Since(began)
	report.Interrupted = ctx.Err() != nil
	report.ElapsedSeconds = elapsed.Seconds()
	if elapsed > 0 {
		report.RecordsPerSecond = float64(report.Records) / elapsed.Seconds()
		report.MiBPerSecond = float64(report.ValueBytes) / (1 << 20) / elapsed.Seconds()
	}
	if options.json {
		return json.NewEncoder(out).Encode(report)
	}
	interrupted := ""
	if report.Interrupted {
		interrupted = " (interrupted)"
	}
	_, err = fmt.Fprintf(out, "read %d of %d records (%d value bytes) from %d partitions of %s in %.2fs: %.0f records/s, %.2f MiB/s%s\n",
		report.Records, want, report.ValueBytes, report.Partitions, report.Topic, report.ElapsedSeconds, report.RecordsPerSecond, report.MiBPerSecond, interrupted)
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
