package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// benchRoundsMax bounds --rounds: each round starts two clusters.
const benchRoundsMax = 100

// benchCompareOptions are tide bench compare's: the shared load, run on a
// tide dev cluster and on kfake, --rounds times each.
type benchCompareOptions struct {
	benchOptions
	rounds int
	rate   int
	// consumeMinimum is --consume-duration: each round's consume phase
	// reads the topic again until its reads add up to this long.
	consumeMinimum time.Duration
}

// compareFigure is one figure of both clusters: every round's value, the
// medians, and their ratio tide/kfake (0 when kfake's median is 0). An
// informational figure says what was measured (how long the reads took)
// and is neither better nor worse.
type compareFigure struct {
	Name           string    `json:"name"`
	HigherIsBetter bool      `json:"higher_is_better"`
	Informational  bool      `json:"informational,omitempty"`
	Tide           []float64 `json:"tide"`
	Kfake          []float64 `json:"kfake"`
	TideMedian     float64   `json:"tide_median"`
	KfakeMedian    float64   `json:"kfake_median"`
	Ratio          float64   `json:"ratio"`
}

// compareReport is one run of tide bench compare.
type compareReport struct {
	Brokers    int     `json:"brokers"`
	Rounds     int     `json:"rounds"`
	Topic      string  `json:"topic"`
	Partitions int32   `json:"partitions"`
	Acks       string  `json:"acks"`
	ValueBytes int     `json:"value_bytes"`
	Producers  int     `json:"producers"`
	Consumers  int     `json:"consumers"`
	Seconds    float64 `json:"phase_seconds"`
	RateTarget int     `json:"e2e_rate_target"`
	// ConsumeSeconds is --consume-duration: the least time each round's
	// consume phase spent reading.
	ConsumeSeconds float64         `json:"consume_seconds_min"`
	Figures        []compareFigure `json:"figures"`
}

