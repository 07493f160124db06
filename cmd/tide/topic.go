package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/wire"
)

func newTopicCommand() *cobra.Command {
	var options clientOptions
	command := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, grow and delete topics on a cluster",
		Long: `Topic administration over the Kafka protocol (CreateTopics, Metadata,
ListOffsets, DeleteTopics, ElectLeaders, CreatePartitions, DeleteRecords,
IncrementalAlterConfigs, DescribeConfigs), against any broker of a cluster:

  tide topic create orders --partitions 3 --bootstrap 127.0.0.1:9092
  tide topic describe orders
  tide topic add-partitions orders --total 6
  tide topic delete-records orders --partition 0 --offset 100
  tide topic alter-config orders --set retention.ms=3600000
  tide topic describe orders --configs

A Kafka error code is printed by its name (TOPIC_ALREADY_EXISTS) and exits 1.`,
	}
	options.addFlags(command.PersistentFlags())
	command.AddCommand(newTopicCreateCommand(&options), newTopicListCommand(&options), newTopicDescribeCommand(&options),
		newTopicDeleteCommand(&options), newTopicElectCommand(&options), newTopicAddPartitionsCommand(&options),
		newTopicDeleteRecordsCommand(&options), newTopicAlterConfigCommand(&options))
	command.AddCommand(newTopicReassignCommand(&options), newTopicReassignmentsCommand(&options))
	return command
}

