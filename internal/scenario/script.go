package scenario

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// The script commands, each a step of a seed as its text tells it:
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

// Command is one step of a script: a name and key=value arguments (a value
// may list several, comma-separated; a bare key is a flag).
type Command struct {
	Name string
	Args map[string][]string
	Line string
}

// scriptError is a bad command, raised as a panic inside a step and
// returned by Run.
type scriptError string

func fail(format string, args ...any) { panic(scriptError(fmt.Sprintf(format, args...))) }

// Run executes a command against the cluster the script built (nil before
// its cluster command) and returns the cluster and the command's output.
func Run(c *cluster, d Command) (result *cluster, out string, err error) {
	defer func() {
		if recovered := recover(); recovered != nil {
			message, ok := recovered.(scriptError)
			if !ok {
				panic(recovered)
			}
			err = fmt.Errorf("%s: %s", d.Line, string(message))
		}
	}()
	if d.Name == "cluster" {
		c = newScriptCluster(d)
		return c, c.describe(), nil
	}
	if c == nil {
		fail("no cluster yet")
	}
	out = runCommand(c, d)
	for _, line := range c.log {
		out += line + "\n"
	}
	c.log = nil
	return c, out, nil
}

func (d Command) has(key string) bool { _, ok := d.Args[key]; return ok }

func (d Command) stringArgs(key string) []string { return d.Args[key] }

func (d Command) stringArg(key, fallback string) string {
	values, ok := d.Args[key]
	if !ok || len(values) == 0 {
		return fallback
	}
	return strings.Join(values, ",")
}

func (d Command) intArg(key string, fallback int) int {
	if !d.has(key) {
		return fallback
	}
	value, err := strconv.Atoi(d.stringArg(key, ""))
	if err != nil {
		fail("%s=%q is not a number", key, d.stringArg(key, ""))
	}
	return value
}

func (d Command) brokerArg(key string) metadata.BrokerID { return parseBroker(d.stringArg(key, "")) }

func (d Command) endpointArg(key string) (metadata.BrokerID, bool) {
	if !d.has(key) {
		return 0, false
	}
	if d.stringArg(key, "") == "controller" {
		return controllerID, true
	}
	return d.brokerArg(key), true
}

func parseBroker(text string) metadata.BrokerID {
	id, err := strconv.Atoi(strings.TrimPrefix(text, "r"))
	if err != nil {
		fail("bad broker %q", text)
	}
	return metadata.BrokerID(id)
}

func newScriptCluster(d Command) *cluster {
	var legacy []rules.Rule
	if d.has("legacy") {
		for _, name := range d.stringArgs("legacy") {
			rule, err := rules.Parse(name)
			if err != nil {
				fail("%v", err)
			}
			legacy = append(legacy, rule)
		}
	}
	config := testConfig(d.stringArg("flush", "always") == "always", legacy)
	config.MinInsyncReplicas = d.intArg("min-isr", 1)
	c := newCluster(d.intArg("brokers", 3), config)
	c.autoSync = d.stringArg("auto-sync", "true") == "true"
	return c
}

func runCommand(c *cluster, d Command) string {
	switch d.Name {
	case "elect":
		return elect(c, d)
	case "produce":
		acks := map[string]int16{"all": replica.AcksAll, "1": replica.AcksLeader, "0": replica.AcksNone}[d.stringArg("acks", "all")]
		c.produce(d.brokerArg("broker"), d.intArg("count", 1), acks)
		return ""
	case "deliver", "drop":
		return moveMessages(c, d)
	case "stabilize":
		for i := 0; c.deliverBusy(); i++ {
			if i > 10000 {
				fail("stabilize: the cluster does not quiesce")
			}
		}
		return ""
	case "tick":
		for n := d.intArg("n", 1); n > 0; n-- {
			for _, id := range c.ids() {
				if c.brokers[id].alive {
					c.brokers[id].replica.Tick()
					c.process(id)
				}
			}
		}
		return ""
	case "crash":
		c.crash(d.brokerArg("broker"))
		return ""
	case "restart":
		id := d.brokerArg("broker")
		c.start(id)
		state := c.state.Clone()
		c.send(envelope{from: controllerID, to: id, partitionState: &state})
		return ""
	case "metadata":
		// The controller sends the current partition state again, as a
		// broker that reconnects gets it.
		id := d.brokerArg("broker")
		state := c.state.Clone()
		c.send(envelope{from: controllerID, to: id, partitionState: &state})
		return ""
	case "sync":
		c.sync(d.brokerArg("broker"))
		c.process(d.brokerArg("broker"))
		return ""
	case "list-offsets":
		id := d.brokerArg("broker")
		c.brokers[id].replica.HandleListOffsets(replica.ListOffsetsRequest{ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, Timestamp: replica.LatestTimestamp})
		c.process(id)
		return ""
	case "consume":
		id := d.brokerArg("broker")
		c.brokers[id].replica.HandleFetch(replica.FetchRequest{ReplicaID: replica.ConsumerReplicaID, CurrentLeaderEpoch: record.NoLeaderEpoch, FetchOffset: record.Offset(d.intArg("from", 0)), LastFetchedEpoch: record.NoLeaderEpoch, MaxBytes: 1 << 20})
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
	fail("%s: unknown command %q", d.Line, d.Name)
	return ""
}

// elect has the controller start a new leader epoch with the given leader
// and ISR, and delivers the new state to the brokers named (all by default).
func elect(c *cluster, d Command) string {
	state := c.state.Clone()
	state.Leader = d.brokerArg("leader")
	if c.state.LeaderEpoch >= 0 && !c.state.InISR(state.Leader) && !d.has("unclean") {
		return fmt.Sprintf("cannot elect r%d: not in the ISR (%s), and clean election only picks from it\n", state.Leader, joinIDs(c.state.ISR))
	}
	state.ISR = nil
	for _, name := range d.stringArgs("isr") {
		state.ISR = append(state.ISR, parseBroker(name))
	}
	state.LeaderEpoch++
	state.PartitionEpoch++
	before := len(c.network)
	c.setState(state)
	deliverTo := "all"
	if d.has("deliver") {
		deliverTo = strings.Join(d.stringArgs("deliver"), ",")
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

func moveMessages(c *cluster, d Command) string {
	from, matchFrom := d.endpointArg("from")
	to, matchTo := d.endpointArg("to")
	c.readLimitBytes = int64(d.intArg("max-bytes", 0))
	defer func() { c.readLimitBytes = 0 }()
	var out strings.Builder
	for n := d.intArg("count", 1); n > 0; n-- {
		var e envelope
		var ok bool
		if d.Name == "deliver" {
			e, ok = c.deliver(from, to, matchFrom, matchTo, d.has("newest"))
		} else {
			e, ok = c.drop(from, to, matchFrom, matchTo)
		}
		if !ok {
			fmt.Fprintf(&out, "no message to %s\n", d.Name)
			break
		}
		fmt.Fprintf(&out, "%s %s\n", map[string]string{"deliver": "delivered", "drop": "dropped"}[d.Name], e)
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
