package chaos

import (
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// firewall isolates nodes on 127.0.0.1 with iptables, the way
// internal/server/blackhole_test.go does: every node runs under a uid of
// its own, a mangle OUTPUT rule marks every connection the node sends a
// packet on with that uid (conntrack mark), and isolating the node drops,
// in filter INPUT, every packet of a marked connection and every packet to
// its listeners. Dropping in INPUT keeps the drop silent (no reset, no
// EPERM for the sender), as when a machine's network goes away.
//
// Every rule carries the comment tide-chaos-<pid namespace>-<pid>, goes at
// the head of its chain, and is removed when the run ends; rules of a
// chaos run of this pid namespace that died are swept at the start.
type firewall struct {
	tag     string
	baseUID uint32 // node id's uid and mark is baseUID + id
	mu      sync.Mutex
	// installed are the rules in place, oldest first.
	installed []iptablesRule
	marked    map[int32]bool
}

// iptablesRule is one rule; isolates is the node an isolation rule cuts
// off (0 for a marking rule).
type iptablesRule struct {
	table, chain  string
	match, target []string
	isolates      int32
}

func (r iptablesRule) arguments(operation, tag string) []string {
	args := []string{"-w", "10", "-t", r.table, operation, r.chain}
	args = append(args, r.match...)
	args = append(args, "-m", "comment", "--comment", tag)
	return append(args, r.target...)
}

// newFirewall returns nil and the reason when isolation cannot run here:
// not root, no iptables, or a kernel without the matches it needs.
func newFirewall(out io.Writer) (*firewall, string) {
	if os.Geteuid() != 0 {
		return nil, "not root: isolation faults need iptables and a uid per node"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, "iptables is not installed (apt-get install iptables)"
	}
	pid, namespace := os.Getpid(), pidNamespace()
	f := &firewall{tag: fmt.Sprintf("tide-chaos-%d-%d", namespace, pid),
		baseUID: 2_000_000_000 + uint32((namespace*2_654_435_761+uint64(pid))%100_000_000)*16, marked: map[int32]bool{}}
	sweepRules(out, namespace)
	mark := strconv.FormatUint(uint64(f.baseUID), 10)
	for _, rule := range []iptablesRule{
		{table: "mangle", chain: "OUTPUT", match: []string{"-o", "lo", "-m", "owner", "--uid-owner", mark}, target: []string{"-j", "CONNMARK", "--set-mark", mark}},
		{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-m", "connmark", "--mark", mark}, target: []string{"-j", "DROP"}},
	} {
		if output, err := exec.Command("iptables", rule.arguments("-I", f.tag)...).CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("iptables cannot isolate a node here: %v: %s", err, strings.TrimSpace(string(output)))
		}
		if output, err := exec.Command("iptables", rule.arguments("-D", f.tag)...).CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("iptables could not remove its probe rule: %v: %s", err, strings.TrimSpace(string(output)))
		}
	}
	return f, ""
}

func pidNamespace() uint64 {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.Trim(strings.TrimPrefix(link, "pid:"), "[]"), 10, 64)
	return n
}

