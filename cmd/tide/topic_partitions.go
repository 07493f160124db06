package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newTopicAddPartitionsCommand grows a topic with CreatePartitions
// (KIP-195), as kafka-topics.sh --alter --partitions and rpk topic
// add-partitions do; the controller places the new replicas.
func newTopicAddPartitionsCommand(options *clientOptions) *cobra.Command {
	var total int32
	var validateOnly bool
	command := &cobra.Command{
		Use:   "add-partitions NAME --total N",
		Short: "Grow a topic to N partitions (a topic never shrinks)",
		Long: `Grows a topic to --total partitions with CreatePartitions. The cluster places
the new partitions' replicas as it places a new topic's, and answers once the
broker asked has them. A count not above the current one is refused
(INVALID_PARTITIONS): a topic never shrinks, and keyed records would move to
other partitions as it grows, so grow a keyed topic with care.

  tide topic add-partitions orders --total 6`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("total") || total < 1 {
				return usageError{fmt.Errorf("--total N is required, N at least 1 (see '%s --help')", cmd.CommandPath())}
			}
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrCreatePartitionsRequest()
			request.TimeoutMillis, request.ValidateOnly = int32(options.timeout.Milliseconds()), validateOnly
			entry := kmsg.NewCreatePartitionsRequestTopic()
			entry.Topic, entry.Count = args[0], total
			request.Topics = append(request.Topics, entry)
			answer, err := options.request(cmd.Context(), client, request)
			if err == nil {
				grown := answer.(*kmsg.CreatePartitionsResponse).Topics[0]
				err = kafkaError(grown.ErrorCode, grown.ErrorMessage)
			}
			if err != nil {
				return fmt.Errorf("add partitions to %s: %w", args[0], err)
			}
			verb := "grew"
			if validateOnly {
				verb = "could grow"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s topic %s to %d partitions\n", verb, args[0], total)
			return nil
		},
	}
	command.Flags().Int32Var(&total, "total", 0, "the topic's partition count after growing (required)")
	command.Flags().BoolVar(&validateOnly, "validate-only", false, "only check that the topic could grow")
	return command
}

// newTopicDeleteRecordsCommand moves a partition's log start offset with
// DeleteRecords (KIP-107), as kafka-delete-records.sh does.
func newTopicDeleteRecordsCommand(options *clientOptions) *cobra.Command {
	var partition int32
	var offset int64
	command := &cobra.Command{
		Use:   "delete-records NAME --partition P --offset O",
		Short: "Delete a partition's records below an offset (-1: up to its high watermark)",
		Long: `Deletes the records of one partition below --offset with DeleteRecords: the
partition's log start offset moves there on its leader and followers, and
consumers can no longer read below it. --offset -1 deletes everything up to
the high watermark; an offset above the high watermark is refused
(OFFSET_OUT_OF_RANGE).

  tide topic delete-records orders --partition 0 --offset 100`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("offset") || partition < 0 || offset < -1 {
				return usageError{fmt.Errorf("--offset O is required, O at least -1, and --partition at least 0 (see '%s --help')", cmd.CommandPath())}
			}
			client, _, err := options.connect(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrDeleteRecordsRequest()
			request.TimeoutMillis = int32(options.timeout.Milliseconds())
			topic := kmsg.NewDeleteRecordsRequestTopic()
			topic.Topic = args[0]
			entry := kmsg.NewDeleteRecordsRequestTopicPartition()
			entry.Partition, entry.Offset = partition, offset
			topic.Partitions = append(topic.Partitions, entry)
			request.Topics = append(request.Topics, topic)
			answer, err := options.request(cmd.Context(), client, request)
			lowWatermark := int64(-1)
			if err == nil {
				err = deleteRecordsError(answer.(*kmsg.DeleteRecordsResponse), &lowWatermark)
			}
			if err != nil {
				return fmt.Errorf("delete records of %s-%d: %w", args[0], partition, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s-%d: log start offset %d\n", args[0], partition, lowWatermark)
			return nil
		},
	}
	command.Flags().Int32Var(&partition, "partition", 0, "the partition")
	command.Flags().Int64Var(&offset, "offset", 0, "delete the records below this offset (-1: the high watermark) (required)")
	return command
}

// deleteRecordsError reads the one partition's answer: its error, or its
// new low watermark (the log start offset).
func deleteRecordsError(response *kmsg.DeleteRecordsResponse, lowWatermark *int64) error {
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return fmt.Errorf("the broker answered %d topics for one partition", len(response.Topics))
	}
	answer := response.Topics[0].Partitions[0]
	if err := kafkaError(answer.ErrorCode, nil); err != nil {
		return err
	}
	*lowWatermark = answer.LowWatermark
	return nil
}
