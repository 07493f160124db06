package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/sim"
	"github.com/tidelog/tide/internal/wire"
)

type simOptions struct {
	seeds  int
	start  uint64
	seed   uint64
	legacy []string
	trace  string
	json   bool
	detail bool
	// without and runTicks shape every run; shrink shrinks a failure.
	without    []string
	runTicks   int64
	faultsFrom int64
	shrink     bool
	// batchedPasses has brokers take a tick's Kafka requests in one pass
	// (sim.Options.BatchedPasses).
	batchedPasses bool
	// requireEveryAPI fails a run that leaves an API key tide serves
	// unexercised.
	requireEveryAPI bool
}

func newSimCommand() *cobra.Command {
	var options simOptions
	command := &cobra.Command{
		Use:   "sim",
		Short: "Run the deterministic simulator over seeded fault schedules",
		Long: `Runs whole tide clusters (real broker code and the real metadata quorum
over in-memory disks) in one process with a virtual clock and network,
through fault schedules drawn from seeds: crashes, power losses, pauses,
network partitions, lost and delayed messages, slow disks, replaced data
disks, preferred elections, controlled shutdowns, zombies, failover chains,
and controller crashes, pauses and partitions. After every step a checker
tests that no acknowledged write is lost or duplicated, no client sees the
high watermark go back, replicas agree below it, one leader leads each
epoch, one controller decides each term, no read is taken back, and the
cluster recovers.

Exits 0 when nothing broke and 1 when something did, printing the seed, the
invariant, the trace and the command that reproduces it; --shrink then looks
for a smaller run that fails the same way. The same seed gives the same run.
--legacy switches a protocol rule off, to show the failure it prevents
(rules: ` + ruleNames() + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSim(cmd, options)
		},
	}
	flags := command.Flags()
	flags.IntVar(&options.seeds, "seeds", 100, "how many seeds to run")
	flags.Uint64Var(&options.start, "start", 1, "the first seed")
	flags.Uint64Var(&options.seed, "seed", 0, "run this one seed and print its trace")
	flags.StringSliceVar(&options.legacy, "legacy", nil, "switch these rules off")
	flags.StringVar(&options.trace, "trace", "", "write the trace of a failing (or the single) seed to this file")
	flags.BoolVar(&options.json, "json", false, "print one JSON object per seed and a JSON summary")
	flags.BoolVar(&options.detail, "detail", false, "trace every append, fetch, high watermark and proposal")
	flags.StringSliceVar(&options.without, "without", nil, "switch these kinds of fault off (kinds: "+faultKindNames()+")")
	flags.Int64Var(&options.runTicks, "run-ticks", 0, "ticks of faults before healing (default 3000)")
	flags.Int64Var(&options.faultsFrom, "faults-from", 0, "inject no fault before this tick")
	flags.BoolVar(&options.batchedPasses, "batched-passes", false, "brokers take a tick's Kafka requests in one pass and flush once, as tide serve's loop does")
	flags.BoolVar(&options.shrink, "shrink", false, "on a failure, search for a smaller run that fails the same way")
	flags.BoolVar(&options.requireEveryAPI, "require-every-api", false, "exit 1 when the seeds left an API key tide serves without a request")
	return command
}

func ruleNames() string {
	var names []string
	for _, rule := range rules.All() {
		names = append(names, string(rule))
	}
	return strings.Join(names, ", ")
}

func faultKindNames() string {
	var names []string
	for _, kind := range sim.FaultKinds() {
		names = append(names, string(kind))
	}
	return strings.Join(names, ", ")
}

// runOptions are the options every seed of a run shares.
func (o simOptions) runOptions() (sim.Options, error) {
	legacy, err := sim.ParseLegacy(o.legacy)
	if err != nil {
		return sim.Options{}, err
	}
	without, err := sim.ParseFaultKinds(o.without)
	if err != nil {
		return sim.Options{}, err
	}
	if o.runTicks < 0 || o.faultsFrom < 0 {
		return sim.Options{}, errors.New("--run-ticks and --faults-from must not be negative")
	}
	if o.seeds < 1 {
		return sim.Options{}, errors.New("--seeds must be at least 1")
	}
	return sim.Options{Legacy: legacy, Without: without, RunTicks: o.runTicks, FaultsFrom: o.faultsFrom, TraceLines: 200, Detail: o.detail,
		BatchedPasses: o.batchedPasses}, nil
}

