package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// resetTo is where `group offsets reset` moves each partition, as
// kafka-consumer-groups.sh --reset-offsets names them.
type resetTo struct {
	kind   string // earliest, latest, offset, datetime or shift
	offset int64  // --to-offset's offset, --shift-by's shift
	millis int64  // --to-datetime's instant, in Unix milliseconds
}

// partitionBounds are what a reset needs to know of one partition: its
// group's committed offset (-1 for none), its log start offset, its high
// watermark and, for --to-datetime, the first offset at or after the
// instant (the high watermark when no record is that late).
type partitionBounds struct {
	committed, logStart, highWatermark, atTime int64
}

// planReset decides one partition's new committed offset. Every target is
// kept inside [log start, high watermark], as Kafka's tool clamps it: an
// offset below the log start would be out of range for the consumer at once,
// one above the high watermark would skip records not yet written. The
// second value says when the target was clamped.
func planReset(to resetTo, bounds partitionBounds) (int64, string, error) {
	var target int64
	switch to.kind {
	case "earliest":
		return bounds.logStart, "", nil
	case "latest":
		return bounds.highWatermark, "", nil
	case "datetime":
		return bounds.atTime, "", nil
	case "offset":
		target = to.offset
	case "shift":
		if bounds.committed < 0 {
			return 0, "", errors.New("no committed offset to shift")
		}
		target = bounds.committed + to.offset
	default:
		return 0, "", fmt.Errorf("unknown reset %q", to.kind)
	}
	switch {
	case target < bounds.logStart:
		return bounds.logStart, fmt.Sprintf("%d is below the log start offset", target), nil
	case target > bounds.highWatermark:
		return bounds.highWatermark, fmt.Sprintf("%d is above the high watermark", target), nil
	}
	return target, "", nil
}

// parseResetTo reads the one --to-* or --shift-by flag given.
func parseResetTo(cmd *cobra.Command, toOffset, shiftBy int64, datetime string) (resetTo, error) {
	var chosen []resetTo
	flags := cmd.Flags()
	if earliest, _ := flags.GetBool("to-earliest"); earliest {
		chosen = append(chosen, resetTo{kind: "earliest"})
	}
	if latest, _ := flags.GetBool("to-latest"); latest {
		chosen = append(chosen, resetTo{kind: "latest"})
	}
	if flags.Changed("to-offset") {
		chosen = append(chosen, resetTo{kind: "offset", offset: toOffset})
	}
	if flags.Changed("shift-by") {
		chosen = append(chosen, resetTo{kind: "shift", offset: shiftBy})
	}
	if flags.Changed("to-datetime") {
		millis, err := parseDatetime(datetime)
		if err != nil {
			return resetTo{}, usageError{fmt.Errorf("--to-datetime %q: %w", datetime, err)}
		}
		chosen = append(chosen, resetTo{kind: "datetime", millis: millis})
	}
	if len(chosen) != 1 {
		return resetTo{}, usageError{fmt.Errorf("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by (see '%s --help')", cmd.CommandPath())}
	}
	return chosen[0], nil
}

// parseDatetime takes RFC 3339 (2026-12-03T09:00:00Z, with any zone), the
// same without a zone (taken as UTC), or Unix milliseconds.
func parseDatetime(text string) (int64, error) {
	if millis, err := strconv.ParseInt(text, 10, 64); err == nil {
		return millis, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if at, err := time.Parse(layout, text); err == nil {
			return at.UnixMilli(), nil
		}
	}
	return 0, errors.New("want RFC 3339 (2026-12-03T09:00:00Z), a UTC time without a zone, or Unix milliseconds")
}

