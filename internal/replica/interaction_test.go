package replica

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// TestInteraction runs the replication scripts in testdata/: a cluster of
// replicas of one partition, driven one message at a time, in the style of
// etcd/raft's interaction tests. Each file opens with what it shows.
//
// Commands:
//
//	cluster brokers=N [min-isr=N] [flush=always|never] [auto-sync=false] [legacy=RULE,...]
//	elect leader=N isr=1,2 [deliver=all|none|1,2] [unclean]   new leader epoch from the controller
//	produce broker=N [count=M] [acks=all|1|0]
//	deliver [from=N|controller] [to=N|controller] [count=N] [max-bytes=N] [newest]
//	drop [from=N|controller] [to=N|controller] [count=N]
//	stabilize                                       deliver until only idle fetches are in flight
//	tick [n=N]
//	crash broker=N | restart broker=N | sync broker=N
//	metadata broker=N                               the controller resends the partition state
//	list-offsets broker=N | consume broker=N from=O
//	state                                           the replicas as the seeds draw them
//	check                                           the verdict
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *cluster
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "cluster" {
				c = newTestCluster(t, d)
				return c.describe()
			}
			if c == nil {
				t.Fatalf("%s: no cluster yet", d.Pos)
			}
			out := runCommand(t, c, d)
			for _, line := range c.log {
				out += line + "\n"
			}
			c.log = nil
			return out
		})
	})
}

func newTestCluster(t *testing.T, d *datadriven.TestData) *cluster {
	var legacy []rules.Rule
	if d.HasArg("legacy") {
		for _, name := range stringArgs(t, d, "legacy") {
			rule, err := rules.Parse(name)
			if err != nil {
				t.Fatal(err)
			}
			legacy = append(legacy, rule)
		}
	}
	config := testConfig(stringArg(t, d, "flush", "always") == "always", legacy)
	config.MinInsyncReplicas = intArg(t, d, "min-isr", 1)
	c := newCluster(intArg(t, d, "brokers", 3), config)
	c.autoSync = stringArg(t, d, "auto-sync", "true") == "true"
	return c
}