// sweepRules removes the rules of chaos runs of this pid namespace whose
// process is gone (one killed with kill -9 removed nothing).
func sweepRules(out io.Writer, namespace uint64) {
	prefix := fmt.Sprintf("tide-chaos-%d-", namespace)
	for _, table := range []string{"mangle", "filter"} {
		listing, _ := exec.Command("iptables", "-w", "10", "-t", table, "-S").Output()
		for _, line := range strings.Split(string(listing), "\n") {
			fields := strings.Fields(line)
			index := slices.Index(fields, "--comment")
			if len(fields) < 2 || fields[0] != "-A" || index < 0 || index+1 >= len(fields) {
				continue
			}
			pid, found := strings.CutPrefix(strings.Trim(fields[index+1], `"`), prefix)
			if !found {
				continue
			}
			if n, err := strconv.Atoi(pid); err != nil || n == os.Getpid() || processAlive(n) {
				continue
			}
			fields[0] = "-D"
			if output, err := exec.Command("iptables", append([]string{"-w", "10", "-t", table}, fields...)...).CombinedOutput(); err != nil {
				fmt.Fprintf(out, "could not sweep a rule a dead chaos run left (-t %s %s): %v: %s\n", table, line, err, output)
			} else {
				fmt.Fprintf(out, "swept a rule a dead chaos run left: -t %s %s\n", table, line)
			}
		}
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func (f *firewall) uid(id int32) uint32 { return f.baseUID + uint32(id) }

func (f *firewall) add(rule iptablesRule) error {
	if output, err := exec.Command("iptables", rule.arguments("-I", f.tag)...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(rule.arguments("-I", f.tag), " "), err, output)
	}
	f.mu.Lock()
	f.installed = append(f.installed, rule)
	f.mu.Unlock()
	return nil
}

// remove deletes the installed rules pick chooses, newest first, and
// returns the first error (it goes on past one).
func (f *firewall) remove(pick func(iptablesRule) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for i := len(f.installed) - 1; i >= 0; i-- {
		rule := f.installed[i]
		if !pick(rule) {
			continue
		}
		if output, err := exec.Command("iptables", rule.arguments("-D", f.tag)...).CombinedOutput(); err != nil && first == nil {
			first = fmt.Errorf("iptables %s: %v: %s", strings.Join(rule.arguments("-D", f.tag), " "), err, output)
		}
		f.installed = slices.Delete(f.installed, i, i+1)
	}
	return first
}

// removeAll removes every rule this run added.
func (f *firewall) removeAll() error { return f.remove(func(iptablesRule) bool { return true }) }

// heal ends node id's isolation.
func (f *firewall) heal(id int32) error {
	return f.remove(func(r iptablesRule) bool { return r.isolates == id })
}

// prepare makes node id run as its own uid, own its directory, and have
// every connection it sends on marked.
func (f *firewall) prepare(id int32, dir string, command *exec.Cmd) error {
	uid := f.uid(id)
	if err := chownTree(dir, int(uid)); err != nil {
		return err
	}
	command.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
	f.mu.Lock()
	marked := f.marked[id]
	f.marked[id] = true
	f.mu.Unlock()
	if marked {
		return nil
	}
	mark := strconv.FormatUint(uint64(uid), 10)
	return f.add(iptablesRule{table: "mangle", chain: "OUTPUT", match: []string{"-o", "lo", "-m", "owner", "--uid-owner", mark},
		target: []string{"-j", "CONNMARK", "--set-mark", mark}})
}

// isolate drops every packet of node id's connections and to its
// listeners.
func (f *firewall) isolate(id int32, listeners ...string) error {
	mark := strconv.FormatUint(uint64(f.uid(id)), 10)
	if err := f.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-m", "connmark", "--mark", mark},
		target: []string{"-j", "DROP"}, isolates: id}); err != nil {
		return err
	}
	for _, address := range listeners {
		if err := f.dropPort(id, address, "--dport"); err != nil {
			return err
		}
	}
	return nil
}

// cutController drops only node id's controller traffic: packets to and
// from its controller listener, and its own connections to the other
// controllers' listeners. Its Kafka listener and its replica fetches go
// on.
func (f *firewall) cutController(id int32, own string, others []string) error {
	if err := f.dropPort(id, own, "--dport"); err != nil {
		return err
	}
	if err := f.dropPort(id, own, "--sport"); err != nil {
		return err
	}
	mark := strconv.FormatUint(uint64(f.uid(id)), 10)
	for _, address := range others {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if err := f.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-p", "tcp", "--dport", port,
			"-m", "connmark", "--mark", mark}, target: []string{"-j", "DROP"}, isolates: id}); err != nil {
			return err
		}
	}
	return nil
}

func (f *firewall) dropPort(id int32, address, direction string) error {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	return f.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-p", "tcp", direction, port},
		target: []string{"-j", "DROP"}, isolates: id})
}

// chownTree gives dir (made by the run, holding only the node's own
// files) to uid, with everything under it: a node restarted after a kill
// runs as the same uid, so this changes nothing then.
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}