func newBenchCompareCommand() *cobra.Command {
	var options benchCompareOptions
	command := &cobra.Command{
		Use:   "compare",
		Short: "Run the same load on a tide dev cluster and on franz-go's kfake, and print the ratios",
		Long: `Starts, in this process and one after the other, a tide dev cluster of
--dev brokers (a new temporary directory; as in tide dev, a record is
acknowledged once fsynced, group commit) and franz-go's kfake with as many brokers (in memory: no disk, no
replication), and runs on each, with the same client and settings:

  produce     a warmup, then the throughput phase and the one-at-a-time
              latency phase of tide bench produce
  consume     the topic read from its start, as tide bench consume, and
              read again with new consumers until the reads add up to
              --consume-duration (the fill is a few seconds of produce,
              whose read alone would last under a second)
  e2e         produce to consume latency, as tide bench e2e (--rate)

Each cluster is started anew for each of --rounds rounds, tide first;
the table shows each figure's median over the rounds and the ratio
tide/kfake (above 1 is better for rates, below 1 for latencies and CPU).
CPU is of the whole process (brokers and client) per GiB produced or read. kfake
keeps every record in memory: a round holds what its phases produced.

  tide bench compare --rounds 3 --duration 5s
  tide bench compare --size 100 --acks 1 --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runBenchCompare(ctx, cmd, options)
		},
	}
	flags := command.Flags()
	options.addLoadFlags(flags, 5*time.Second)
	flags.Lookup("dev").Usage = fmt.Sprintf("brokers of each cluster, 1 to %d", devBrokersMax)
	flags.Lookup("dev").DefValue = "3"
	options.devBrokers = 3
	flags.IntVar(&options.rounds, "rounds", 3, "rounds; each figure is the median over them")
	flags.IntVar(&options.rate, "rate", 1000, "records per second of the e2e phase (0: as fast as the producers go)")
	flags.DurationVar(&options.consumeMinimum, "consume-duration", 5*time.Second,
		"consume: read the topic from its start again, with new consumers, until the reads add up to this long (0: once)")
	flags.DurationVar(&options.warmup, "warmup", time.Second, "produce and e2e: run this long, uncounted, before measuring")
	flags.Uint64Var(&options.seed, "seed", 1, "seed of the random values (producer i takes seed+i)")
	return command
}

func (o *benchCompareOptions) validate() error {
	if err := o.validateLoad(benchTimestampBytes); err != nil {
		return err
	}
	switch {
	case o.devBrokers < 1:
		return usageError{fmt.Errorf("--dev %d: compare starts its clusters, want 1 to %d brokers", o.devBrokers, devBrokersMax)}
	case o.rounds < 1 || o.rounds > benchRoundsMax:
		return usageError{fmt.Errorf("--rounds %d: want 1 to %d", o.rounds, benchRoundsMax)}
	case o.rate < 0 || o.warmup < 0 || o.consumeMinimum < 0:
		return usageError{fmt.Errorf("--rate, --warmup and --consume-duration must not be negative")}
	}
	o.mode, o.maxBufferedRecords, o.idempotent = "both", 100_000, o.acks == "all"
	return nil
}

func runBenchCompare(ctx context.Context, cmd *cobra.Command, options benchCompareOptions) error {
	if err := options.validate(); err != nil {
		return err
	}
	if err := refuseFlags(cmd, "bench compare measures the clusters it starts", "bootstrap"); err != nil {
		return err
	}
	report := compareReport{Brokers: options.devBrokers, Rounds: options.rounds, Topic: options.topic, Partitions: options.partitions,
		Acks: options.acks, ValueBytes: options.size, Producers: options.producers, Consumers: options.consumers,
		Seconds: options.duration.Seconds(), RateTarget: options.rate, ConsumeSeconds: options.consumeMinimum.Seconds()}
	progress := progressFor(cmd)
	rounds := map[string][]map[string]float64{}
	for round := range options.rounds {
		for _, target := range []string{"tide", "kfake"} {
			if ctx.Err() != nil {
				return fmt.Errorf("bench compare: interrupted in round %d", round+1)
			}
			figures, err := options.runRound(ctx, target, cmd.ErrOrStderr(), progress)
			if err != nil {
				return fmt.Errorf("bench compare: round %d on %s: %w", round+1, target, err)
			}
			rounds[target] = append(rounds[target], figures)
		}
	}
	report.Figures = compareFigures(rounds["tide"], rounds["kfake"])
	if err := report.print(cmd.OutOrStdout(), options.json); err != nil {
		return fmt.Errorf("bench compare: %w", err)
	}
	return nil
}

// compareFigureNames are the figures of a round, in the order printed,
// each with whether a higher value is better.
var compareFigureNames = []struct {
	name          string
	higher        bool
	informational bool
}{
	{"produce records/s", true, false}, {"produce MiB/s", true, false}, {"produce CPU s/GiB (process)", false, false},
	{"produce latency p50 ms", false, false}, {"produce latency p99 ms", false, false},
	{"consume MiB/s", true, false}, {"consume records/s", true, false}, {"consume CPU s/GiB (process)", false, false},
	{"consume seconds read", false, true}, {"consume passes", false, true},
	{"e2e latency p50 ms", false, false}, {"e2e latency p99 ms", false, false}, {"e2e latency max ms", false, false},
}

// runRound starts the target's cluster, runs every phase on it and stops
// it, answering each figure by name.
func (o benchCompareOptions) runRound(ctx context.Context, target string, errOut io.Writer, progress *benchProgress) (map[string]float64, error) {
	var cluster *benchCluster
	var err error
	if target == "tide" {
		cluster, err = startDevCluster(ctx, o.devBrokers, errOut)
	} else {
		cluster, err = startKfake(o.devBrokers)
	}
	if err != nil {
		return nil, err
	}
	o.bootstrap = cluster.bootstrap
	figures, err := o.runPhasesOn(ctx, progress)
	if stopErr := cluster.stop(); stopErr != nil {
		err = errors.Join(err, fmt.Errorf("stopping %s: %w", cluster.name, stopErr))
	}
	return figures, err
}

// runPhasesOn runs produce, consume and e2e against the bootstrap.
func (o benchCompareOptions) runPhasesOn(ctx context.Context, progress *benchProgress) (map[string]float64, error) {
	produced, err := o.measure(ctx, progress, true)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	consumed, err := benchConsumeOptions{benchOptions: o.benchOptions}.measureConsume(ctx, progress, true, o.consumeMinimum)
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	endToEnd, err := benchEndToEndOptions{benchOptions: o.benchOptions, rate: o.rate}.measure(ctx, progress)
	if err != nil {
		return nil, fmt.Errorf("e2e: %w", err)
	}
	throughput, latency := produced.Throughput, produced.Latency
	return map[string]float64{
		"produce records/s": throughput.RecordsPerSecond, "produce MiB/s": throughput.MiBPerSecond,
		"produce CPU s/GiB (process)": throughput.CPU.ProcessCPUSecondsPerGiB,
		"produce latency p50 ms":      latency.P50Ms, "produce latency p99 ms": latency.P99Ms,
		"consume MiB/s": consumed.MiBPerSecond, "consume records/s": consumed.RecordsPerSecond,
		"consume seconds read": consumed.ElapsedSeconds, "consume passes": float64(consumed.Passes),
		"consume CPU s/GiB (process)": consumed.CPU.ProcessCPUSecondsPerGiB, "e2e latency max ms": endToEnd.Latency.MaxMs,
		"e2e latency p50 ms": endToEnd.Latency.P50Ms, "e2e latency p99 ms": endToEnd.Latency.P99Ms,
	}, nil
}

// compareFigures pools the rounds by figure, with medians and ratios.
func compareFigures(tide, kfake []map[string]float64) []compareFigure {
	var figures []compareFigure
	for _, named := range compareFigureNames {
		figure := compareFigure{Name: named.name, HigherIsBetter: named.higher, Informational: named.informational}
		for _, round := range tide {
			figure.Tide = append(figure.Tide, round[named.name])
		}
		for _, round := range kfake {
			figure.Kfake = append(figure.Kfake, round[named.name])
		}
		figure.TideMedian, figure.KfakeMedian = median(figure.Tide), median(figure.Kfake)
		if figure.KfakeMedian != 0 {
			figure.Ratio = figure.TideMedian / figure.KfakeMedian
		}
		figures = append(figures, figure)
	}
	return figures
}

// median is the middle value, or the mean of the two middle ones.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(values))
	middle := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[middle]
	}
	return (sorted[middle-1] + sorted[middle]) / 2
}

func (r compareReport) print(out io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	fmt.Fprintf(out, "tide dev (%d brokers, disk, fsync before ack) vs kfake (%d brokers, memory); median of %d rounds\n", r.Brokers, r.Brokers, r.Rounds)
	fmt.Fprintf(out, "topic %s, %d partitions, acks=%s, %d-byte values, %d producers, %d consumers, phases of %gs, e2e at %d records/s\n",
		r.Topic, r.Partitions, r.Acks, r.ValueBytes, r.Producers, r.Consumers, r.Seconds, r.RateTarget)
	fmt.Fprintf(out, "consume: the produced topic read from its start, again and again until the reads add up to %gs\n\n", r.ConsumeSeconds)
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(table, "figure\ttide\tkfake\ttide/kfake\t")
	for _, figure := range r.Figures {
		better, ratio := "lower is better", fmt.Sprintf("%.2f", figure.Ratio)
		switch {
		case figure.Informational:
			better, ratio = "what was measured", "-"
		case figure.HigherIsBetter:
			better = "higher is better"
		}
		fmt.Fprintf(table, "%s\t%.2f\t%.2f\t%s\t  %s\n", figure.Name, figure.TideMedian, figure.KfakeMedian, ratio, better)
	}
	return table.Flush()
}
