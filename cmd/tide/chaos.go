package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidelog/tide/internal/chaos"
)

type chaosOptions struct {
	config  chaos.Config
	faults  string
	json    bool
	svg     string
	history string
}

func newChaosCommand() *cobra.Command {
	var options chaosOptions
	command := &cobra.Command{
		Use:   "chaos",
		Short: "Run real tide serve processes under faults and check that no acknowledged write is lost",
		Long: `Starts --nodes tide serve processes (each a broker and a voter) on loopback
ports with their data under a temporary directory, creates a topic of
replication factor 3 and min.insync.replicas 2, and runs idempotent
acks=all producers writing unique values, a consumer reading them back
and a poller asking every broker for each partition's high watermark.

Meanwhile it injects faults drawn from --seed, with quiet periods
between them: kill -9 of a partition leader, of the active controller,
of a random node, of two nodes at once (each restarted after a while);
SIGSTOP of a node past the session timeout, then SIGCONT; isolation of
a node by silently dropping its packets (iptables on the loopback
interface; root only, skipped with a message otherwise); and a cut of
the active controller's controller traffic alone.

After --duration it heals everything, checks that writes are
acknowledged again, lets the cluster settle, reads every partition back,
stops the nodes and checks the history: acknowledged records lost,
duplicated or at another offset than acknowledged; a definite error
whose record is present; a read taken back; high watermark regressions
on one broker and across leaders; replicas that differ below the high
watermark. It prints every violation and exits 1 if there is one.

It prints acknowledgements per second with the faults marked, and writes
the same as an SVG picture (--svg). docs/operations.md says how to read
the output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChaos(cmd, options)
		},
	}
	flags := command.Flags()
	flags.IntVar(&options.config.Nodes, "nodes", 3, "tide serve processes to start")
	flags.StringVar(&options.config.Binary, "binary", "", "the tide binary the nodes run (default: this one)")
	flags.DurationVar(&options.config.Duration, "duration", 60*time.Second, "how long faults are injected (healing and checking come after)")
	flags.Uint64Var(&options.config.Seed, "seed", 1, "seed of the fault schedule")
	flags.StringVar(&options.faults, "faults", strings.Join(chaos.FaultKinds, ","),
		"fault kinds to draw from, comma-separated: "+strings.Join(chaos.AllFaultKinds, ", ")+" (none: no faults)")
	flags.IntVar(&options.config.Partitions, "partitions", 3, "partitions of the topic")
	flags.StringVar(&options.config.Acks, "acks", "all", "all (-1): idempotent acks=all producers; 1: the leader alone, idempotence off (loss becomes possible: shows the checker finding it)")
	flags.IntVar(&options.config.RatePerSecond, "rate", 400, "records produced per second, over all producers")
	flags.IntVar(&options.config.Producers, "producers", 2, "producer clients")
	flags.DurationVar(&options.config.SessionTimeout, "session-timeout", 3*time.Second, "the nodes' --session-timeout (a pause or isolation lasts past it)")
	flags.DurationVar(&options.config.QuietMin, "quiet-min", 3*time.Second, "shortest quiet period between faults")
	flags.DurationVar(&options.config.QuietMax, "quiet-max", 6*time.Second, "longest quiet period between faults")
	flags.IntVar(&options.config.BasePort, "base-port", 0, "give the nodes loopback ports from this one up (default: free ports picked at random)")
	flags.StringVar(&options.config.Dir, "dir", "", "where the run's data directory is made (default: the system's temporary directory)")
	flags.BoolVar(&options.config.Keep, "keep", false, "keep the data directory, the nodes' logs and history.json afterwards")
	flags.BoolVar(&options.json, "json", false, "print the result as JSON (progress goes to stderr)")
	flags.StringVar(&options.svg, "svg", "", "write the timeline picture here (default: tide-chaos-seed-N.svg beside the data directory)")
	flags.StringVar(&options.history, "history", "", "write the recorded history as JSON here (default: history.json in the data directory with --keep)")
	return command
}

func runChaos(cmd *cobra.Command, options chaosOptions) error {
	config := options.config
	if config.Acks == "-1" {
		config.Acks = "all"
	}
	config.Faults = nil
	for _, kind := range strings.Split(options.faults, ",") {
		if kind = strings.TrimSpace(kind); kind != "" && kind != "none" {
			config.Faults = append(config.Faults, kind)
		}
	}
	if len(config.Faults) == 0 {
		config.Faults = []string{}
	}
	if config.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this binary (give --binary): %w", err)
		}
		config.Binary = self
	}
	config.Out = cmd.OutOrStdout()
	if options.json {
		config.Out = cmd.ErrOrStderr()
	}
	config = config.WithDefaults()
	if err := config.Validate(); err != nil {
		return usageError{fmt.Errorf("tide chaos: %w", err)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	report, err := chaos.Run(ctx, config)
	if err != nil {
		return fmt.Errorf("chaos run (data in %s): %w", report.Dir, err)
	}
	if err := writeChaosFiles(config, options, &report); err != nil {
		return err
	}
	if options.json {
		encoder := json.NewEncoder(cmd.OutOrStdout())
		encoder.SetIndent("", "  ")
		if err := encoder.Encode(chaosJSON(report)); err != nil {
			return err
		}
	} else {
		printChaosReport(cmd.OutOrStdout(), report)
	}
	if n := len(report.Result.Violations); n > 0 {
		return fmt.Errorf("tide chaos: %d violations (seed %d)", n, config.Seed)
	}
	return nil
}

// writeChaosFiles writes the SVG timeline and, when asked or kept, the
// history.
func writeChaosFiles(config chaos.Config, options chaosOptions, report *chaos.Report) error {
	svg := options.svg
	if svg == "" {
		svg = filepath.Join(filepath.Dir(report.Dir), fmt.Sprintf("tide-chaos-seed-%d.svg", config.Seed))
	}
	file, err := os.Create(svg)
	if err != nil {
		return err
	}
	if err := chaos.WriteSVG(file, report.History, report.Seconds); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	report.SVG = svg
	history := options.history
	if history == "" && config.Keep {
		history = filepath.Join(report.Dir, "history.json")
	}
	if history == "" {
		return nil
	}
	data, err := json.Marshal(report.History)
	if err != nil {
		return err
	}
	report.HistoryFile = history
	return os.WriteFile(history, data, 0o644)
}

func chaosJSON(report chaos.Report) map[string]any {
	return map[string]any{"seed": report.Config.Seed, "duration": report.Config.Duration.String(), "nodes": report.Config.Nodes,
		"acks": report.Config.Acks, "result": report.Result, "faults": chaos.FaultCounts(report.History), "skipped_faults": report.Skipped,
		"acknowledged_after_healing": report.Recovered, "settled": report.History.Settled, "acknowledged_per_second": report.Seconds,
		"svg": report.SVG, "history": report.HistoryFile, "violation_counts": report.Result.Counts()}
}

func printChaosReport(w io.Writer, report chaos.Report) {
	fmt.Fprintln(w)
	chaos.WriteTimeline(w, report.History, report.Seconds)
	r := report.Result
	fmt.Fprintf(w, "\nproduced: %d acknowledged, %d failed, %d indefinite (%d of them in the log); %d acknowledged in the %s after healing\n",
		r.Acknowledged, r.Failed, r.Indefinite, r.IndefinitePresent, report.Recovered, chaos.RecoveryWindow)
	fmt.Fprintf(w, "read: %d records during the run; %d high watermark samples; settled: %t\n", r.Reads, r.Samples, report.History.Settled)
	fmt.Fprintf(w, "faults: %s\n", chaos.SortedCounts(chaos.FaultCounts(report.History)))
	for _, skipped := range report.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", skipped)
	}
	for _, note := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", note)
	}
	fmt.Fprintf(w, "timeline: %s\n", report.SVG)
	if report.HistoryFile != "" {
		fmt.Fprintf(w, "history: %s\n", report.HistoryFile)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION %s\n", v)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "verdict: no violations (0 lost, 0 duplicated, 0 at a wrong offset, 0 high watermark regressions, replicas identical)")
	} else {
		fmt.Fprintf(w, "verdict: %d violations: %s\n", len(r.Violations), chaos.SortedCounts(r.Counts()))
	}
}
