package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type consumeOptions struct {
	clientOptions
	partition    int32
	from         string
	exitAtEnd    bool
	format       string
	keySeparator string
}

func newConsumeCommand() *cobra.Command {
	var options consumeOptions
	command := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records, one a line",
		Long: `Reads records from a topic's partitions (all, or --partition P) starting
at --from: earliest, latest or an offset, and prints each as KEY:VALUE
(VALUE alone when the record has no key). --format offsets prefixes each
line with its partition and offset, tab-separated. A topic the cluster
does not know is asked for again for up to 3 s (or --timeout if shorter).
An offset below a partition's log start offset or past its high watermark
starts at the nearer of the two, and stderr says where the partition
begins or ends.

With --exit-at-end it stops once it has read up to the high watermark each
partition had when it started; otherwise it runs until interrupted.

  tide consume orders --from earliest --exit-at-end`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runConsume(ctx, cmd, options, args[0])
		},
	}
	options.addFlags(command.Flags())
	flags := command.Flags()
	flags.Int32Var(&options.partition, "partition", -1, "the one partition to read (default: all)")
	flags.StringVar(&options.from, "from", "earliest", "earliest, latest or an offset")
	flags.BoolVar(&options.exitAtEnd, "exit-at-end", false, "stop at the high watermark each partition had at the start")
	flags.StringVar(&options.format, "format", "plain", "plain (KEY:VALUE) or offsets (PARTITION\\tOFFSET\\tKEY:VALUE)")
	flags.StringVar(&options.keySeparator, "key-separator", ":", "printed between key and value")
	return command
}

// start is where consumption begins in one partition: the offset, or -2
// for earliest and -1 for latest.
func (o consumeOptions) start() (int64, error) {
	switch o.from {
	case "earliest":
		return -2, nil
	case "latest":
		return -1, nil
	}
	offset, err := strconv.ParseInt(o.from, 10, 64)
	if err != nil || offset < 0 {
		return 0, usageError{fmt.Errorf("--from %q: want earliest, latest or an offset", o.from)}
	}
	return offset, nil
}

func runConsume(ctx context.Context, cmd *cobra.Command, options consumeOptions, topic string) error {
	from, err := options.start()
	if err != nil {
		return err
	}
	if options.format != "plain" && options.format != "offsets" {
		return usageError{fmt.Errorf("--format %q: want plain or offsets", options.format)}
	}
	client, metadata, err := options.connectAwaiting(ctx, []string{topic})
	if err != nil {
		return err
	}
	defer client.Close()
	partitions, err := options.partitions(metadata, topic)
	if err != nil {
		return fmt.Errorf("consume %s: %w", topic, err)
	}
	offsets, err := options.listOffsets(ctx, client, topic, partitions)
	if err != nil {
		return fmt.Errorf("consume %s: %w", topic, err)
	}
	// next is each partition's next offset to print; with --exit-at-end a
	// partition is done when next reaches the latest offset seen at start.
	next := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	for _, partition := range partitions {
		start, note := startOffset(from, offsets[partition], options.exitAtEnd)
		if note != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "partition %d: %s\n", partition, note)
		}
		next[partition] = start
		starts[partition] = kgo.NewOffset().At(start)
	}
	client.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts})
	return consumeRecords(ctx, client, cmd.OutOrStdout(), options, next, offsets)
}

// startOffset is where one partition is read from: earliest (-2), latest
// (-1) or an offset, kept inside [log start offset, high watermark]. An
// offset outside it would be OFFSET_OUT_OF_RANGE, which the client answers
// by starting over from the log start, printing records the user asked to
// skip; and past the end, --exit-at-end would print nothing and say
// nothing. The note says where the partition begins or ends when the
// offset asked for is outside it.
func startOffset(from int64, bounds struct{ earliest, latest int64 }, exitAtEnd bool) (int64, string) {
	switch {
	case from == -2:
		return bounds.earliest, ""
	case from == -1:
		return bounds.latest, ""
	case from < bounds.earliest:
		return bounds.earliest, fmt.Sprintf("--from %d is below the log start offset %d: reading from %d", from, bounds.earliest, bounds.earliest)
	case from > bounds.latest && exitAtEnd:
		return bounds.latest, fmt.Sprintf("--from %d is past the end: the partition ends at offset %d (its high watermark), nothing to read", from, bounds.latest)
	case from > bounds.latest:
		return bounds.latest, fmt.Sprintf("--from %d is past the end: the partition ends at offset %d (its high watermark); waiting there for new records", from, bounds.latest)
	}
	return from, ""
}

// partitions are the partitions to read: --partition, or all of them.
func (o consumeOptions) partitions(metadata *kmsg.MetadataResponse, topic string) ([]int32, error) {
	described, err := topicMetadata(metadata, topic)
	if err != nil {
		return nil, err
	}
	var partitions []int32
	for _, partition := range described.Partitions {
		if o.partition < 0 || partition.Partition == o.partition {
			partitions = append(partitions, partition.Partition)
		}
	}
	if len(partitions) == 0 {
		return nil, fmt.Errorf("partition %d: UNKNOWN_TOPIC_OR_PARTITION", o.partition)
	}
	slices.Sort(partitions)
	return partitions, nil
}

// consumeRecords prints records until ctx ends, or, with --exit-at-end,
// until every partition has been read up to its latest offset.
func consumeRecords(ctx context.Context, client *kgo.Client, out io.Writer, options consumeOptions, next map[int32]int64, offsets partitionOffsets) error {
	atEnd := func() bool {
		for partition, offset := range next {
			if offset < offsets[partition].latest {
				return false
			}
		}
		return true
	}
	for !(options.exitAtEnd && atEnd()) {
		fetches, err := poll(ctx, client, options)
		if err != nil || ctx.Err() != nil {
			return err // nil when interrupted: what was read is printed
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		for _, record := range fetches.Records() {
			if options.format == "offsets" {
				fmt.Fprintf(out, "%d\t%d\t", record.Partition, record.Offset)
			}
			if record.Key != nil {
				fmt.Fprintf(out, "%s%s", record.Key, options.keySeparator)
			}
			fmt.Fprintf(out, "%s\n", record.Value)
			next[record.Partition] = record.Offset + 1
		}
	}
	return nil
}

// poll waits for the next records. With --exit-at-end the records wanted
// are known to exist, so a wait longer than --timeout means the partition
// is unreachable (a leader gone) and is an error rather than a hang.
func poll(ctx context.Context, client *kgo.Client, options consumeOptions) (kgo.Fetches, error) {
	if !options.exitAtEnd {
		return client.PollFetches(ctx), nil
	}
	attempt, cancel := context.WithTimeout(ctx, options.timeout)
	defer cancel()
	fetches := client.PollFetches(attempt)
	if attempt.Err() != nil && ctx.Err() == nil && fetches.NumRecords() == 0 {
		return nil, fmt.Errorf("consume: no records within %s, before the end was reached", options.timeout)
	}
	return fetches, nil
}