func newGroupOffsetsResetCommand(options *clientOptions) *cobra.Command {
	var topics []string
	var allTopics, dryRun bool
	var toOffset, shiftBy int64
	var datetime string
	command := &cobra.Command{
		Use:   "reset GROUP (--topic T[:P,P...] ... | --all-topics) (--to-earliest | --to-latest | --to-offset N | --to-datetime T | --shift-by N) [--dry-run]",
		Short: "Move an inactive group's committed offsets",
		Long: `Sets the committed offsets of a group that has no members (state Empty, or a
group not yet known), as kafka-consumer-groups.sh --reset-offsets does; a group
with members is refused, since its consumers would overwrite the reset at
their next commit. The partitions: every partition of each --topic (or the
listed ones, --topic orders:0,2), or with --all-topics each partition the
group has committed an offset for. The target, one of:

  --to-earliest        the log start offset
  --to-latest          the high watermark (the next offset to be committed)
  --to-offset N        N, kept within [log start, high watermark]
  --to-datetime T      the first record at or after T (RFC 3339, a UTC time
                       without a zone, or Unix milliseconds); the high
                       watermark when no record is that late
  --shift-by N         the committed offset plus N (N may be negative), kept
                       within [log start, high watermark]

--dry-run prints the plan and commits nothing.

  tide group offsets reset mygroup --topic orders --to-earliest --dry-run
  tide group offsets reset mygroup --all-topics --shift-by -10`,
		Args: exactArgs(1, "one group name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, err := parseResetTo(cmd, toOffset, shiftBy, datetime)
			if err != nil {
				return err
			}
			if allTopics == (len(topics) > 0) {
				return usageError{fmt.Errorf("give --topic or --all-topics, not both nor neither (see '%s --help')", cmd.CommandPath())}
			}
			selection, err := parseTopicSelection(topics)
			if err != nil {
				return usageError{err}
			}
			admin, closeClient, err := options.adminClient(cmd)
			if err != nil {
				return fmt.Errorf("reset offsets of group %s: %w", args[0], err)
			}
			defer closeClient()
			ctx, cancel := options.groupContext(cmd)
			defer cancel()
			plan, err := planGroupReset(ctx, admin, args[0], selection, to)
			if err != nil {
				return fmt.Errorf("reset offsets of group %s: %w", args[0], err)
			}
			printResetPlan(cmd.OutOrStdout(), plan)
			if dryRun {
				fmt.Fprintln(cmd.OutOrStdout(), "dry run: nothing committed")
				return nil
			}
			if err := commitResetPlan(ctx, admin, args[0], plan); err != nil {
				return fmt.Errorf("reset offsets of group %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "committed %d offsets for group %s\n", len(plan), args[0])
			return nil
		},
	}
	flags := command.Flags()
	flags.StringArrayVar(&topics, "topic", nil, "a topic to reset, all its partitions or TOPIC:P,P (repeatable)")
	flags.BoolVar(&allTopics, "all-topics", false, "reset every partition the group has committed")
	flags.Bool("to-earliest", false, "to the log start offset")
	flags.Bool("to-latest", false, "to the high watermark")
	flags.Int64Var(&toOffset, "to-offset", 0, "to this offset")
	flags.StringVar(&datetime, "to-datetime", "", "to the first record at or after this time")
	flags.Int64Var(&shiftBy, "shift-by", 0, "by this many records from the committed offset")
	flags.BoolVar(&dryRun, "dry-run", false, "print the plan only")
	return command
}

// topicSelection maps each --topic to its listed partitions, or to nil for
// all of them.
type topicSelection map[string][]int32

func parseTopicSelection(flags []string) (topicSelection, error) {
	selection := topicSelection{}
	for _, flag := range flags {
		name, list, listed := strings.Cut(flag, ":")
		if name == "" {
			return nil, fmt.Errorf("--topic %q: want TOPIC or TOPIC:P,P", flag)
		}
		if !listed {
			selection[name] = nil
			continue
		}
		for _, text := range strings.Split(list, ",") {
			partition, err := strconv.ParseInt(strings.TrimSpace(text), 10, 32)
			if err != nil || partition < 0 {
				return nil, fmt.Errorf("--topic %q: %q is not a partition number", flag, text)
			}
			selection[name] = append(selection[name], int32(partition))
		}
	}
	return selection, nil
}

// resetStep is one line of a reset plan.
type resetStep struct {
	topic             string
	partition         int32
	committed, target int64
	note              string
}

// planGroupReset checks the group is inactive, gathers each partition's
// bounds and decides its target.
func planGroupReset(ctx context.Context, admin *kadm.Client, group string, selection topicSelection, to resetTo) ([]resetStep, error) {
	described, err := admin.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := described[group].Err; err != nil {
		return nil, err
	}
	if state := described[group].State; state != "Empty" && state != "Dead" && state != "" {
		return nil, fmt.Errorf("the group has members (state %s): offsets can only be reset while it is inactive; stop its consumers first", state)
	}
	committed, err := admin.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if len(selection) == 0 {
		// --all-topics: the partitions the group has committed.
		for topic, partitions := range committed {
			for partition, commit := range partitions {
				if commit.Err == nil {
					selection[topic] = append(selection[topic], partition)
				}
			}
		}
		if len(selection) == 0 {
			return nil, errors.New("the group has no committed offsets: name the topics with --topic")
		}
	}
	topics := sortedKeys(selection)
	starts, err := admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	atTime := ends
	if to.kind == "datetime" {
		if atTime, err = admin.ListOffsetsAfterMilli(ctx, to.millis, topics...); err != nil {
			return nil, err
		}
	}
	var plan []resetStep
	for _, topic := range topics {
		partitions, err := selectedPartitions(topic, selection[topic], ends)
		if err != nil {
			return nil, err
		}
		for _, partition := range partitions {
			step, err := planPartition(topic, partition, to, committed, starts, ends, atTime)
			if err != nil {
				return nil, err
			}
			plan = append(plan, step)
		}
	}
	return plan, nil
}

// selectedPartitions is the listed partitions, each checked to exist, or all
// the topic's partitions.
func selectedPartitions(topic string, listed []int32, ends kadm.ListedOffsets) ([]int32, error) {
	known, ok := ends[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: UNKNOWN_TOPIC_OR_PARTITION", topic)
	}
	if listed == nil {
		for partition := range known {
			if partition >= 0 {
				listed = append(listed, partition)
			}
		}
	}
	slices.Sort(listed)
	for _, partition := range listed {
		if _, ok := known[partition]; !ok {
			return nil, fmt.Errorf("topic %s has no partition %d", topic, partition)
		}
	}
	return listed, nil
}

func planPartition(topic string, partition int32, to resetTo, committed kadm.OffsetResponses, starts, ends, atTime kadm.ListedOffsets) (resetStep, error) {
	bounds := partitionBounds{committed: -1}
	if commit, ok := committed.Lookup(topic, partition); ok && commit.Err == nil {
		bounds.committed = commit.At
	}
	for _, listed := range []struct {
		offsets kadm.ListedOffsets
		into    *int64
	}{{starts, &bounds.logStart}, {ends, &bounds.highWatermark}, {atTime, &bounds.atTime}} {
		offset, ok := listed.offsets.Lookup(topic, partition)
		if !ok || offset.Err != nil {
			return resetStep{}, fmt.Errorf("topic %s partition %d: offsets not listed: %v", topic, partition, offset.Err)
		}
		*listed.into = offset.Offset
	}
	if bounds.atTime < 0 { // no record at or after the instant
		bounds.atTime = bounds.highWatermark
	}
	target, note, err := planReset(to, bounds)
	if err != nil {
		return resetStep{}, fmt.Errorf("topic %s partition %d: %w", topic, partition, err)
	}
	return resetStep{topic: topic, partition: partition, committed: bounds.committed, target: target, note: note}, nil
}

func printResetPlan(out io.Writer, plan []resetStep) {
	table := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(table, "TOPIC\tPARTITION\tCOMMITTED\tNEW-OFFSET\tNOTE")
	for _, step := range plan {
		committed := "-"
		if step.committed >= 0 {
			committed = fmt.Sprint(step.committed)
		}
		note := step.note
		if note != "" {
			note = "clamped: " + note
		}
		fmt.Fprintf(table, "%s\t%d\t%s\t%d\t%s\n", step.topic, step.partition, committed, step.target, note)
	}
	table.Flush()
}

// commitResetPlan commits the plan as a simple (generation -1) commit, the
// kind Kafka takes for a group without members.
func commitResetPlan(ctx context.Context, admin *kadm.Client, group string, plan []resetStep) error {
	offsets := kadm.Offsets{}
	for _, step := range plan {
		offsets.Add(kadm.Offset{Topic: step.topic, Partition: step.partition, At: step.target, LeaderEpoch: -1})
	}
	return admin.CommitAllOffsets(ctx, group, offsets)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}
