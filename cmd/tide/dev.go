package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/server"
)

// Limits and defaults of tide dev.
const (
	// devBrokersMax bounds --brokers: the default port ranges, 9092.. and
	// 19092.., stay apart and below other well-known ports up to it.
	devBrokersMax = 9
	// devVotersMax is the size of the metadata quorum: the first brokers
	// up to it are voters (combined mode), the rest brokers only. Three
	// voters survive one failure; more only slow every commit.
	devVotersMax = 3
	// devReplicationFactorMax caps the default replication factor, Kafka's
	// usual 3, however many brokers run.
	devReplicationFactorMax  = 3
	devKafkaPortDefault      = 9092
	devControllerPortDefault = 19092
	devMetricsPortDefault    = 9644
	devHTTPPortDefault       = 8090
	// devReadyTimeout bounds the wait for every broker to register and be
	// unfenced; a cluster that takes longer is broken, not slow.
	devReadyTimeout = 60 * time.Second
	// devPollInterval is how often readiness is polled.
	devPollInterval = 50 * time.Millisecond
	// devShutdownTimeout bounds the brokers' controlled shutdowns on Ctrl-C.
	devShutdownTimeout = 15 * time.Second
	// devSessionTimeout and devHeartbeat are shorter than serve's 9 s and
	// 500 ms, for a cluster on one machine. The metadata reaches brokers
	// with heartbeat answers, so a topic shows on every broker sooner; and
	// when every node stops at once, the last voter standing has no quorum
	// to complete its controlled shutdown and gives up after a session
	// timeout of silence, so Ctrl-C returns sooner.
	devSessionTimeout = 3 * time.Second
	devHeartbeat      = 250 * time.Millisecond
	// devLeaderImbalanceCheckInterval is shorter than Kafka's 300 s, so
	// that after a restart from --dir leadership spreads over the brokers
	// again within seconds rather than minutes.
	devLeaderImbalanceCheckInterval = 10 * time.Second
)

type devOptions struct {
	brokers        int
	kafkaPort      int
	controllerPort int
	// metricsPort and httpPort are broker 1's metrics and web console
	// ports, the next brokers' after them; 0 picks free ones, -1 serves
	// none.
	metricsPort int
	httpPort    int
	dir         string
	keep        bool
	verbose     bool
	logLevel    string
	logFormat   string
	topics      devTopicDefaults
	rebalance   rebalanceOptions
	// logs are the static log settings of every broker (serve_logflags.go).
	logs   logDefaults
	groups groupOptions
	// brokersGiven says --brokers was on the command line: a restart from
	// --dir otherwise takes the count the directory holds.
	brokersGiven bool
}

