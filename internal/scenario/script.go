package scenario

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/sim"
)

// The script verbs, each a step of a seed as its text tells it, run on the
// simulator (sim.Script): whole brokers, the metadata quorum's controller
// and its real decisions, the simulated network with one-tick messages.
//
//	cluster brokers=N [flush=never] [manual-sync] [legacy=RULE,...] [seed=S]
//	topic replicas=1,2,3 [min-isr=N] [name=T]    replicas in order; the first is preferred
//	produce broker=N [count=M] [acks=all|1|0] [idempotent]
//	retry produce=N broker=M                      produce N's batch again, same sequence
//	hold from=N to=M | release from=N to=M        N, M: a broker, "controller" or pK (produce K's client)
//	deliver from=N to=M [count=K] [newest] [kind=K] [max-bytes=B]
//	drop from=N to=M [count=K] [newest] [kind=K]   K: fetch, fetch-response, metadata, ...
//	cut from=N to=M [both] | heal from=N to=M [both]
//	crash broker=N [power-loss] | restart broker=N | pause broker=N | resume broker=N
//	shutdown broker=N | elect-preferred | sync broker=N
//	alter-config KEY=VALUE...                     the topic's configs (IncrementalAlterConfigs SET)
//	list-offsets broker=N | fetch broker=N [from=O]
//	tick [n=N] | run until=CONDITION [limit=N] | stabilize
//	state | check [recover]
//
// A CONDITION is leader=N|none (the controller elected N, and N knows
// it), isr=1,2 (the controller's ISR, which its leader, if running, has
// applied), leader-epoch=E (the controller's), fenced=N or unfenced=N (the
// controller and every running broker have it so), stopped=N, running=N,
// answered (every produce has its answer), or hw@N=O, leo@N=O and
// epoch@N=E (broker N's replica's high watermark, log end offset and leader
// epoch).

// Command is one step of a script: a name and key=value arguments (a value
// may list several, comma-separated; a bare key is a flag).
type Command struct {
	Name string
	Args map[string][]string
	// Line is where the command is (file:line); Text is the command as
	// written, when parsed from a script.
	Line string
	Text string
}

// scriptError is bad script input, raised as a panic inside a step and
// returned by Run as an error naming the script line.
type scriptError string

func fail(format string, args ...any) { panic(scriptError(fmt.Sprintf(format, args...))) }

// must turns a verb's error into a script error.
func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

// defaultLimitTicks bounds run and stabilize unless a script says.
const defaultLimitTicks = 5000

