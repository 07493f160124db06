package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// newGroupCommand is consumer-group administration in the style of
// kafka-consumer-groups.sh and rpk group, over the Kafka group APIs
// (ListGroups, DescribeGroups, OffsetFetch, ListOffsets, DeleteGroups,
// OffsetCommit), against any broker of a cluster: the client finds each
// group's coordinator itself.
func newGroupCommand() *cobra.Command {
	var options clientOptions
	command := &cobra.Command{
		Use:   "group",
		Short: "List, describe and delete consumer groups, and reset their committed offsets",
		Long: `Consumer-group administration over the Kafka protocol, against any broker of
a cluster (each group's coordinator is found with FindCoordinator):

  tide group list
  tide group describe mygroup
  tide group offsets reset mygroup --topic orders --to-earliest --dry-run
  tide group delete mygroup

A Kafka error code is printed by its name (GROUP_ID_NOT_FOUND) and exits 1.`,
	}
	options.addFlags(command.PersistentFlags())
	offsets := &cobra.Command{
		Use:   "offsets",
		Short: "Change a group's committed offsets",
	}
	offsets.AddCommand(newGroupOffsetsResetCommand(&options))
	command.AddCommand(newGroupListCommand(&options), newGroupDescribeCommand(&options), newGroupDeleteCommand(&options), offsets)
	return command
}

// adminClient connects as every console command does (one clear error when
// nothing answers) and wraps the client for the group calls.
func (o *clientOptions) adminClient(cmd *cobra.Command) (*kadm.Client, func(), error) {
	client, _, err := o.connect(cmd.Context(), nil)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(client), client.Close, nil
}

// groupContext bounds one group command by --timeout.
func (o *clientOptions) groupContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), o.timeout)
}

