package main

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; a
// plain build reports the module version or "devel".
var version = ""

const longDescription = `tide is a Kafka-compatible replicated commit log that never loses an
acknowledged write and whose high watermark never goes backwards.

It implements Kafka's replication protocol (leader epochs, epoch-fenced
fetches, safe ISR expansion, a monotonic high watermark, ordered metadata)
with every data-loss bug of Kafka's history designed out, and speaks the
Kafka wire protocol so existing clients work unchanged.`

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "tide",
		Short:         "A Kafka-compatible replicated commit log",
		Long:          longDescription,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
	})
	root.AddCommand(newVersionCommand(), newLogCommand(), newSimCommand(), newScenarioCommand(), newServeCommand(), newDevCommand(),
		newTopicCommand(), newGroupCommand(), newProduceCommand(), newConsumeCommand(), newBenchCommand(), newChaosCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tide's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "tide %s (%s, %s/%s)\n", resolvedVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

func resolvedVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// usageError marks a mistake on the command line (exit code 2) as opposed to
// a failure while doing the work (exit code 1).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func exitCode(err error) int {
	var usage usageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}
