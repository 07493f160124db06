package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is one chaos run.
type Config struct {
	// Binary is the tide executable the nodes run; BinaryEnv is added to
	// their environment.
	Binary    string
	BinaryEnv []string
	Nodes     int
	Topic     string
	// Partitions of the topic, created with replication factor 3 (or the
	// node count if smaller) and min.insync.replicas 2.
	Partitions int
	// Acks is "all" (idempotent, the default) or "1" (the leader alone,
	// idempotence off: loss becomes possible, to show the checker finds
	// it).
	Acks string
	// Duration is how long faults are injected; the healing and settling
	// come after it.
	Duration time.Duration
	Seed     uint64
	// Faults are the kinds to draw from (FaultKinds by default).
	Faults             []string
	QuietMin, QuietMax time.Duration
	SessionTimeout     time.Duration
	// Producers write RatePerSecond records a second between them.
	Producers, RatePerSecond int
	// BasePort, when set, gives the nodes ports from it upwards
	// (controller, Kafka, for node 1, 2, ...).
	BasePort int
	// Dir is where the run's directory is made (the system's temporary
	// directory when empty); Keep keeps it afterwards.
	Dir  string
	Keep bool
	// Out gets progress lines.
	Out io.Writer
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	defaults := Config{Nodes: 3, Topic: "chaos", Partitions: 3, Acks: "all", Duration: 60 * time.Second, Faults: FaultKinds,
		QuietMin: 3 * time.Second, QuietMax: 6 * time.Second, SessionTimeout: 3 * time.Second, Producers: 2, RatePerSecond: 400, Out: io.Discard}
	if c.Nodes == 0 {
		c.Nodes = defaults.Nodes
	}
	if c.Topic == "" {
		c.Topic = defaults.Topic
	}
	if c.Partitions == 0 {
		c.Partitions = defaults.Partitions
	}
	if c.Acks == "" {
		c.Acks = defaults.Acks
	}
	if c.Duration == 0 {
		c.Duration = defaults.Duration
	}
	if c.Faults == nil { // an empty list is no faults
		c.Faults = defaults.Faults
	}
	if c.QuietMax == 0 {
		c.QuietMin, c.QuietMax = defaults.QuietMin, defaults.QuietMax
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = defaults.SessionTimeout
	}
	if c.Producers == 0 {
		c.Producers = defaults.Producers
	}
	if c.RatePerSecond == 0 {
		c.RatePerSecond = defaults.RatePerSecond
	}
	if c.Out == nil {
		c.Out = defaults.Out
	}
	return c
}

// Validate refuses what a run cannot do.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("no tide binary to run")
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("%d nodes: want 1 to 9", c.Nodes)
	case c.Partitions < 1 || c.Partitions > 100:
		return fmt.Errorf("%d partitions: want 1 to 100", c.Partitions)
	case c.Acks != "all" && c.Acks != "1":
		return fmt.Errorf("acks %q: want all (or -1) or 1", c.Acks)
	case c.Duration < 0 || c.QuietMin < 0 || c.QuietMax < c.QuietMin:
		return errors.New("durations must not be negative, and the quiet period's maximum not below its minimum")
	case c.Producers < 1 || c.RatePerSecond < c.Producers:
		return fmt.Errorf("%d producers at %d records a second: want at least one, and one record a second each", c.Producers, c.RatePerSecond)
	}
	for _, kind := range c.Faults {
		if !slices.Contains(AllFaultKinds, kind) {
			return fmt.Errorf("unknown fault kind %q (known: %v)", kind, AllFaultKinds)
		}
	}
	return nil
}

// RecoveryWindow is how long the producers go on after the last fault
// healed: a cluster that acknowledges nothing in it has not recovered
// (restarting two nodes takes a raft election, the brokers' registration
// and the partitions' elections: a few seconds).
const RecoveryWindow = 8 * time.Second

// Report is a run's outcome.
type Report struct {
	Config  Config  `json:"-"`
	History History `json:"-"`
	Result  Result  `json:"result"`
	// Skipped are fault kinds left out, with why.
	Skipped []string `json:"skipped_faults"`
	// Recovered counts acknowledgements after the last fault healed.
	Recovered int    `json:"acknowledged_after_healing"`
	Dir       string `json:"dir"`
	// Seconds are acknowledgements per second of the run.
	Seconds []int `json:"acknowledged_per_second"`
	// SVG and HistoryFile are where the caller wrote the timeline and the
	// history, if it did.
	SVG, HistoryFile string
}