func newGroupListCommand(options *clientOptions) *cobra.Command {
	var states []string
	command := &cobra.Command{
		Use:   "list",
		Short: "List the groups of every broker: name, state, protocol type",
		Long: `Lists every group the cluster's coordinators hold (ListGroups to each
broker), one a line with its state and protocol type ("consumer" for consumer
groups, "connect" for Kafka Connect). --state keeps only groups in the given
states (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead, or the
KIP-848 states Assigning, Reconciling), as kafka-consumer-groups.sh --state.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			admin, closeClient, err := options.adminClient(cmd)
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			defer closeClient()
			ctx, cancel := options.groupContext(cmd)
			defer cancel()
			listed, err := admin.ListGroups(ctx, states...)
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			printGroupList(cmd.OutOrStdout(), listed.Sorted())
			return nil
		},
	}
	command.Flags().StringSliceVar(&states, "state", nil, "only groups in these states (repeat or comma-separate)")
	return command
}

// printGroupList writes a table of groups, sorted by name.
func printGroupList(out io.Writer, groups []kadm.ListedGroup) {
	table := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(table, "GROUP\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR")
	for _, group := range groups {
		fmt.Fprintf(table, "%s\t%s\t%s\t%d\n", group.Group, orDash(group.State), orDash(group.ProtocolType), group.Coordinator)
	}
	table.Flush()
}

func newGroupDescribeCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP [GROUP...]",
		Short: "Show a group's state, members and assignments, and per partition its committed offset, log end and lag",
		Long: `Shows each group as its coordinator describes it (state, protocol type and
assignor, coordinator, members with their client id, host and assigned
partitions), then a line per partition the group consumes or has committed:
the committed offset, the partition's log end offset (its high watermark, what
a consumer can reach) and the lag between them, with the member that owns it.
A partition without a committed offset shows "-". The numbers come from
several requests, taken at slightly different times, as kafka-consumer-groups.sh
--describe takes them.`,
		Args: minimumArgs(1, "one or more group names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			admin, closeClient, err := options.adminClient(cmd)
			if err != nil {
				return fmt.Errorf("describe groups: %w", err)
			}
			defer closeClient()
			ctx, cancel := options.groupContext(cmd)
			defer cancel()
			lags, err := admin.Lag(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe groups: %w", err)
			}
			var failed []string
			for _, name := range args {
				lag, ok := lags[name]
				if !ok {
					failed = append(failed, name+": no answer")
					continue
				}
				if err := lag.Error(); err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", name, err))
					continue
				}
				printGroupLag(cmd.OutOrStdout(), lag)
			}
			if len(failed) > 0 {
				return fmt.Errorf("describe groups: %s", strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

// printGroupLag writes one group: a line for the group, one per member, then
// the per-partition table of committed offset, log end offset and lag.
func printGroupLag(out io.Writer, group kadm.DescribedGroupLag) {
	fmt.Fprintf(out, "group %s: state %s, protocol type %s, protocol %s, coordinator %d, members %d, total lag %d\n",
		group.Group, orDash(group.State), orDash(group.ProtocolType), orDash(group.Protocol), group.Coordinator.NodeID,
		len(group.Members), group.Lag.Total())
	for _, member := range group.Members {
		instance := ""
		if member.InstanceID != nil {
			instance = ", instance " + *member.InstanceID
		}
		fmt.Fprintf(out, "  member %s (client %s, host %s%s): %s\n", member.MemberID, member.ClientID, member.ClientHost,
			instance, memberAssignment(member))
	}
	table := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(table, "TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tMEMBER\tCLIENT\tHOST")
	for _, partition := range group.Lag.Sorted() {
		committed, lag := "-", "-"
		if partition.Commit.At >= 0 {
			committed = fmt.Sprint(partition.Commit.At)
		}
		if partition.Err == nil && partition.Lag >= 0 {
			lag = fmt.Sprint(partition.Lag)
		}
		logEnd := "-"
		if partition.End.Err == nil {
			logEnd = fmt.Sprint(partition.End.Offset)
		}
		member, client, host := "-", "-", "-"
		if partition.Member != nil {
			member, client, host = partition.Member.MemberID, partition.Member.ClientID, partition.Member.ClientHost
		}
		fmt.Fprintf(table, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", partition.Topic, partition.Partition, committed, logEnd, lag, member, client, host)
	}
	table.Flush()
}

// memberAssignment is a consumer member's assigned partitions as
// topic[0,1,2] lists, or what a group of another protocol type has.
func memberAssignment(member kadm.DescribedGroupMember) string {
	assigned, ok := member.Assigned.AsConsumer()
	if !ok {
		return "assignment not a consumer group's"
	}
	if len(assigned.Topics) == 0 {
		return "nothing assigned"
	}
	var topics []string
	for _, topic := range assigned.Topics {
		partitions := slices.Clone(topic.Partitions)
		slices.Sort(partitions)
		topics = append(topics, topic.Topic+brokerList(partitions))
	}
	slices.Sort(topics)
	return strings.Join(topics, " ")
}

func newGroupDeleteCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP [GROUP...]",
		Short: "Delete groups that have no members, with their committed offsets",
		Long: `Deletes each group with DeleteGroups: its committed offsets and metadata go.
A group with members is refused (NON_EMPTY_GROUP), as Kafka refuses it: stop
its consumers first. An unknown group is GROUP_ID_NOT_FOUND.`,
		Args: minimumArgs(1, "one or more group names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			admin, closeClient, err := options.adminClient(cmd)
			if err != nil {
				return fmt.Errorf("delete groups: %w", err)
			}
			defer closeClient()
			ctx, cancel := options.groupContext(cmd)
			defer cancel()
			deleted, err := admin.DeleteGroups(ctx, args...)
			if err != nil && len(deleted) == 0 {
				return fmt.Errorf("delete groups: %w", err)
			}
			var failed []string
			for _, name := range args {
				answer, ok := deleted[name]
				switch {
				case !ok:
					failed = append(failed, name+": no answer")
				case answer.Err != nil:
					failed = append(failed, fmt.Sprintf("%s: %v", name, answer.Err))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", name)
				}
			}
			if len(failed) > 0 {
				return errors.New("delete groups: " + strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

func orDash(text string) string {
	if text == "" {
		return "-"
	}
	return text
}