// Run executes a command against the script's run (nil before its cluster
// command) and returns the run and the command's output. A bad command is
// an error; a panic of the system under test is the run's violation.
func Run(s *sim.Script, d Command) (result *sim.Script, out string, err error) {
	result = s
	defer func() {
		recovered := recover()
		switch message, isScriptError := recovered.(scriptError); {
		case recovered == nil:
		case isScriptError:
			err = fmt.Errorf("%s: %s", d.Line, string(message))
		case result != nil:
			result.Fail(recovered)
			out += joinLines(result.Output()) + fmt.Sprintf("the cluster failed: %v\n", recovered)
		default:
			panic(recovered)
		}
	}()
	if d.Name == "cluster" {
		if s != nil {
			fail("a script has one cluster")
		}
		result = newScript(d)
		return result, joinLines(result.Output()), nil
	}
	if s == nil {
		fail("no cluster yet (a script starts with cluster)")
	}
	own := runCommand(s, d)
	return s, joinLines(s.Output()) + own, nil
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func newScript(d Command) *sim.Script {
	config := sim.ScriptConfig{
		Brokers: d.intArg("brokers", 3), Seed: uint64(d.intArg("seed", 1)),
		FlushNever: d.stringArg("flush", "always") == "never", ManualSync: d.has("manual-sync"),
	}
	if flush := d.stringArg("flush", "always"); flush != "always" && flush != "never" {
		fail("flush=%s: always or never", flush)
	}
	legacy, err := sim.ParseLegacy(d.stringArgs("legacy"))
	must(err)
	config.Legacy = legacy
	s, err := sim.NewScript(config)
	must(err)
	return s
}

// runCommand runs one verb and returns its own output.
func runCommand(s *sim.Script, d Command) string {
	switch d.Name {
	case "topic":
		must(s.CreateTopic(d.stringArg("name", "t"), d.brokerList("replicas"), d.intArg("min-isr", 1)))
	case "produce":
		if d.has("idempotent") {
			must(s.ProduceIdempotent(d.brokerArg("broker"), d.intArg("count", 1), d.acksArg()))
			break
		}
		must(s.Produce(d.brokerArg("broker"), d.intArg("count", 1), d.acksArg()))
	case "retry":
		must(s.Retry(d.intArg("produce", 0), d.brokerArg("broker")))
	case "hold", "release", "deliver", "drop", "cut", "heal":
		linkCommand(s, d)
	case "crash":
		must(s.Crash(d.brokerArg("broker"), d.has("power-loss")))
	case "restart":
		must(s.Restart(d.brokerArg("broker")))
	case "pause":
		must(s.Pause(d.brokerArg("broker")))
	case "resume":
		must(s.Resume(d.brokerArg("broker")))
	case "shutdown":
		must(s.Shutdown(d.brokerArg("broker")))
	case "elect-preferred":
		must(s.ElectPreferred())
	case "alter-config":
		alterConfig(s, d)
	case "sync":
		must(s.Sync(d.brokerArg("broker")))
	case "list-offsets":
		must(s.ListOffsets(d.brokerArg("broker")))
	case "fetch":
		must(s.Fetch(d.brokerArg("broker"), record.Offset(d.intArg("from", 0))))
	case "tick":
		must(s.Tick(int64(d.intArg("n", 1))))
	case "run":
		return runUntil(s, d)
	case "stabilize":
		ticks, ok := s.Stabilize(int64(d.intArg("limit", defaultLimitTicks)))
		if !ok {
			fail("stabilize: the cluster did not settle within %d ticks", ticks)
		}
		return fmt.Sprintf("stable after %d ticks\n", ticks)
	case "state":
		return s.State()
	case "check":
		return check(s, d.has("recover"))
	default:
		fail("unknown command %q", d.Name)
	}
	return ""
}

// alterConfig sets the topic's configs named as key=value, one request
// each, in the order written.
func alterConfig(s *sim.Script, d Command) {
	fields := strings.Fields(commandText(d))
	if len(fields) < 2 {
		fail("alter-config needs key=value")
	}
	for _, field := range fields[1:] {
		key, value, _ := strings.Cut(field, "=")
		must(s.AlterConfig(key, value))
	}
}

func linkCommand(s *sim.Script, d Command) {
	from, to := d.endpointArg("from"), d.endpointArg("to")
	switch d.Name {
	case "hold":
		must(s.Hold(from, to))
	case "release":
		must(s.Release(from, to))
	case "deliver":
		must(s.Deliver(from, to, d.pickArgs(), int64(d.intArg("max-bytes", 0))))
	case "drop":
		must(s.Drop(from, to, d.pickArgs()))
	case "cut":
		must(s.Cut(from, to))
		if d.has("both") {
			must(s.Cut(to, from))
		}
	case "heal":
		must(s.Heal(from, to))
		if d.has("both") {
			must(s.Heal(to, from))
		}
	}
}

func (d Command) pickArgs() sim.Pick {
	return sim.Pick{Count: d.intArg("count", 1), Newest: d.has("newest"), Kind: d.stringArg("kind", "")}
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

func (d Command) acksArg() int16 {
	acks, ok := map[string]int16{"all": replica.AcksAll, "-1": replica.AcksAll, "1": replica.AcksLeader, "0": replica.AcksNone}[d.stringArg("acks", "all")]
	if !ok {
		fail("acks=%s: all, 1 or 0", d.stringArg("acks", ""))
	}
	return acks
}

func (d Command) brokerArg(key string) metadata.BrokerID {
	if !d.has(key) {
		fail("%s needs %s=N", d.Name, key)
	}
	return parseBroker(d.stringArg(key, ""))
}

func (d Command) brokerList(key string) []metadata.BrokerID {
	if len(d.stringArgs(key)) == 0 {
		fail("%s needs %s=N,M,...", d.Name, key)
	}
	var ids []metadata.BrokerID
	for _, name := range d.stringArgs(key) {
		ids = append(ids, parseBroker(name))
	}
	return ids
}

func (d Command) endpointArg(key string) sim.Endpoint {
	text := d.stringArg(key, "")
	if text == "controller" {
		return sim.ControllerEndpoint
	}
	if number, ok := strings.CutPrefix(text, "p"); ok {
		n, err := strconv.Atoi(number)
		if err != nil || n < 1 {
			fail("bad producer %q (produce n's client is pN)", text)
		}
		return sim.ProducerEndpoint(n)
	}
	return d.brokerArg(key)
}

func parseBroker(text string) metadata.BrokerID {
	id, err := strconv.Atoi(strings.TrimPrefix(text, "r"))
	if err != nil || id < 1 {
		fail("bad broker %q (brokers are 1, 2, ... or r1, r2, ...)", text)
	}
	return metadata.BrokerID(id)
}