func runSim(cmd *cobra.Command, options simOptions) error {
	template, err := options.runOptions()
	if err != nil {
		return usageError{err}
	}
	out := cmd.OutOrStdout()
	if options.seed != 0 {
		options.start, options.seeds = options.seed, 1
	}
	summary := runSeeds(options, template, out, cmd.ErrOrStderr())
	if options.seed != 0 && summary.failure == nil && !options.json {
		fmt.Fprintln(out, strings.Join(summary.last.Trace, "\n"))
	}
	if options.json {
		printJSONSummary(out, summary)
	} else {
		printSummary(out, summary)
	}
	if summary.failure != nil && options.shrink {
		shrunk := shrinkFailure(template, summary.failure, out, cmd.ErrOrStderr())
		summary.failure = &shrunk
	}
	if missing := summary.unexercised(); summary.failure == nil && options.requireEveryAPI && len(missing) > 0 {
		return fmt.Errorf("%d seeds sent no %s request through wire", summary.seeds, strings.Join(missing, ", "))
	}
	if summary.failure == nil {
		if options.trace != "" && options.seed != 0 {
			return os.WriteFile(options.trace, []byte(strings.Join(summary.last.Trace, "\n")+"\n"), 0o644)
		}
		return nil
	}
	if options.trace != "" {
		if err := os.WriteFile(options.trace, []byte(strings.Join(summary.failure.Trace, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return fmt.Errorf("seed %d broke an invariant: %s", summary.failure.Seed, summary.failure.Violation)
}

// simSummary is what a batch of seeds did.
type simSummary struct {
	seeds  int
	ticks  int64
	acked  int
	faults map[string]int
	// idempotence sums Stats.Idempotence over the seeds; apiRequests
	// Stats.APIRequests, by API name.
	idempotence map[string]int
	apiRequests map[string]int
	elapsed     time.Duration
	failure     *sim.Result
	last        sim.Result
	// offlineByDesign counts the partitions the liveness check excused.
	offlineByDesign int
	// reassignments sums Stats.Reassignments: requested, started, finished.
	reassignments [3]int
}

// runSeeds runs seeds on every core; each run is a pure function of its
// seed, so the order they finish in changes nothing. It stops at the first
// failure (the lowest failing seed among those run).
func runSeeds(options simOptions, template sim.Options, out, progress io.Writer) simSummary {
	began := time.Now()
	summary := simSummary{faults: map[string]int{}, idempotence: map[string]int{}, apiRequests: map[string]int{}}
	seeds := make(chan uint64)
	results := make(chan sim.Result)
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for seed := range seeds {
				run := template
				run.Seed = seed
				results <- sim.Run(run)
			}
		}()
	}
	stop := make(chan struct{})
	go func() {
		defer close(seeds)
		for i := 0; i < options.seeds; i++ {
			select {
			case seeds <- options.start + uint64(i):
			case <-stop:
				return
			}
		}
	}()
	go func() { workers.Wait(); close(results) }()
	lastProgress := time.Now()
	for result := range results {
		summary.seeds++
		summary.ticks += result.Stats.Ticks
		summary.acked += result.Acked
		for kind, count := range result.Stats.Faults() {
			summary.faults[kind] += count
		}
		for kind, count := range result.Stats.Idempotence() {
			summary.idempotence[kind] += count
		}
		for key, count := range result.Stats.APIRequests() {
			summary.apiRequests[kmsg.NameForKey(key)] += count
		}
		summary.offlineByDesign += result.Stats.OfflineByDesign()
		requested, started, finished := result.Stats.Reassignments()
		summary.reassignments[0] += requested
		summary.reassignments[1] += started
		summary.reassignments[2] += finished
		summary.last = result
		if options.json {
			line, _ := json.Marshal(seedJSON(result))
			fmt.Fprintln(out, string(line))
		}
		if result.Violation != nil && (summary.failure == nil || result.Seed < summary.failure.Seed) {
			copied := result
			if summary.failure == nil {
				close(stop)
			}
			summary.failure = &copied
		}
		if time.Since(lastProgress) > time.Second && !options.json && isTerminal(progress) {
			lastProgress = time.Now()
			rate := float64(summary.seeds) / time.Since(began).Seconds()
			fmt.Fprintf(progress, "\r%d/%d seeds, %.1f seeds/s   ", summary.seeds, options.seeds, rate)
		}
	}
	summary.elapsed = time.Since(began)
	if !options.json && options.seeds > 1 && isTerminal(progress) {
		fmt.Fprint(progress, "\r                                        \r")
	}
	return summary
}

// unexercised lists the API keys tide serves that no request of the
// summary's seeds went through, by name.
func (summary simSummary) unexercised() []string {
	var missing []string
	for key := range wire.ServedVersions() {
		if name := kmsg.NameForKey(key); summary.apiRequests[name] == 0 {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}

// printCounts prints a line of counts by kind, in name order.
func printCounts(out io.Writer, title string, counts map[string]int) {
	var kinds []string
	for kind := range counts {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	fmt.Fprint(out, title)
	for _, kind := range kinds {
		fmt.Fprintf(out, " %s %d", kind, counts[kind])
	}
	fmt.Fprintln(out)
}

func printSummary(out io.Writer, summary simSummary) {
	rate := float64(summary.seeds) / summary.elapsed.Seconds()
	fmt.Fprintf(out, "%d seeds in %s (%.1f seeds/s), %d virtual ticks, %d writes acknowledged\n",
		summary.seeds, summary.elapsed.Round(time.Millisecond), rate, summary.ticks, summary.acked)
	printCounts(out, "faults:", summary.faults)
	printCounts(out, "idempotence:", summary.idempotence)
	printCounts(out, "requests through wire:", summary.apiRequests)
	if missing := summary.unexercised(); len(missing) > 0 {
		fmt.Fprintf(out, "not exercised: %s\n", strings.Join(missing, " "))
	}
	fmt.Fprintf(out, "offline by design: %d partitions (every replica that held their committed records lost them)\n", summary.offlineByDesign)
	fmt.Fprintf(out, "reassignments: %d requested, %d started, %d finished\n",
		summary.reassignments[0], summary.reassignments[1], summary.reassignments[2])
	if summary.failure == nil {
		fmt.Fprintln(out, "violations: none")
		return
	}
	failure := summary.failure
	fmt.Fprintf(out, "violations: seed %d (%s)\n  %s\n\ntrace (last events):\n%s\n\nreproduce: %s\n",
		failure.Seed, failure.Shape, failure.Violation, strings.Join(failure.Trace, "\n"), failure.Options.Command())
}

// shrinkFailure searches for a smaller run that fails as the failure did,
// telling how the search goes on progress, and prints what it found.
func shrinkFailure(template sim.Options, failure *sim.Result, out, progress io.Writer) sim.Result {
	failing := template
	failing.Seed = failure.Seed
	fmt.Fprintf(progress, "shrinking seed %d (%s)\n", failure.Seed, failure.Violation.Invariant)
	_, shrunk := sim.Shrink(failing, func(tried sim.Options, result sim.Result) {
		verdict := "passes"
		if result.Violation != nil {
			verdict = "fails: " + result.Violation.Invariant
		}
		fmt.Fprintf(progress, "  %s: %s\n", strings.TrimPrefix(tried.Command(), "go run ./cmd/tide sim "), verdict)
	})
	fmt.Fprintf(out, "\nshrunk: seed %d (%s)\n  %s\n\ntrace (last events):\n%s\n\nreproduce: %s\n",
		shrunk.Seed, shrunk.Shape, shrunk.Violation, strings.Join(shrunk.Trace, "\n"), shrunk.Options.Command())
	return shrunk
}

func seedJSON(result sim.Result) map[string]any {
	entry := map[string]any{"seed": result.Seed, "shape": result.Shape, "ticks": result.Stats.Ticks, "acked": result.Acked, "hash": fmt.Sprintf("%016x", result.Hash)}
	if result.Violation != nil {
		entry["violation"] = map[string]any{"invariant": result.Violation.Invariant, "tick": result.Violation.Tick, "detail": result.Violation.Detail}
	}
	return entry
}

func printJSONSummary(out io.Writer, summary simSummary) {
	entry := map[string]any{"seeds": summary.seeds, "ticks": summary.ticks, "acked": summary.acked, "faults": summary.faults,
		"idempotence": summary.idempotence, "requests": summary.apiRequests, "offline-by-design": summary.offlineByDesign,
		"seconds": summary.elapsed.Seconds()}
	if summary.failure != nil {
		entry["failure"] = seedJSON(*summary.failure)
	}
	line, _ := json.Marshal(entry)
	fmt.Fprintln(out, string(line))
}

// isTerminal reports whether w is a terminal, where a progress line that
// rewrites itself helps; in a log it would only clutter.
func isTerminal(w io.Writer) bool {
	file, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := file.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
