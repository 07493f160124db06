package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicAlterConfigCommand(options *clientOptions) *cobra.Command {
	var sets, deletes []string
	command := &cobra.Command{
		Use:   "alter-config NAME",
		Short: "Set or delete a topic's configs (IncrementalAlterConfigs)",
		Long: `Changes single configs of a topic, all or nothing, with IncrementalAlterConfigs:
--set NAME=VALUE sets one, --delete NAME returns one to its default. A config
tide does not serve, or a value outside its type and range, is INVALID_CONFIG
naming it (docs/compatibility.md lists the configs).

  tide topic alter-config orders --set retention.ms=3600000 --delete segment.ms
  tide topic describe orders --configs`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sets)+len(deletes) == 0 {
				return usageError{fmt.Errorf("%s needs at least one --set or --delete", cmd.CommandPath())}
			}
			resource := kmsg.NewIncrementalAlterConfigsRequestResource()
			resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, args[0]
			for _, setting := range sets {
				name, value, ok := strings.Cut(setting, "=")
				if !ok || name == "" {
					return usageError{fmt.Errorf("--set %q: want NAME=VALUE", setting)}
				}
				config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				config.Name, config.Op, config.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
				resource.Configs = append(resource.Configs, config)
			}
			for _, name := range deletes {
				config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				config.Name, config.Op = name, kmsg.IncrementalAlterConfigOpDelete
				resource.Configs = append(resource.Configs, config)
			}
			client, _, err := options.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer client.Close()
			request := kmsg.NewPtrIncrementalAlterConfigsRequest()
			request.Resources = append(request.Resources, resource)
			answer, err := options.request(cmd.Context(), client, request)
			if err == nil {
				altered := answer.(*kmsg.IncrementalAlterConfigsResponse).Resources
				if len(altered) != 1 {
					err = fmt.Errorf("%d resources answered for one", len(altered))
				} else {
					err = kafkaError(altered[0].ErrorCode, altered[0].ErrorMessage)
				}
			}
			if err != nil {
				return fmt.Errorf("alter configs of topic %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered configs of topic %s (%d set, %d deleted)\n", args[0], len(sets), len(deletes))
			return nil
		},
	}
	command.Flags().StringArrayVar(&sets, "set", nil, "set a topic config NAME=VALUE, repeatable")
	command.Flags().StringArrayVar(&deletes, "delete", nil, "return a topic config NAME to its default, repeatable")
	return command
}

// printTopicConfigs writes one line per config of the topic as
// DescribeConfigs answers it: name, value, and where the value comes from
// (DYNAMIC_TOPIC_CONFIG for the topic's own, else a default).
func printTopicConfigs(ctx context.Context, out io.Writer, options *clientOptions, client *kgo.Client, topic string) error {
	request := kmsg.NewPtrDescribeConfigsRequest()
	resource := kmsg.NewDescribeConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	request.Resources = append(request.Resources, resource)
	answer, err := options.request(ctx, client, request)
	if err != nil {
		return err
	}
	described := answer.(*kmsg.DescribeConfigsResponse).Resources
	if len(described) != 1 {
		return fmt.Errorf("%d resources answered for one", len(described))
	}
	if err := kafkaError(described[0].ErrorCode, described[0].ErrorMessage); err != nil {
		return err
	}
	for _, config := range described[0].Configs {
		value := "(null)"
		if config.Value != nil {
			value = *config.Value
		}
		fmt.Fprintf(out, "  config %s=%s (%s)\n", config.Name, value, config.Source)
	}
	return nil
}
