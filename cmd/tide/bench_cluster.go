package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kfake"
)

const bytesPerGiB = 1 << 30

// benchCluster is a cluster a bench run started in its own process: a
// tide dev cluster or franz-go's kfake. stop ends it and removes its data.
type benchCluster struct {
	name      string
	bootstrap string
	stop      func() error
}

// startBenchCluster starts the --dev cluster when one is asked for and
// points the load at it; without --dev it answers nil and the load keeps
// its --bootstrap.
func (l *benchLoad) startBenchCluster(ctx context.Context, errOut io.Writer) (*benchCluster, error) {
	if l.devBrokers == 0 {
		return nil, nil
	}
	cluster, err := startDevCluster(ctx, l.devBrokers, errOut)
	if err != nil {
		return nil, fmt.Errorf("--dev %d: %w", l.devBrokers, err)
	}
	l.bootstrap = cluster.bootstrap
	return cluster, nil
}

// startDevCluster runs a tide dev cluster of brokers nodes in this
// process, as tide dev does with its defaults but on free ports, no
// metrics or console listeners, errors only on errOut and a new
// temporary directory; it answers once every broker is ready.
func startDevCluster(ctx context.Context, brokers int, errOut io.Writer) (*benchCluster, error) {
	options := devOptions{brokers: brokers, metricsPort: -1, httpPort: -1, topics: devTopicDefaults{autoCreate: true, partitions: 1}}
	registerRebalanceFlags(pflag.NewFlagSet("bench", pflag.ContinueOnError), &options.rebalance, devLeaderImbalanceCheckInterval)
	if err := options.validate(); err != nil {
		return nil, err
	}
	layout, err := planDev(options)
	if err != nil {
		return nil, err
	}
	layout.rebalance, layout.removeOnExit = options.rebalance, true
	if layout.dir, err = os.MkdirTemp("", "tide-bench-*"); err != nil {
		layout.closeListeners()
		return nil, err
	}
	logger, err := newLogger(errOut, "error", "text")
	if err != nil {
		layout.closeListeners()
		return nil, err
	}
	nodes, err := layout.newNodes(logger)
	if err != nil {
		return nil, err
	}
	running, cancel := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	go func() { finished <- runNodes(running, layout, nodes, io.Discard) }()
	stop := func() error {
		cancel()
		return <-finished
	}
	if err := awaitDevReady(ctx, layout, finished); err != nil {
		return nil, errors.Join(err, stop())
	}
	return &benchCluster{name: fmt.Sprintf("tide dev, %d brokers", brokers), bootstrap: strings.Join(layout.kafka, ","), stop: stop}, nil
}

// awaitDevReady polls until every broker is ready, ctx ends, the cluster
// stops (its error read from finished is handed back) or a timeout passes.
func awaitDevReady(ctx context.Context, layout devLayout, finished chan error) error {
	deadline := time.Now().Add(devReadyTimeout)
	for !layout.ready(ctx) {
		select {
		case err := <-finished:
			finished <- err // for stop, which reads it again
			return fmt.Errorf("the cluster stopped before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(devPollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster was not ready within %s", devReadyTimeout)
		}
	}
	return nil
}

// startKfake runs franz-go's kfake, an in-memory fake Kafka (no disk, no
// replication: one copy of each partition), with brokers brokers on free
// ports of 127.0.0.1.
func startKfake(brokers int) (*benchCluster, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.DefaultNumPartitions(1))
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	return &benchCluster{name: fmt.Sprintf("kfake, %d brokers", brokers), bootstrap: strings.Join(cluster.ListenAddrs(), ","),
		stop: func() error { cluster.Close(); return nil }}, nil
}

// processCPU is the CPU time this process has used so far, user and
// system, every thread: with the cluster in the process, the brokers' and
// the client's together, which one process cannot tell apart.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0 // Linux answers RUSAGE_SELF always; 0 reads as no figure
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// cpuFigure is the CPU a phase cost the whole process when the cluster
// runs in it: brokers and client together, per GiB of values.
type cpuFigure struct {
	ProcessCPUSeconds       float64 `json:"process_cpu_seconds"`
	ProcessCPUSecondsPerGiB float64 `json:"process_cpu_seconds_per_gib"`
}

func newCPUFigure(used time.Duration, valueBytes int64) *cpuFigure {
	figure := &cpuFigure{ProcessCPUSeconds: used.Seconds()}
	if valueBytes > 0 {
		figure.ProcessCPUSecondsPerGiB = used.Seconds() / (float64(valueBytes) / bytesPerGiB)
	}
	return figure
}

// benchRunReport is what a bench mode prints: a table, or one JSON object.
type benchRunReport interface {
	print(out io.Writer, asJSON bool) error
}

// endBenchRun ends a bench mode's run the same way for every mode: it
// stops the dev cluster the run started (nil: none), prints the report
// (nil: the run failed before it had one) and names the mode in the
// error.
func endBenchRun(cmd *cobra.Command, mode string, asJSON bool, cluster *benchCluster, report benchRunReport, err error) error {
	if cluster != nil {
		if stopErr := cluster.stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the dev cluster: %w", stopErr))
		}
	}
	if report != nil {
		if printErr := report.print(cmd.OutOrStdout(), asJSON); printErr != nil && err == nil {
			err = printErr
		}
	}
	if err != nil {
		return fmt.Errorf("bench %s: %w", mode, err)
	}
	return nil
}
