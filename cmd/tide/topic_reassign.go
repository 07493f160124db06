package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newTopicReassignCommand moves a partition to other brokers with
// AlterPartitionReassignments (KIP-455), as kafka-reassign-partitions.sh
// --execute does for one partition, or cancels its move.
func newTopicReassignCommand(options *clientOptions) *cobra.Command {
	var partition int32
	var replicas string
	var cancel bool
	command := &cobra.Command{
		Use:   "reassign NAME --partition P (--replicas 1,2,3 | --cancel)",
		Short: "Move a partition to other brokers, or cancel its move",
		Long: `Moves one partition to the brokers listed by --replicas, the first its
preferred leader, with AlterPartitionReassignments. The controller adds the
new replicas first; they copy the partition from its leader and join the ISR,
and only then are the replicas left out removed (their brokers delete their
copy) and, if the leader was one of them, leadership moves to the first new
replica in the ISR. The command returns once the move has begun; follow it
with 'tide topic reassignments'. The list must keep the topic's replication
factor (INVALID_REPLICA_ASSIGNMENT otherwise). --cancel stops a move in
progress and goes back to the replicas before it.

  tide topic reassign orders --partition 0 --replicas 2,3,4
  tide topic reassign orders --partition 0 --cancel`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseReplicaList(replicas)
			if err != nil || cancel == (replicas != "") || partition < 0 {
				return usageError{fmt.Errorf("give --replicas (broker ids, comma-separated) or --cancel, and --partition at least 0 (see '%s --help')", cmd.CommandPath())}
			}
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			request.TimeoutMillis = int32(options.timeout.Milliseconds())
			topic := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			topic.Topic = args[0]
			entry := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			entry.Partition, entry.Replicas = partition, target
			topic.Partitions = append(topic.Partitions, entry)
			request.Topics = append(request.Topics, topic)
			answer, err := options.request(cmd.Context(), client, request)
			if err == nil {
				err = reassignError(answer.(*kmsg.AlterPartitionAssignmentsResponse))
			}
			if err != nil {
				return fmt.Errorf("reassign %s-%d: %w", args[0], partition, err)
			}
			if cancel {
				fmt.Fprintf(cmd.OutOrStdout(), "cancelled the move of %s-%d\n", args[0], partition)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moving %s-%d to replicas %v\n", args[0], partition, target)
			return nil
		},
	}
	command.Flags().Int32Var(&partition, "partition", 0, "the partition")
	command.Flags().StringVar(&replicas, "replicas", "", "the target broker ids, comma-separated, the preferred leader first")
	command.Flags().BoolVar(&cancel, "cancel", false, "cancel the partition's move in progress")
	return command
}

// parseReplicaList reads "1,2,3"; empty gives nil (a cancellation).
func parseReplicaList(text string) ([]int32, error) {
	if text == "" {
		return nil, nil
	}
	var ids []int32
	for _, field := range strings.Split(text, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(field), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("broker id %q", field)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// reassignError reads the one partition's answer.
func reassignError(response *kmsg.AlterPartitionAssignmentsResponse) error {
	if err := kafkaError(response.ErrorCode, response.ErrorMessage); err != nil {
		return err
	}
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return fmt.Errorf("the broker answered %d topics for one partition", len(response.Topics))
	}
	answer := response.Topics[0].Partitions[0]
	return kafkaError(answer.ErrorCode, answer.ErrorMessage)
}

// newTopicReassignmentsCommand lists the moves in progress with
// ListPartitionReassignments, as kafka-reassign-partitions.sh --list does.
func newTopicReassignmentsCommand(options *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "reassignments [NAME]",
		Short: "List the partitions being moved, of every topic or of one",
		Long: `Lists the partitions being moved (tide topic reassign), each with its replicas
(the new ones and those being removed), the replicas being added and those
being removed. Nothing is listed once every move has completed.

  tide topic reassignments
  tide topic reassignments orders`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exactArgs(1, "at most one topic name")(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrListPartitionReassignmentsRequest()
			request.TimeoutMillis = int32(options.timeout.Milliseconds())
			// Every move is asked for, and a topic's picked out here: the
			// request names partitions, which the command would first
			// have to look up.
			answer, err := options.request(cmd.Context(), client, request)
			if err != nil {
				return fmt.Errorf("list reassignments: %w", err)
			}
			response := answer.(*kmsg.ListPartitionReassignmentsResponse)
			if err := kafkaError(response.ErrorCode, response.ErrorMessage); err != nil {
				return fmt.Errorf("list reassignments: %w", err)
			}
			out := cmd.OutOrStdout()
			listed := 0
			for _, topic := range response.Topics {
				if len(args) == 1 && topic.Topic != args[0] {
					continue
				}
				for _, p := range topic.Partitions {
					listed++
					fmt.Fprintf(out, "%s-%d: replicas %v, adding %v, removing %v\n", topic.Topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas)
				}
			}
			if listed == 0 {
				fmt.Fprintln(out, "no partition is being moved")
			}
			return nil
		},
	}
}