// exactArgs is cobra.ExactArgs as a usage error (exit 2).
func exactArgs(count int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != count {
			return usageError{fmt.Errorf("%s takes %s, got %d arguments (see '%s --help')", cmd.CommandPath(), what, len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// minimumArgs is cobra.MinimumNArgs as a usage error (exit 2).
func minimumArgs(count int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < count {
			return usageError{fmt.Errorf("%s takes %s (see '%s --help')", cmd.CommandPath(), what, cmd.CommandPath())}
		}
		return nil
	}
}

func newTopicCreateCommand(options *clientOptions) *cobra.Command {
	var partitions, replicationFactor, minInsync int32
	var configs []string
	command := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Args:  exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions == 0 || partitions < -1 || replicationFactor == 0 || replicationFactor < -1 || minInsync < 0 {
				return usageError{fmt.Errorf("--partitions and --replication-factor must be at least 1 (or -1 for the broker's default), --min-insync-replicas at least 0")}
			}
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrCreateTopicsRequest()
			request.TimeoutMillis = int32(options.timeout.Milliseconds())
			entry := kmsg.NewCreateTopicsRequestTopic()
			entry.Topic, entry.NumPartitions, entry.ReplicationFactor = args[0], partitions, int16(replicationFactor)
			if minInsync > 0 {
				config := kmsg.NewCreateTopicsRequestTopicConfig()
				config.Name, config.Value = "min.insync.replicas", kmsg.StringPtr(strconv.Itoa(int(minInsync)))
				entry.Configs = append(entry.Configs, config)
			}
			for _, setting := range configs {
				name, value, ok := strings.Cut(setting, "=")
				if !ok || name == "" {
					return usageError{fmt.Errorf("--config %q: want NAME=VALUE", setting)}
				}
				config := kmsg.NewCreateTopicsRequestTopicConfig()
				config.Name, config.Value = name, kmsg.StringPtr(value)
				entry.Configs = append(entry.Configs, config)
			}
			request.Topics = append(request.Topics, entry)
			answer, err := options.request(cmd.Context(), client, request)
			var created kmsg.CreateTopicsResponseTopic
			if err == nil {
				created = answer.(*kmsg.CreateTopicsResponse).Topics[0]
				err = kafkaError(created.ErrorCode, created.ErrorMessage)
			}
			if err != nil {
				return fmt.Errorf("create topic %s: %w", args[0], err)
			}
			// CreateTopics v5+ says what the broker's defaults gave.
			if created.NumPartitions > 0 {
				partitions = created.NumPartitions
			}
			if created.ReplicationFactor > 0 {
				replicationFactor = int32(created.ReplicationFactor)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created topic %s (partitions %d, replication factor %d)\n", args[0], partitions, replicationFactor)
			return nil
		},
	}
	command.Flags().Int32Var(&partitions, "partitions", -1, "the number of partitions (-1: the broker's num.partitions)")
	command.Flags().Int32Var(&replicationFactor, "replication-factor", -1, "replicas per partition (-1: the broker's default.replication.factor, 3 in tide dev)")
	command.Flags().Int32Var(&minInsync, "min-insync-replicas", 0, "min.insync.replicas for acks=all (0: the broker's default)")
	command.Flags().StringArrayVar(&configs, "config", nil, "a topic config NAME=VALUE (retention.ms, cleanup.policy, max.message.bytes, ...; docs/compatibility.md), repeatable")
	return command
}

func newTopicListCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the topics, one a line",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, metadata, err := options.connectAll(cmd)
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			defer client.Close()
			var names []string
			for _, topic := range metadata.Topics {
				if topic.Topic != nil {
					names = append(names, *topic.Topic)
				}
			}
			slices.Sort(names)
			for _, name := range names {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
}

func newTopicDescribeCommand(options *clientOptions) *cobra.Command {
	var configs bool
	command := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's partitions (leader, leader and partition epochs, replicas, ISR, offline replicas, offsets) and each replica's offsets and lag",
		Long: `Shows each partition as Metadata and the leader's ListOffsets give it, then a
line per replica with that replica's own log start offset, high watermark and
log end offset, and its lag (the leader's log end offset less its own). Every
broker hosting a replica is asked directly, with one ListOffsets and one Fetch
as Kafka's debugging replica id -2, which followers answer too. A replica's
three offsets come from its broker's one Fetch answer (the log end offset in
a tagged field only tide answers), so its high watermark is never shown
above its log end; the lag compares answers of two brokers, taken at
slightly different times. A broker that does not answer within --timeout is
shown as unreachable. --configs adds a line per topic config
(DescribeConfigs): its value and where it comes from. A broker learns of a
config change at once (its metadata long poll), so the one asked shows the
new value within a moment of the change.`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The Metadata asks for tide's partition epochs too (a tagged
			// field only tide answers; see wire.PartitionEpochTag).
			request := kmsg.NewPtrMetadataRequest()
			request.AllowAutoTopicCreation = false
			entry := kmsg.NewMetadataRequestTopic()
			entry.Topic = kmsg.StringPtr(args[0])
			request.Topics = append(request.Topics, entry)
			request.UnknownTags.Set(wire.PartitionEpochTag, nil)
			client, metadata, err := options.connectWith(cmd.Context(), request, nil)
			if err != nil {
				return err
			}
			defer client.Close()
			topic, err := topicMetadata(metadata, args[0])
			if err != nil {
				return fmt.Errorf("describe topic %s: %w", args[0], err)
			}
			slices.SortFunc(topic.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
			// Only a led partition can be asked for offsets: one without a
			// leader would fail the whole ListOffsets.
			var numbers []int32
			for _, partition := range topic.Partitions {
				if partition.ErrorCode == 0 && partition.Leader >= 0 {
					numbers = append(numbers, partition.Partition)
				}
			}
			offsets, err := options.listOffsets(cmd.Context(), client, args[0], numbers)
			if err != nil {
				return fmt.Errorf("describe topic %s: %w", args[0], err)
			}
			printTopic(cmd.OutOrStdout(), args[0], topic, offsets, options.replicaStates(cmd.Context(), client, metadata, topic))
			if !configs {
				return nil
			}
			if err := printTopicConfigs(cmd.Context(), cmd.OutOrStdout(), options, client, args[0]); err != nil {
				return fmt.Errorf("describe configs of topic %s: %w", args[0], err)
			}
			return nil
		},
	}
	command.Flags().BoolVar(&configs, "configs", false, "also show every topic config, its value and its source")
	return command
}

// printTopic writes one line for the topic and one per partition, each
// followed by a line per replica (printReplicas); a partition's earliest
// offset is the log start offset and its latest the high watermark, as the
// leader serves them to consumers: the range [earliest, latest) a consumer
// can read.
func printTopic(out io.Writer, name string, topic kmsg.MetadataResponseTopic, offsets partitionOffsets, replicas map[replicaKey]replicaState) {
	fmt.Fprintf(out, "topic %s: partitions %d, topic id %s\n", name, len(topic.Partitions), metadata.TopicID(topic.TopicID))
	for _, p := range topic.Partitions {
		status := "offsets unknown without a leader"
		if known, ok := offsets[p.Partition]; ok {
			status = fmt.Sprintf("offsets earliest %d latest %d", known.earliest, known.latest)
		}
		if err := kafkaError(p.ErrorCode, nil); err != nil {
			status += ", error " + err.Error()
		}
		fmt.Fprintf(out, "  partition %d: leader %d, leader epoch %d, partition epoch %s, replicas %s, isr %s, offline %s, %s\n",
			p.Partition, p.Leader, p.LeaderEpoch, partitionEpoch(p), brokerList(p.Replicas), brokerList(p.ISR), brokerList(p.OfflineReplicas), status)
		printReplicas(out, p, replicas)
	}
}

// partitionEpoch is the partition epoch a tide broker answered in
// wire.PartitionEpochTag, or "unknown" from a broker that does not.
func partitionEpoch(p kmsg.MetadataResponseTopicPartition) string {
	epoch := "unknown"
	p.UnknownTags.Each(func(key uint32, value []byte) {
		reader := kbin.Reader{Src: value}
		if key == wire.PartitionEpochTag {
			if n := reader.Varint(); reader.Ok() {
				epoch = strconv.Itoa(int(n))
			}
		}
	})
	return epoch
}

func brokerList(ids []int32) string {
	text := make([]string, len(ids))
	for i, id := range ids {
		text[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(text, ",") + "]"
}

func newTopicDeleteCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and its data",
		Args:  exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrDeleteTopicsRequest()
			request.TimeoutMillis = int32(options.timeout.Milliseconds())
			// Versions below 6 name topics in TopicNames, 6 and up in Topics.
			request.TopicNames = args
			entry := kmsg.NewDeleteTopicsRequestTopic()
			entry.Topic = kmsg.StringPtr(args[0])
			request.Topics = append(request.Topics, entry)
			answer, err := options.request(cmd.Context(), client, request)
			if err == nil {
				topic := answer.(*kmsg.DeleteTopicsResponse).Topics[0]
				err = kafkaError(topic.ErrorCode, topic.ErrorMessage)
			}
			if err != nil {
				return fmt.Errorf("delete topic %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
			return nil
		},
	}
}

func newTopicElectCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "elect-preferred [NAME]",
		Short: "Move leadership back to each partition's preferred (first) replica, of one topic or all",
		Long: `Elects each partition's preferred (first) replica leader where it is in the
ISR (Kafka's ElectLeaders, type PREFERRED). The controller does the same by
itself every leader imbalance check interval for brokers whose leadership is
off balance (auto.leader.rebalance.enable, see tide serve --help); this
command does it now, for every partition asked.`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, metadata, err := options.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrElectLeadersRequest()
			request.ElectionType, request.TimeoutMillis = 0, int32(options.timeout.Milliseconds()) // 0: preferred
			what := "all topics"
			if len(args) == 1 {
				what = "topic " + args[0]
				topic, err := topicMetadata(metadata, args[0])
				if err != nil {
					return fmt.Errorf("elect preferred leaders of %s: %w", what, err)
				}
				entry := kmsg.NewElectLeadersRequestTopic()
				entry.Topic = args[0]
				for _, partition := range topic.Partitions {
					entry.Partitions = append(entry.Partitions, partition.Partition)
				}
				request.Topics = append(request.Topics, entry)
			}
			answer, err := options.request(cmd.Context(), client, request)
			if err != nil {
				return fmt.Errorf("elect preferred leaders of %s: %w", what, err)
			}
			return printElections(cmd.OutOrStdout(), what, answer.(*kmsg.ElectLeadersResponse))
		},
	}
}

func maxArgs(count int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > count {
			return usageError{fmt.Errorf("%s takes at most %d arguments, got %d", cmd.CommandPath(), count, len(args))}
		}
		return nil
	}
}

// printElections prints each partition's outcome. ELECTION_NOT_NEEDED is
// success: the preferred replica already leads.
func printElections(out io.Writer, what string, response *kmsg.ElectLeadersResponse) error {
	if err := kafkaError(response.ErrorCode, nil); err != nil {
		return fmt.Errorf("elect preferred leaders of %s: %w", what, err)
	}
	failed := 0
	for _, topic := range response.Topics {
		for _, p := range topic.Partitions {
			outcome := "elected"
			if p.ErrorCode == kerr.ElectionNotNeeded.Code {
				outcome = "already led by its preferred replica"
			} else if err := kafkaError(p.ErrorCode, p.ErrorMessage); err != nil {
				outcome, failed = err.Error(), failed+1
			}
			fmt.Fprintf(out, "%s-%d: %s\n", topic.Topic, p.Partition, outcome)
		}
	}
	if failed > 0 {
		return fmt.Errorf("elect preferred leaders of %s: %d partitions failed", what, failed)
	}
	return nil
}
