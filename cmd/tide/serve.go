package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/server"
)

type serveOptions struct {
	config          string
	id              int
	controllers     string
	listen          string
	kafkaListen     string
	kafkaListeners  string
	metricsListen   string
	httpListen      string
	dataDir         string
	sessionTimeout  time.Duration
	brokerHeartbeat time.Duration
	electionTimeout time.Duration
	// defaultPartitions and defaultReplicationFactor are num.partitions
	// and default.replication.factor.
	defaultPartitions        int
	defaultReplicationFactor int
	// autoCreateTopics is auto.create.topics.enable.
	autoCreateTopics bool
	logLevel         string
	logFormat        string
	sendfile         bool
	// rebalance is auto.leader.rebalance.enable and its settings.
	rebalance rebalanceOptions
	// groups are the consumer groups' settings (group_flags.go).
	groups groupOptions
	// limits are the Kafka listener's (serve_limits.go).
	limits serveLimits
	// logs are the static log settings (serve_logflags.go).
	logs logDefaults
	// groupLagMax is MetricsGroupPartitionsMax.
	groupLagMax int
}

func newServeCommand() *cobra.Command {
	var options serveOptions
	command := &cobra.Command{
		Use:   "serve",
		Short: "Run one node of a tide cluster (broker, and controller when it is a voter)",
		Long: `Runs one node of a real cluster on its sockets and disk: a broker, and a
controller of the metadata quorum when the node is one of the voters
(Kafka's combined mode). The voters run raft (etcd/raft) over their
controller listeners; a single voter is a one-node quorum.

  tide serve --id 1 --controllers 1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095 \
    --kafka-listen 127.0.0.1:9092 --data-dir /var/lib/tide/1

Kafka clients connect to --kafka-listen. Each broker registers the
address it advertises with the controller, and Metadata lists every
broker there; followers find their leaders the same way. A broker bound to
a wildcard address (0.0.0.0:9092) advertises its --kafka-listeners entry
(id@host:port, Kafka's advertised.listeners). A single node:

  tide serve --id 1 --controllers 1@127.0.0.1:9093 --kafka-listen 127.0.0.1:9092 --data-dir /tmp/tide

Flags may also come from a properties file (--config FILE), with Kafka's
names where there is one: node.id, controller.quorum.voters, listeners
(the controller listener's host:port), log.dirs, broker.session.timeout.ms,
broker.heartbeat.interval.ms, num.partitions, default.replication.factor,
auto.create.topics.enable, auto.leader.rebalance.enable,
leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage,
log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms
(every topic's defaults, below its own configs and the cluster-wide
dynamic defaults);
offsets.topic.num.partitions, offsets.topic.replication.factor,
group.initial.rebalance.delay.ms;
and tide.kafka.listen, tide.kafka.listeners. The Kafka listener's limits
too: socket.request.max.bytes, queued.max.request.bytes,
queued.max.requests, max.connections, max.connections.per.ip,
connections.max.idle.ms, fetch.max.bytes, and
tide.max.in.flight.requests.per.connection, tide.request.body.timeout.ms,
tide.max.topics.per.request, tide.max.partitions.per.request,
tide.max.decompressed.batch.bytes, tide.max.waiting.fetches
(docs/compatibility.md says what each
does at its limit). A flag given on the command line wins.

The active controller elects each partition's preferred (first) replica
back by itself (auto.leader.rebalance.enable, on by default): every
--leader-imbalance-check-interval, for each broker that has more than
--leader-imbalance-percentage of its preferred partitions led by others,
where that replica is in the ISR (docs/replication.md).

SIGTERM or SIGINT performs a controlled shutdown: the controller moves
this broker's leaderships away and fences it, then the process exits.
Followers replicate from their leaders over the Kafka protocol
(docs/compatibility.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, options)
		},
	}
	flags := command.Flags()
	flags.StringVar(&options.config, "config", "", "a properties file with the settings below")
	flags.IntVar(&options.id, "id", 0, "this node's id (node.id), at least 1")
	flags.StringVar(&options.controllers, "controllers", "", "the voters, id@host:port,... (controller.quorum.voters)")
	flags.StringVar(&options.listen, "listen", "", "the controller listener's host:port (default: this node's entry in --controllers)")
	flags.StringVar(&options.kafkaListen, "kafka-listen", "", "the Kafka listener's host:port, where clients connect (default: this node's entry in --kafka-listeners)")
	flags.StringVar(&options.kafkaListeners, "kafka-listeners", "", "every broker's Kafka address as clients reach it, id@host:port,... (default: just this node's)")
	flags.StringVar(&options.metricsListen, "metrics-listen", "", "serve Prometheus metrics at http://host:port/metrics (default: none; docs/operations.md lists them)")
	flags.StringVar(&options.httpListen, "http-listen", "", "serve the web console at http://host:port/ (default: none)")
	flags.IntVar(&options.groupLagMax, "metrics-group-partitions-max", server.DefaultMetricsGroupPartitionsMax,
		"at most this many consumer group partitions in the metrics' group lag and the console's groups page; the rest are counted as omitted")
	flags.StringVar(&options.dataDir, "data-dir", "", "where the metadata and partition logs live (log.dirs)")
	flags.DurationVar(&options.sessionTimeout, "session-timeout", 9*time.Second, "a broker silent for longer is fenced (broker.session.timeout.ms)")
	flags.DurationVar(&options.brokerHeartbeat, "heartbeat-interval", 500*time.Millisecond, "how often a broker heartbeats (broker.heartbeat.interval.ms)")
	flags.DurationVar(&options.electionTimeout, "election-timeout", time.Second, "the quorum's raft election timeout")
	flags.IntVar(&options.defaultPartitions, "num-partitions", 1, "partitions of a topic created without a count (num.partitions)")
	flags.IntVar(&options.defaultPartitions, "default-partitions", 1, "the former name of --num-partitions")
	_ = flags.MarkDeprecated("default-partitions", "use --num-partitions")
	flags.BoolVar(&options.autoCreateTopics, "auto-create-topics", true,
		"create a topic a client's Metadata request names when it does not exist, with --num-partitions and --default-replication-factor (auto.create.topics.enable)")
	flags.IntVar(&options.defaultReplicationFactor, "default-replication-factor", 1, "replicas of a topic created without a factor (default.replication.factor)")
	flags.StringVar(&options.logLevel, "log-level", "info", "debug, info (elections, ISR changes, fencing, truncations), warn or error")
	flags.StringVar(&options.logFormat, "log-format", "text", "text or json")
	flags.BoolVar(&options.sendfile, "sendfile", true, "send committed records to fetchers with sendfile (false reads them into memory, to measure the difference)")
	registerRebalanceFlags(flags, &options.rebalance, server.DefaultLeaderImbalanceCheckInterval)
	registerGroupFlags(flags, &options.groups)
	registerLimitFlags(flags, &options.limits)
	registerLogDefaultFlags(flags, &options.logs)
	return command
}

func runServe(cmd *cobra.Command, options serveOptions) error {
	if options.config != "" {
		if err := applyProperties(cmd.Flags(), options.config); err != nil {
			return usageError{err}
		}
		// The flags now hold the file's values under the command line's.
		options = reread(cmd.Flags(), options)
	}
	if err := refuseZeroLimits(cmd.Flags()); err != nil {
		return usageError{err}
	}
	if err := refuseZeroLogDefaults(cmd.Flags()); err != nil {
		return usageError{err}
	}
	if err := options.rebalance.validate(); err != nil {
		return usageError{err}
	}
	config, err := options.serverConfig(cmd)
	if err != nil {
		return usageError{err}
	}
	node, err := server.New(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return node.Run(ctx)
}

func (o serveOptions) serverConfig(cmd *cobra.Command) (server.Config, error) {
	logger, err := newLogger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil {
		return server.Config{}, err
	}
	if o.controllers == "" {
		return server.Config{}, errors.New("--controllers is required (id@host:port,...)")
	}
	controllers, err := server.ParseControllers(o.controllers)
	if err != nil {
		return server.Config{}, fmt.Errorf("--controllers: %w", err)
	}
	var kafkaListeners map[metadata.BrokerID]string
	if o.kafkaListeners != "" {
		if kafkaListeners, err = server.ParseKafkaListeners(o.kafkaListeners); err != nil {
			return server.Config{}, fmt.Errorf("--kafka-listeners: %w", err)
		}
	}
	config := server.Config{ID: metadata.BrokerID(o.id), Controllers: controllers, Listen: o.listen, DataDir: o.dataDir,
		KafkaListen: o.kafkaListen, KafkaListeners: kafkaListeners, MetricsListen: o.metricsListen, HTTPListen: o.httpListen,
		SessionTimeout: o.sessionTimeout, BrokerHeartbeat: o.brokerHeartbeat, ElectionTimeout: o.electionTimeout,
		DefaultPartitions: o.defaultPartitions, DefaultReplicationFactor: o.defaultReplicationFactor, Logger: logger,
		DisableAutoCreateTopics: !o.autoCreateTopics,
		CopyFetches:             !o.sendfile}
	config.MetricsGroupPartitionsMax = o.groupLagMax
	o.rebalance.apply(&config)
	o.logs.apply(&config)
	if err := o.groups.validate(); err != nil {
		return server.Config{}, usageError{err}
	}
	o.groups.apply(&config)
	if err := o.limits.apply(&config); err != nil {
		return server.Config{}, err
	}
	return config, config.Validate()
}

// propertyFlags maps a properties file's keys to flags; milliseconds keys
// become durations.
var propertyFlags = map[string]string{
	"node.id": "id", "controller.quorum.voters": "controllers", "listeners": "listen", "log.dirs": "data-dir",
	"broker.session.timeout.ms": "session-timeout", "broker.heartbeat.interval.ms": "heartbeat-interval",
	// Kafka's listeners name both the client and the controller listeners;
	// tide keeps the Kafka listener apart under its own keys for now.
	"tide.kafka.listen": "kafka-listen", "tide.kafka.listeners": "kafka-listeners", "tide.metrics.listen": "metrics-listen", "tide.http.listen": "http-listen",
	"num.partitions": "num-partitions", "auto.create.topics.enable": "auto-create-topics", "default.replication.factor": "default-replication-factor",
	"auto.leader.rebalance.enable":            "auto-leader-rebalance",
	"leader.imbalance.check.interval.seconds": "leader-imbalance-check-interval",
	"leader.imbalance.per.broker.percentage":  "leader-imbalance-percentage",
	"tide.metrics.group.partitions.max":       "metrics-group-partitions-max",
}

// applyProperties sets the flags not given on the command line from a
// properties file: key=value lines, # comments.
func applyProperties(flags *pflag.FlagSet, name string) error {
	file, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for number := 1; scanner.Scan(); number++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		flag, known := propertyFlags[key]
		if !known {
			flag, known = limitPropertyFlags[key]
		}
		logFlag, numeric := logDefaultProperties[key]
		if numeric {
			flag, known = logFlag, true
		}
		if !known {
			flag, known = groupPropertyFlags[key]
		}
		if !ok || !known {
			return fmt.Errorf("%s:%d: unknown setting %q (known: %s)", name, number, key, knownProperties())
		}
		if flags.Changed(flag) {
			continue
		}
		if strings.HasSuffix(key, ".ms") && !numeric {
			value += "ms"
		} else if strings.HasSuffix(key, ".seconds") {
			value += "s"
		}
		if err := flags.Set(flag, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", name, number, key, err)
		}
	}
	return scanner.Err()
}

// knownProperties lists every properties key, sorted.
func knownProperties() string {
	keys := slices.Collect(maps.Keys(propertyFlags))
	keys = append(keys, slices.Collect(maps.Keys(limitPropertyFlags))...)
	keys = append(keys, slices.Collect(maps.Keys(logDefaultProperties))...)
	keys = append(keys, slices.Collect(maps.Keys(groupPropertyFlags))...)
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func reread(flags *pflag.FlagSet, o serveOptions) serveOptions {
	o.id, _ = flags.GetInt("id")
	o.controllers, _ = flags.GetString("controllers")
	o.listen, _ = flags.GetString("listen")
	o.kafkaListen, _ = flags.GetString("kafka-listen")
	o.kafkaListeners, _ = flags.GetString("kafka-listeners")
	o.metricsListen, _ = flags.GetString("metrics-listen")
	o.httpListen, _ = flags.GetString("http-listen")
	o.groupLagMax, _ = flags.GetInt("metrics-group-partitions-max")
	o.dataDir, _ = flags.GetString("data-dir")
	o.sessionTimeout, _ = flags.GetDuration("session-timeout")
	o.brokerHeartbeat, _ = flags.GetDuration("heartbeat-interval")
	o.electionTimeout, _ = flags.GetDuration("election-timeout")
	o.defaultPartitions, _ = flags.GetInt("num-partitions")
	o.autoCreateTopics, _ = flags.GetBool("auto-create-topics")
	o.defaultReplicationFactor, _ = flags.GetInt("default-replication-factor")
	o.logLevel, _ = flags.GetString("log-level")
	o.logFormat, _ = flags.GetString("log-format")
	o.sendfile, _ = flags.GetBool("sendfile")
	o.rebalance = rereadRebalance(flags)
	o.groups = rereadGroups(flags)
	o.limits = rereadLimits(flags)
	o.logs = rereadLogDefaults(flags)
	return o
}

// rebalanceOptions are the leader rebalance's flags, on tide serve and
// tide dev alike.
type rebalanceOptions struct {
	enable     bool
	interval   time.Duration
	percentage int
}

func registerRebalanceFlags(flags *pflag.FlagSet, o *rebalanceOptions, interval time.Duration) {
	flags.BoolVar(&o.enable, "auto-leader-rebalance", true,
		"elect preferred replicas back by themselves when leadership is off balance (auto.leader.rebalance.enable)")
	flags.DurationVar(&o.interval, "leader-imbalance-check-interval", interval,
		"how often the controller checks the leader balance (leader.imbalance.check.interval.seconds)")
	flags.IntVar(&o.percentage, "leader-imbalance-percentage", controller.DefaultLeaderImbalancePercentage,
		"the share of a broker's preferred partitions led by others above which they are elected back, 1 to 100 (leader.imbalance.per.broker.percentage)")
}

func rereadRebalance(flags *pflag.FlagSet) rebalanceOptions {
	var o rebalanceOptions
	o.enable, _ = flags.GetBool("auto-leader-rebalance")
	o.interval, _ = flags.GetDuration("leader-imbalance-check-interval")
	o.percentage, _ = flags.GetInt("leader-imbalance-percentage")
	return o
}

// validate refuses what the flags cannot mean: a check interval of zero or
// less, a percentage outside 1 to 100.
func (o rebalanceOptions) validate() error {
	switch {
	case o.interval <= 0:
		return fmt.Errorf("--leader-imbalance-check-interval %s: want more than 0", o.interval)
	case o.percentage < 1 || o.percentage > 100:
		return fmt.Errorf("--leader-imbalance-percentage %d: want 1 to 100", o.percentage)
	}
	return nil
}

// apply sets the server's fields. Zeros (options not from flags) take the
// server's defaults; the zero value's enable is false, the rebalance off.
func (o rebalanceOptions) apply(config *server.Config) {
	config.NoAutoLeaderRebalance = !o.enable
	config.LeaderImbalanceCheckInterval, config.LeaderImbalancePercentage = o.interval, o.percentage
}