// Run starts the cluster, runs the workload under faults for
// config.Duration, heals, settles, stops the nodes and checks the
// history. An error means the run itself could not be carried out; the
// verdict is in Report.Result.
func Run(ctx context.Context, config Config) (report Report, err error) {
	config = config.WithDefaults()
	if err := config.Validate(); err != nil {
		return Report{}, err
	}
	report.Config = config
	root, err := os.MkdirTemp(config.Dir, "tide-chaos-")
	if err != nil {
		return report, err
	}
	report.Dir = root
	if err := os.Chmod(root, 0o755); err != nil {
		return report, err
	}
	defer func() {
		// A failed run keeps its directory (the nodes' logs say why); an
		// interrupted one is removed like a finished one.
		if !config.Keep && (err == nil || ctx.Err() != nil) {
			os.RemoveAll(root)
		}
	}()
	var firewall *firewall
	kinds := slices.Clone(config.Faults)
	if slices.ContainsFunc(kinds, needsFirewall) {
		var why string
		if firewall, why = newFirewall(config.Out); firewall == nil {
			kinds = slices.DeleteFunc(kinds, needsFirewall)
			report.Skipped = append(report.Skipped, FaultIsolate+" and "+FaultControllerCut+": "+why)
			fmt.Fprintf(config.Out, "skipping %s and %s: %s\n", FaultIsolate, FaultControllerCut, why)
		} else {
			// Whatever happens below, a panic included, no rule stays.
			defer func() {
				if removeErr := firewall.removeAll(); removeErr != nil {
					fmt.Fprintf(config.Out, "removing the iptables rules: %v\n", removeErr)
				}
			}()
		}
	}
	c, err := startCluster(config, root, firewall)
	if err != nil {
		return report, err
	}
	defer c.stopAll(config.Out)
	r := &recorder{began: time.Now(), history: History{Topic: config.Topic, Partitions: int32(config.Partitions), Idempotent: config.Acks == "all"}}
	if err := prepareTopic(ctx, config, c); err != nil {
		return report, err
	}
	fmt.Fprintf(config.Out, "%d nodes up, topic %s (%d partitions, replication factor %d), data under %s; faults %v for %s, seed %d\n",
		config.Nodes, config.Topic, config.Partitions, min(3, config.Nodes), root, kinds, config.Duration, config.Seed)
	r.began = time.Now()
	if err := runWorkload(ctx, config, c, r, kinds, &report); err != nil {
		return report, err
	}
	if ctx.Err() != nil {
		return report, fmt.Errorf("interrupted: the faults were healed, the nodes stopped and the iptables rules removed")
	}
	c.stopAll(config.Out)
	r.history.Replicas = readReplicas(config, c, r.history.Final)
	report.History = r.history
	report.Result = Check(r.history)
	report.Seconds = acknowledgedPerSecond(r.history)
	return report, nil
}

// runWorkload runs producers, a consumer and the poller under faults for
// the configured duration, then heals everything, checks that writes are
// acknowledged again, stops the producers, waits for the cluster to
// settle and reads every partition back.
func runWorkload(ctx context.Context, config Config, c *cluster, r *recorder, kinds []string, report *Report) error {
	seeds := c.kafkaAddresses()
	workload, stopWorkload := context.WithCancel(ctx)
	defer stopWorkload()
	consumed, err := startConsumer(workload, config, seeds, r)
	if err != nil {
		return err
	}
	polled, err := startPoller(workload, config, seeds, r)
	if err != nil {
		return err
	}
	producing, stopProducing := context.WithCancel(workload)
	defer stopProducing()
	var producers []*producer
	for i := range config.Producers {
		p, err := startProducer(producing, config, seeds, "p"+strconv.Itoa(i), r)
		if err != nil {
			return err
		}
		producers = append(producers, p)
	}
	if len(kinds) > 0 {
		faulting, stopFaults := context.WithTimeout(ctx, config.Duration)
		in := &injector{config: config, cluster: c, random: rand.New(rand.NewPCG(config.Seed, 0x7469646563686173)), recorder: r, out: config.Out, kinds: kinds}
		in.run(faulting, ctx)
		stopFaults()
	} else {
		sleep(ctx, config.Duration)
	}
	healed := r.ms()
	r.add(func(h *History) { h.HealedMs = healed })
	fmt.Fprintf(config.Out, "%6.1fs faults over; producing on for %s\n", float64(healed)/1000, RecoveryWindow)
	sleep(ctx, RecoveryWindow)
	report.Recovered = r.acknowledgedSince(healed)
	stopProducing()
	for _, p := range producers {
		p.stop(30 * time.Second)
	}
	r.history.Settled = waitSettled(ctx, config, c, 60*time.Second)
	if !r.history.Settled && ctx.Err() == nil {
		fmt.Fprintf(config.Out, "the cluster did not settle within 60 s: replicas are compared without requiring each to be complete\n")
	}
	final := readFinal(ctx, config, seeds)
	sleep(ctx, time.Second) // the consumer catches up with what it was reading
	stopWorkload()
	<-consumed
	<-polled
	r.add(func(h *History) { h.Final = final })
	return nil
}

// prepareTopic waits for every broker to be unfenced and creates the
// topic.
func prepareTopic(ctx context.Context, config Config, c *cluster) error {
	deadline := time.Now().Add(60 * time.Second)
	for !allUnfenced(ctx, c) {
		if time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("the %d nodes did not all register within 60 s (their logs: %s/node-*.log)", config.Nodes, filepath.Dir(c.nodes[0].dir))
		}
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(c.kafkaAddresses()...))
	if err != nil {
		return err
	}
	defer client.Close()
	request := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = config.Topic, int32(config.Partitions), int16(min(3, config.Nodes))
	minInsync := kmsg.NewCreateTopicsRequestTopicConfig()
	minInsync.Name, minInsync.Value = "min.insync.replicas", kmsg.StringPtr(strconv.Itoa(min(2, config.Nodes)))
	topic.Configs = append(topic.Configs, minInsync)
	request.Topics, request.TimeoutMillis = append(request.Topics, topic), 10000
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", config.Topic, err)
	}
	if code := response.Topics[0].ErrorCode; code != 0 {
		return fmt.Errorf("creating topic %s: %w", config.Topic, kerr.ErrorForCode(code))
	}
	return nil
}

func allUnfenced(ctx context.Context, c *cluster) bool {
	for _, n := range c.nodes {
		status, err := c.status(ctx, n.id)
		if err != nil || len(status.Brokers) != len(c.nodes) {
			return false
		}
		for _, b := range status.Brokers {
			if b.Fenced {
				return false
			}
		}
	}
	return true
}
