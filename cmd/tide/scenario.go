package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tidelog/tide/internal/scenario"
)

func newScenarioCommand() *cobra.Command {
	command := &cobra.Command{
		Use:   "scenario",
		Short: "Replay the seed bugs step by step",
		Long: `Replays each Kafka data-loss bug tide designs out (KAFKA-7128, KAFKA-6880,
KAFKA-2334, KAFKA-4414, the KAFKA-1211 mailing-list thread, and a power loss
with unsynced acks) step by step as its text tells it, on the simulator: whole
brokers over their partition logs on in-memory disks, the controller's real
decisions, and the simulated network, with the script holding and delivering
messages one by one. It prints the replica table the seed draws and ends with
the checker's verdict. With --legacy the rule that prevents the failure is
switched off, and the failure happens.`,
	}
	command.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list := scenario.List()
			width := 0
			for _, s := range list {
				width = max(width, len(s.Name))
			}
			for _, s := range list {
				fmt.Fprintf(cmd.OutOrStdout(), "%-*s %s\n", width, s.Name, s.Title)
			}
			return nil
		},
	})
	var legacy bool
	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Replay one scenario; exit 0 when safe, 1 when the failure happened",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("scenario run takes one scenario name (see 'tide scenario list')")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			verdict, safe, err := scenario.Replay(args[0], legacy, cmd.OutOrStdout())
			if err != nil {
				return usageError{err}
			}
			if !safe {
				return fmt.Errorf("%s", verdict)
			}
			return nil
		},
	}
	run.Flags().BoolVar(&legacy, "legacy", false, "switch off the rule that prevents this failure")
	command.AddCommand(run)
	return command
}