func newDevCommand() *cobra.Command {
	var options devOptions
	command := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of several brokers in this one process",
		Long: `Runs a cluster of --brokers nodes (default 3) in one process, on
127.0.0.1, with real TCP between them: broker i serves Kafka on
--kafka-port+i-1 (so the bootstrap is 127.0.0.1:9092) and its controller
listener on --controller-port+i-1. The first three brokers are the voters
of the metadata quorum (Kafka's combined mode). --kafka-port 0 picks free
ports for every listener, and prints them.

  tide dev
  tide topic create orders --partitions 3
  echo hello | tide produce orders
  tide consume orders --exit-at-end

The data lives in a new temporary directory, removed when the cluster
stops cleanly (--keep keeps it; a failed run keeps it to look at): --dir
DIR runs the cluster from DIR (node i in DIR/node-i), keeps it, and starts
it again from there. Topics created without a replication factor get min(3, brokers)
(--default-replication-factor), and a client naming a topic that does not
exist creates it (--auto-create-topics, with --num-partitions):
followers replicate from their leaders over TCP with Kafka's own Fetch
requests, and an acks=all produce is answered once every in-sync replica
has the records on its disk.

Each broker serves Prometheus metrics on --metrics-port+i-1 (default 9644,
http://127.0.0.1:9644/metrics for broker 1; docs/operations.md lists
them) and a web console on --http-port+i-1 (default 8090,
http://127.0.0.1:8090/ for broker 1): brokers, topics, each partition's
replicas and offsets drawn, live rates, the seed scenarios step by step.
-1 serves none.

The controller elects each partition's preferred replica back by itself
(auto.leader.rebalance.enable, as tide serve), checking every 10 s rather
than Kafka's 300 s, so that after a restart from --dir leadership spreads
over the brokers again without tide topic elect-preferred.

Ctrl-C (or SIGTERM) stops every broker with a controlled shutdown; a
second Ctrl-C exits at once.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			options.brokersGiven = cmd.Flags().Changed("brokers")
			if err := refuseZeroLogDefaults(cmd.Flags()); err != nil {
				return usageError{err}
			}
			ctx, stop := interruptible(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			return runDev(ctx, options, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	flags := command.Flags()
	flags.IntVar(&options.brokers, "brokers", 3, fmt.Sprintf("how many brokers, 1 to %d", devBrokersMax))
	flags.IntVar(&options.kafkaPort, "kafka-port", devKafkaPortDefault, "broker 1's Kafka port, the next brokers' the ports after it; 0 picks free ports for every listener")
	flags.IntVar(&options.controllerPort, "controller-port", devControllerPortDefault, "broker 1's controller listener port, the next brokers' the ports after it; 0 picks free ones")
	flags.IntVar(&options.metricsPort, "metrics-port", devMetricsPortDefault, "broker 1's Prometheus metrics port (http://127.0.0.1:PORT/metrics), the next brokers' the ports after it; 0 picks free ones, -1 serves none")
	flags.IntVar(&options.httpPort, "http-port", devHTTPPortDefault, "broker 1's web console port (http://127.0.0.1:PORT/), the next brokers' the ports after it; 0 picks free ones, -1 serves none")
	flags.StringVar(&options.dir, "dir", "", "the data directory, created or reused (default: a new temporary directory)")
	flags.BoolVar(&options.keep, "keep", false, "keep the temporary data directory on exit (a --dir is always kept)")
	flags.BoolVar(&options.verbose, "verbose", false, "log at info level: elections, ISR changes, fencing, truncations (--log-level info)")
	flags.StringVar(&options.logLevel, "log-level", "warn", "debug, info, warn or error")
	flags.StringVar(&options.logFormat, "log-format", "text", "text or json")
	flags.BoolVar(&options.topics.autoCreate, "auto-create-topics", true,
		"create a topic a client's Metadata request names when it does not exist (auto.create.topics.enable)")
	flags.IntVar(&options.topics.partitions, "num-partitions", 1, "partitions of a topic created without a count (num.partitions)")
	flags.IntVar(&options.topics.replicationFactor, "default-replication-factor", 0,
		"replicas of a topic created without a factor (default.replication.factor; 0: min(3, brokers))")
	registerRebalanceFlags(flags, &options.rebalance, devLeaderImbalanceCheckInterval)
	registerLogDefaultFlags(flags, &options.logs)
	registerGroupFlags(flags, &options.groups)
	return command
}

// interruptible returns a context that the first SIGINT or SIGTERM cancels;
// a second one exits the process at once with status 1, for a shutdown
// that hangs. The returned function stops listening.
func interruptible(parent context.Context, errOut io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	finished := make(chan struct{})
	go func() {
		select {
		case <-signals:
		case <-finished:
			return
		}
		fmt.Fprintln(errOut, "tide dev: stopping every broker (controlled shutdown); interrupt again to exit at once")
		cancel()
		select {
		case <-signals:
			fmt.Fprintln(errOut, "tide: interrupted again; exiting without waiting for the brokers")
			os.Exit(1)
		case <-finished:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(finished)
		cancel()
	}
}

func (o devOptions) validate() error {
	if o.brokers < 1 || o.brokers > devBrokersMax {
		return fmt.Errorf("--brokers %d: want 1 to %d", o.brokers, devBrokersMax)
	}
	if err := o.rebalance.validate(); err != nil {
		return err
	}
	if err := o.logs.validate(); err != nil {
		return err
	}
	if err := o.groups.validate(); err != nil {
		return err
	}
	return o.validatePorts()
}

// runDev runs the cluster until ctx ends: it prints the layout, then
// "ready" once every broker is registered and unfenced, and on the end of
// ctx stops every broker together and waits for them.
func runDev(ctx context.Context, options devOptions, out, errOut io.Writer) error {
	if options.dir != "" {
		// The voters are the first brokers: another count would change
		// the quorum the metadata log was written by.
		existing := existingBrokers(options.dir)
		switch {
		case existing > 0 && !options.brokersGiven:
			options.brokers = existing
		case existing > 0 && existing != options.brokers:
			return usageError{fmt.Errorf("--dir %s holds a cluster of %d brokers: leave out --brokers, or give --brokers %d", options.dir, existing, existing)}
		}
	}
	if err := options.validate(); err != nil {
		return usageError{err}
	}
	layout, err := planDev(options)
	if err != nil {
		return err
	}
	layout.rebalance = options.rebalance
	layout.removeOnExit = options.dir == "" && !options.keep
	layout.logs = options.logs
	layout.groups = options.groups
	if layout.dir, err = devDataDir(options.dir); err != nil {
		layout.closeListeners()
		return err
	}
	logger, err := devLogger(errOut, options)
	if err != nil {
		layout.closeListeners()
		return err
	}
	nodes, err := layout.newNodes(logger)
	if err != nil {
		return err
	}
	layout.printBanner(out)
	return runNodes(ctx, layout, nodes, out)
}

// existingBrokers counts the node directories DIR/node-1, node-2, … that
// a previous run left.
func existingBrokers(dir string) int {
	count := 0
	for ; count < devBrokersMax; count++ {
		if _, err := os.Stat(filepath.Join(dir, nodeDirName(count+1))); err != nil {
			break
		}
	}
	return count
}

func nodeDirName(id int) string { return "node-" + strconv.Itoa(id) }

func devDataDir(dir string) (string, error) {
	if dir == "" {
		created, err := os.MkdirTemp("", "tide-dev-*")
		if err != nil {
			return "", fmt.Errorf("data directory: %w", err)
		}
		return created, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--dir: %w", err)
	}
	return dir, nil
}

func devLogger(errOut io.Writer, options devOptions) (*slog.Logger, error) {
	level := options.logLevel
	if options.verbose {
		level = "info"
	}
	return newLogger(errOut, level, options.logFormat)
}

// devLayout is where a dev cluster's brokers listen and keep their data.
// Brokers are numbered 1..len(kafka); index i holds broker i+1.
type devLayout struct {
	dir string
	// removeOnExit says dir is a temporary directory of this run, to be
	// removed after a clean stop (no --dir, no --keep).
	removeOnExit bool
	// kafka and controller are each broker's Kafka and controller
	// listener addresses.
	kafka      []string
	controller []string
	// metrics and http are each broker's metrics and web console
	// listener addresses, none when their port is -1; metricsListeners
	// and httpListeners the bound listeners.
	metrics, http                   []string
	metricsListeners, httpListeners []net.Listener
	// listeners are the bound listeners, Kafka's then the controllers',
	// handed to the nodes so that no other process takes a port between
	// the check and the start.
	listeners []net.Listener
	// rebalance is every node's leader rebalance.
	rebalance rebalanceOptions
	// groups are every node's consumer group settings.
	groups groupOptions
	// topics are the topic defaults the nodes get (--auto-create-topics,
	// --num-partitions, --default-replication-factor).
	topics devTopicDefaults
	// logs are every node's static log settings (--log-retention-ms, ...).
	logs logDefaults
}

// devTopicDefaults are auto.create.topics.enable, num.partitions and
// default.replication.factor; a replication factor of 0 means min(3,
// brokers).
type devTopicDefaults struct {
	autoCreate        bool
	partitions        int
	replicationFactor int
}

// devAddress is broker index's address in the range from first; a first
// of 0 asks for a free port.
func devAddress(first, index int) string {
	port := 0
	if first != 0 {
		port = first + index
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// reserveAddresses binds every address; on an error it releases those it
// bound.
func reserveAddresses(addresses []string) ([]net.Listener, error) {
	var listeners []net.Listener
	for _, address := range addresses {
		l, err := net.Listen("tcp", address)
		if err != nil {
			for _, bound := range listeners {
				bound.Close()
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("%s is in use (another tide dev or Kafka?); choose other ports with --kafka-port, --controller-port, --metrics-port and --http-port, or 0 for free ones", address)
			}
			return nil, err
		}
		listeners = append(listeners, l)
	}
	return listeners, nil
}

func (l devLayout) brokers() int { return len(l.kafka) }

// replicationFactor is --default-replication-factor, or min(3, brokers).
func (l devLayout) replicationFactor() int {
	if l.topics.replicationFactor > 0 {
		return l.topics.replicationFactor
	}
	return min(devReplicationFactorMax, l.brokers())
}

// configs are the nodes' configurations: the first devVotersMax brokers
// are voters, and topics default to min(3, brokers) replicas.
func (l devLayout) configs(logger *slog.Logger) []server.Config {
	voters := map[metadata.BrokerID]string{}
	listeners := map[metadata.BrokerID]string{}
	for i := range l.brokers() {
		id := metadata.BrokerID(i + 1)
		if i < devVotersMax {
			voters[id] = l.controller[i]
		}
		listeners[id] = l.kafka[i]
	}
	configs := make([]server.Config, l.brokers())
	for i := range configs {
		// Each node gets its own maps: nothing is shared between nodes
		// but the logger, which is safe for concurrent use.
		configs[i] = server.Config{ID: metadata.BrokerID(i + 1), Controllers: maps.Clone(voters), Listen: l.controller[i],
			KafkaListen: l.kafka[i], KafkaListener: l.listeners[i], ControllerListener: l.listeners[l.brokers()+i],
			DataDir: filepath.Join(l.dir, nodeDirName(i+1)), KafkaListeners: maps.Clone(listeners),
			SessionTimeout: devSessionTimeout, BrokerHeartbeat: devHeartbeat,
			DefaultPartitions: l.topics.partitions, DefaultReplicationFactor: l.replicationFactor(),
			DisableAutoCreateTopics: !l.topics.autoCreate, Logger: logger}
		if len(l.metrics) > 0 {
			configs[i].MetricsListen, configs[i].MetricsListener = l.metrics[i], l.metricsListeners[i]
		}
		if len(l.http) > 0 {
			configs[i].HTTPListen, configs[i].HTTPListener = l.http[i], l.httpListeners[i]
		}
		l.rebalance.apply(&configs[i])
		l.logs.apply(&configs[i])
		l.groups.apply(&configs[i])
	}
	return configs
}

// newNodes opens every node. If one fails, those opened hold listeners
// and storage that only Run releases: they are run with a context already
// ended, which ends them without a controller to answer (bounded by the
// session timeout).
func (l devLayout) newNodes(logger *slog.Logger) ([]*server.Server, error) {
	var nodes []*server.Server
	configs := l.configs(logger)
	for i, config := range configs {
		node, err := server.New(config)
		if err != nil {
			for _, later := range configs[i+1:] {
				later.KafkaListener.Close()
				later.ControllerListener.Close()
				for _, optional := range []net.Listener{later.MetricsListener, later.HTTPListener} {
					if optional != nil {
						optional.Close()
					}
				}
			}
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			for _, opened := range nodes {
				opened.Run(ended)
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("broker %d: %w (another tide dev or Kafka?)", i+1, err)
			}
			return nil, fmt.Errorf("broker %d: %w", i+1, err)
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

func (l devLayout) printBanner(out io.Writer) {
	var voters []string
	for id := 1; id <= min(devVotersMax, l.brokers()); id++ {
		voters = append(voters, strconv.Itoa(id))
	}
	fmt.Fprintf(out, "tide dev: %d brokers on 127.0.0.1; voters of the metadata quorum: %s\n", l.brokers(), strings.Join(voters, ", "))
	for i := range l.brokers() {
		web := ""
		if len(l.metrics) > 0 {
			web += ", metrics http://" + l.metrics[i] + "/metrics"
		}
		if len(l.http) > 0 {
			web += ", console http://" + l.http[i] + "/"
		}
		fmt.Fprintf(out, "  broker %d: kafka %s, controller %s%s\n", i+1, l.kafka[i], l.controller[i], web)
	}
	fmt.Fprintf(out, "bootstrap: %s\n", l.kafka[0])
	fmt.Fprintf(out, "default replication factor: %d\n", l.replicationFactor())
	if l.topics.autoCreate {
		fmt.Fprintf(out, "auto-create topics: on, %d partitions (--auto-create-topics=false turns it off)\n", l.topics.partitions)
	}
	if l.removeOnExit {
		fmt.Fprintf(out, "data: %s (a new temporary directory, removed on a clean exit; --keep keeps it)\n", l.dir)
		return
	}
	fmt.Fprintf(out, "data: %s (kept on exit; tide dev --dir %s starts this cluster again)\n", l.dir, l.dir)
}

// runNodes runs every node until ctx ends or one stops on its own, then
// cancels them all together (each performs its controlled shutdown) and
// waits for all.
func runNodes(ctx context.Context, layout devLayout, nodes []*server.Server, out io.Writer) error {
	nodesCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var running sync.WaitGroup
	errs := make([]error, len(nodes))
	// exited closes when the first node returns: before the end of ctx
	// that is a failure, and the cluster stops.
	exited := make(chan struct{})
	var first sync.Once
	for i, node := range nodes {
		running.Go(func() {
			if err := node.Run(nodesCtx); err != nil {
				errs[i] = fmt.Errorf("broker %d: %w", i+1, err)
			}
			first.Do(func() { close(exited) })
		})
	}
	started := time.Now()
	failed := waitReady(ctx, layout, exited)
	if failed == nil && ctx.Err() == nil {
		fmt.Fprintf(out, "ready in %s: every broker registered and unfenced\n", time.Since(started).Round(10*time.Millisecond))
		select {
		case <-ctx.Done():
		case <-exited:
			failed = errors.New("a broker stopped on its own")
		}
	}
	if failed == nil {
		stopBrokers(nodes, exited)
	}
	cancel()
	running.Wait()
	err := errors.Join(append([]error{failed}, errs...)...)
	fmt.Fprintln(out, layout.leaveData(err == nil))
	return err
}

// leaveData removes a temporary data directory after a clean stop and says
// where the data is, or that it is gone. A failed run keeps its data to
// look at, as --keep and --dir do.
func (l devLayout) leaveData(clean bool) string {
	if !l.removeOnExit || !clean {
		return fmt.Sprintf("stopped; the data stays in %s (tide dev --dir %s starts it again)", l.dir, l.dir)
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Sprintf("stopped; removing the temporary data directory %s failed: %v", l.dir, err)
	}
	return fmt.Sprintf("stopped; removed the temporary data directory %s (--keep keeps it)", l.dir)
}

// stopBrokers runs every broker's controlled shutdown while every
// controller still runs, and waits until all completed (or one node
// stopped, or devShutdownTimeout passed): stopping the nodes all at once
// would take the quorum away from the last brokers' shutdowns.
func stopBrokers(nodes []*server.Server, exited <-chan struct{}) {
	for _, node := range nodes {
		node.ShutdownBroker()
	}
	timeout := time.NewTimer(devShutdownTimeout)
	defer timeout.Stop()
	for _, node := range nodes {
		select {
		case <-node.BrokerDone():
		case <-exited:
			return
		case <-timeout.C:
			return
		}
	}
}

// waitReady polls until every broker is ready or ctx ends (nil), a node
// stops, or the timeout passes.
func waitReady(ctx context.Context, layout devLayout, exited <-chan struct{}) error {
	deadline := time.NewTimer(devReadyTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(devPollInterval)
	defer poll.Stop()
	for !layout.ready(ctx) {
		select {
		case <-ctx.Done():
			return nil
		case <-exited:
			return errors.New("a broker stopped before the cluster was ready")
		case <-deadline.C:
			return fmt.Errorf("the cluster was not ready within %s", devReadyTimeout)
		case <-poll.C:
		}
	}
	return nil
}

// ready says whether every node reports its own broker registered and
// unfenced, and every broker unfenced in its metadata, so that Metadata
// from any of them lists all.
func (l devLayout) ready(ctx context.Context) bool {
	for _, address := range l.controller {
		status, err := devStatus(ctx, address)
		if err != nil || status.BrokerOffset < 0 || status.Fenced {
			return false
		}
		unfenced := 0
		for _, broker := range status.Brokers {
			if !broker.Fenced {
				unfenced++
			}
		}
		if unfenced != l.brokers() {
			return false
		}
	}
	return true
}

func devStatus(ctx context.Context, address string) (server.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	client, err := server.Dial(ctx, address)
	if err != nil {
		return server.Status{}, err
	}
	defer client.Close()
	return client.Status(ctx)
}
