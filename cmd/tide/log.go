package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
)

func newLogCommand() *cobra.Command {
	command := &cobra.Command{
		Use:   "log",
		Short: "Work with partition logs on disk",
	}
	command.AddCommand(&cobra.Command{
		Use:   "inspect PARTITION-DIR",
		Short: "Validate a partition directory without changing it",
		Long: `Reads every segment of a partition directory, checks each record batch
(length, magic, CRC-32C, contiguous offsets) and prints the segments, the
offsets checkpoint and the leader-epoch cache. Nothing is written: recovery
happens only when a broker opens the log. Exits 1 when a segment is damaged.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("log inspect takes one partition directory, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := commitlog.Inspect(disk.OS(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), report)
			if report.Damaged() {
				return errors.New("the log is damaged; a broker opening it cuts damage above its recovery point and refuses damage below it")
			}
			return nil
		},
	})
	return command
}
