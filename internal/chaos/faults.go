package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The fault kinds, in the order `--faults` lists them.
const (
	FaultKillLeader         = "kill-leader"     // kill -9 a partition's leader, restart it
	FaultKillController     = "kill-controller" // kill -9 the active controller, restart it
	FaultKillRandom         = "kill-random"     // kill -9 any node, restart it
	FaultKillTwo            = "kill-two"        // kill -9 two nodes at once, restart both
	FaultPause              = "pause"           // SIGSTOP a node past the session timeout, SIGCONT
	FaultIsolate            = "isolate"         // drop every packet of one node (iptables), heal
	FaultControllerCut      = "controller-cut"  // drop only the active controller's controller traffic
	FaultKillLeaderAfterAck = "kill-leader-after-ack"
)

// FaultKinds are the kinds a run draws from by default.
var FaultKinds = []string{FaultKillLeader, FaultKillController, FaultKillRandom, FaultKillTwo, FaultPause, FaultIsolate, FaultControllerCut}

// AllFaultKinds adds the kinds only asked for by name:
// kill-leader-after-ack kills a leader the moment it acknowledges, and
// with short quiet periods, to show `--acks 1` losing writes.
var AllFaultKinds = append(slices.Clone(FaultKinds), FaultKillLeaderAfterAck)

// needsFirewall says which kinds drop packets.
func needsFirewall(kind string) bool { return kind == FaultIsolate || kind == FaultControllerCut }

// injector draws faults from the seed and carries them out.
type injector struct {
	config   Config
	cluster  *cluster
	random   *rand.Rand
	recorder *recorder
	out      io.Writer
	kinds    []string
}

// run injects faults until ctx ends: a quiet period, a fault held for a
// while, healed, and again. A fault begun before ctx ended is held its
// full time unless the run itself (whole) ends.
func (in *injector) run(ctx, whole context.Context) {
	for {
		quiet := in.config.QuietMin + time.Duration(in.random.Int64N(int64(in.config.QuietMax-in.config.QuietMin)+1))
		if !sleep(ctx, quiet) {
			return
		}
		kind := in.kinds[in.random.IntN(len(in.kinds))]
		record := FaultRecord{Kind: kind, StartMs: in.recorder.ms()}
		heal, err := in.inject(ctx, kind, &record)
		if err != nil {
			fmt.Fprintf(in.out, "%6.1fs %s: %v\n", float64(record.StartMs)/1000, kind, err)
		}
		if heal == nil {
			continue
		}
		fmt.Fprintf(in.out, "%6.1fs %s %v%s\n", float64(record.StartMs)/1000, kind, record.Nodes, noteSuffix(record.Note))
		hold := in.holdFor(kind)
		sleep(whole, hold) // an interrupted hold still heals
		if err := heal(); err != nil {
			fmt.Fprintf(in.out, "healing %s %v: %v\n", kind, record.Nodes, err)
		}
		record.EndMs = in.recorder.ms()
		in.recorder.add(func(h *History) { h.Faults = append(h.Faults, record) })
	}
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// holdFor is how long a fault lasts: a kill some seconds; a pause or an
// isolation past the session timeout, so the node is fenced.
func (in *injector) holdFor(kind string) time.Duration {
	jitter := time.Duration(in.random.Int64N(int64(2 * time.Second)))
	switch kind {
	case FaultPause, FaultIsolate, FaultControllerCut:
		return in.config.SessionTimeout + time.Second + jitter
	case FaultKillLeaderAfterAck:
		return time.Second + jitter/2
	}
	return 2*time.Second + jitter
}

// inject starts one fault and returns what heals it (nil when nothing was
// done).
func (in *injector) inject(ctx context.Context, kind string, record *FaultRecord) (func() error, error) {
	switch kind {
	case FaultKillLeader, FaultKillLeaderAfterAck:
		partition := int32(in.random.IntN(in.config.Partitions))
		leader := in.waitForLeader(ctx, partition)
		record.Note = fmt.Sprintf("leader of partition %d", partition)
		if kind == FaultKillLeaderAfterAck && leader != 0 {
			in.waitForAck(ctx, partition)
			record.StartMs = in.recorder.ms()
		}
		return in.kill(record, leader)
	case FaultKillController:
		record.Note = "active controller"
		return in.kill(record, in.cluster.activeController(ctx))
	case FaultKillRandom:
		return in.kill(record, in.pick(1)...)
	case FaultKillTwo:
		return in.kill(record, in.pick(2)...)
	case FaultPause:
		victim := in.pick(1)[0]
		record.Nodes = []int32{victim}
		in.cluster.pause(victim)
		return func() error { in.cluster.resume(victim); return nil }, nil
	case FaultIsolate:
		victim := in.pick(1)[0]
		record.Nodes = []int32{victim}
		n := in.cluster.node(victim)
		heal := func() error { return in.cluster.firewall.heal(victim) }
		return heal, in.cluster.firewall.isolate(victim, n.kafka, n.controller)
	case FaultControllerCut:
		victim := in.cluster.activeController(ctx)
		if victim == 0 {
			return nil, fmt.Errorf("no active controller answered")
		}
		record.Nodes, record.Note = []int32{victim}, "active controller"
		var others []string
		for _, n := range in.cluster.nodes {
			if n.id != victim {
				others = append(others, n.controller)
			}
		}
		heal := func() error { return in.cluster.firewall.heal(victim) }
		return heal, in.cluster.firewall.cutController(victim, in.cluster.node(victim).controller, others)
	}
	return nil, fmt.Errorf("unknown fault kind %q", kind)
}

// waitForLeader waits up to 10 s for partition to have a leader (a fault
// just healed may have left it without one) and returns it, or 0.
func (in *injector) waitForLeader(ctx context.Context, partition int32) int32 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		leader := in.cluster.leader(ctx, in.config.Topic, partition)
		if leader != 0 || time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			return leader
		}
	}
}

// waitForAck waits for the next acknowledgement on partition, so its
// leader is killed with the newest writes perhaps not yet on its
// followers.
func (in *injector) waitForAck(ctx context.Context, partition int32) {
	since := in.recorder.ms()
	for acknowledged := false; !acknowledged && ctx.Err() == nil; {
		in.recorder.add(func(h *History) {
			for i := len(h.Produces) - 1; i >= 0 && h.Produces[i].AnsweredMs >= since && !acknowledged; i-- {
				acknowledged = h.Produces[i].Outcome == Acknowledged && h.Produces[i].Partition == partition
			}
		})
		sleep(ctx, time.Millisecond)
	}
}

// pick draws n distinct running nodes.
func (in *injector) pick(n int) []int32 {
	var ids []int32
	for _, node := range in.cluster.nodes {
		ids = append(ids, node.id)
	}
	in.random.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ids = ids[:min(n, len(ids))]
	slices.Sort(ids)
	return ids
}

// kill sends kill -9 to the nodes; healing restarts them.
func (in *injector) kill(record *FaultRecord, victims ...int32) (func() error, error) {
	victims = slices.DeleteFunc(victims, func(id int32) bool { return id == 0 })
	if len(victims) == 0 {
		return nil, fmt.Errorf("no node to kill (%s)", record.Note)
	}
	record.Nodes = victims
	for _, id := range victims {
		in.cluster.kill(id)
	}
	return func() error {
		var failures []string
		for _, id := range victims {
			if err := in.cluster.start(id); err != nil {
				failures = append(failures, err.Error())
			}
		}
		if len(failures) > 0 {
			return fmt.Errorf("%s", strings.Join(failures, "; "))
		}
		return nil
	}, nil
}

// sleep waits d or until ctx ends, and says whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