func runCommand(t *testing.T, c *cluster, d *datadriven.TestData) string {
	switch d.Cmd {
	case "elect":
		return elect(t, c, d)
	case "produce":
		acks := map[string]int16{"all": AcksAll, "1": AcksLeader, "0": AcksNone}[stringArg(t, d, "acks", "all")]
		c.produce(brokerArg(t, d, "broker"), intArg(t, d, "count", 1), acks)
		return ""
	case "deliver", "drop":
		return moveMessages(t, c, d)
	case "stabilize":
		for i := 0; c.deliverBusy(); i++ {
			if i > 10000 {
				t.Fatal("stabilize: the cluster does not quiesce")
			}
		}
		return ""
	case "tick":
		for n := intArg(t, d, "n", 1); n > 0; n-- {
			for _, id := range c.ids() {
				if c.brokers[id].alive {
					c.brokers[id].replica.Tick()
					c.process(id)
				}
			}
		}
		return ""
	case "crash":
		c.crash(brokerArg(t, d, "broker"))
		return ""
	case "restart":
		id := brokerArg(t, d, "broker")
		c.start(id)
		state := c.state.Clone()
		c.send(envelope{from: controllerID, to: id, partitionState: &state})
		return ""
	case "metadata":
		// The controller sends the current partition state again, as a
		// broker that reconnects gets it.
		id := brokerArg(t, d, "broker")
		state := c.state.Clone()
		c.send(envelope{from: controllerID, to: id, partitionState: &state})
		return ""
	case "sync":
		c.sync(brokerArg(t, d, "broker"))
		c.process(brokerArg(t, d, "broker"))
		return ""
	case "list-offsets":
		id := brokerArg(t, d, "broker")
		c.brokers[id].replica.HandleListOffsets(ListOffsetsRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, Timestamp: LatestTimestamp})
		c.process(id)
		return ""
	case "consume":
		id := brokerArg(t, d, "broker")
		c.brokers[id].replica.HandleFetch(FetchRequest{ReplicaID: ConsumerReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, FetchOffset: record.Offset(intArg(t, d, "from", 0)), LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 20})
		c.process(id)
		return ""
	case "state":
		return c.describe()
	case "check":
		failures := c.verdict()
		if len(failures) == 0 {
			return "verdict: safe\n"
		}
		return "verdict: " + strings.Join(failures, "; ") + "\n"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// elect has the controller start a new leader epoch with the given leader
// and ISR, and delivers the new state to the brokers named (all by default).
func elect(t *testing.T, c *cluster, d *datadriven.TestData) string {
	state := c.state.Clone()
	state.Leader = brokerArg(t, d, "leader")
	if c.state.LeaderEpoch >= 0 && !c.state.InISR(state.Leader) && !d.HasArg("unclean") {
		return fmt.Sprintf("cannot elect r%d: not in the ISR (%s), and clean election only picks from it\n", state.Leader, joinIDs(c.state.ISR))
	}
	state.ISR = nil
	for _, name := range stringArgs(t, d, "isr") {
		state.ISR = append(state.ISR, parseBroker(t, name))
	}
	state.LeaderEpoch++
	state.PartitionEpoch++
	before := len(c.network)
	c.setState(state)
	deliverTo := "all"
	if d.HasArg("deliver") {
		deliverTo = strings.Join(stringArgs(t, d, "deliver"), ",")
	}
	fresh := append([]envelope(nil), c.network[before:]...)
	c.network = c.network[:before]
	for _, e := range fresh {
		if deliverTo == "all" || (deliverTo != "none" && containsName(deliverTo, e.to)) {
			c.handle(e)
		} else {
			c.network = append(c.network, e)
		}
	}
	return ""
}

func moveMessages(t *testing.T, c *cluster, d *datadriven.TestData) string {
	from, matchFrom := endpointArg(t, d, "from")
	to, matchTo := endpointArg(t, d, "to")
	c.readLimitBytes = int64(intArg(t, d, "max-bytes", 0))
	defer func() { c.readLimitBytes = 0 }()
	var out strings.Builder
	for n := intArg(t, d, "count", 1); n > 0; n-- {
		var e envelope
		var ok bool
		if d.Cmd == "deliver" {
			e, ok = c.deliver(from, to, matchFrom, matchTo, d.HasArg("newest"))
		} else {
			e, ok = c.drop(from, to, matchFrom, matchTo)
		}
		if !ok {
			fmt.Fprintf(&out, "no message to %s\n", d.Cmd)
			break
		}
		fmt.Fprintf(&out, "%s %s\n", map[string]string{"deliver": "delivered", "drop": "dropped"}[d.Cmd], e)
	}
	return out.String()
}

func containsName(list string, id metadata.BrokerID) bool {
	for _, name := range strings.Split(list, ",") {
		if name == strconv.Itoa(int(id)) {
			return true
		}
	}
	return false
}

func endpointArg(t *testing.T, d *datadriven.TestData, key string) (metadata.BrokerID, bool) {
	if !d.HasArg(key) {
		return 0, false
	}
	value := stringArg(t, d, key, "")
	if value == "controller" {
		return controllerID, true
	}
	return parseBroker(t, value), true
}

func brokerArg(t *testing.T, d *datadriven.TestData, key string) metadata.BrokerID {
	return parseBroker(t, stringArg(t, d, key, ""))
}

func parseBroker(t *testing.T, text string) metadata.BrokerID {
	id, err := strconv.Atoi(strings.TrimPrefix(text, "r"))
	if err != nil {
		t.Fatalf("bad broker %q", text)
	}
	return metadata.BrokerID(id)
}

func intArg(t *testing.T, d *datadriven.TestData, key string, fallback int) int {
	if !d.HasArg(key) {
		return fallback
	}
	var value int
	d.ScanArgs(t, key, &value)
	return value
}

func stringArg(t *testing.T, d *datadriven.TestData, key, fallback string) string {
	if !d.HasArg(key) {
		return fallback
	}
	var value string
	d.ScanArgs(t, key, &value)
	return value
}

func stringArgs(t *testing.T, d *datadriven.TestData, key string) []string {
	for _, arg := range d.CmdArgs {
		if arg.Key == key {
			var values []string
			for _, value := range arg.Vals {
				values = append(values, strings.Split(value, ",")...)
			}
			return values
		}
	}
	return nil
}
