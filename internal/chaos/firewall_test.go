package chaos

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// iptablesListing is every rule of both tables the firewall uses.
func iptablesListing(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, table := range []string{"mangle", "filter"} {
		out, err := exec.Command("iptables", "-w", "10", "-t", table, "-S").CombinedOutput()
		if err != nil {
			t.Fatalf("iptables -t %s -S: %v: %s", table, err, out)
		}
		all.Write(out)
	}
	return all.String()
}

// The firewall's rules go in and all come out again, and a rule left by a
// chaos run that died is swept by the next one. Needs root and iptables
// (.ci/run runs as root and installs it).
func TestFirewallRemovesEveryRuleAndSweepsLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for iptables")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables is not installed")
	}
	// A rule as a run of this pid namespace that died would have left it:
	// no process has pid 4194304 (above Linux's pid_max).
	dead := iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-p", "tcp", "--dport", "19799"}, target: []string{"-j", "DROP"}}
	deadTag := fmt.Sprintf("tide-chaos-%d-%d", pidNamespace(), 4194304)
	if out, err := exec.Command("iptables", dead.arguments("-I", deadTag)...).CombinedOutput(); err != nil {
		t.Skipf("iptables cannot add a rule here: %v: %s", err, out)
	}
	f, why := newFirewall(io.Discard)
	if f == nil {
		exec.Command("iptables", dead.arguments("-D", deadTag)...).Run()
		t.Skip(why)
	}
	defer f.removeAll()
	if listing := iptablesListing(t); strings.Contains(listing, deadTag) {
		t.Fatalf("the dead run's rule was not swept:\n%s", listing)
	}
	command := exec.Command("true")
	command.SysProcAttr = &syscall.SysProcAttr{}
	if err := f.prepare(1, t.TempDir(), command); err != nil {
		t.Fatal(err)
	}
	if command.SysProcAttr.Credential == nil || command.SysProcAttr.Credential.Uid != f.uid(1) {
		t.Fatalf("node 1 would not run as its own uid %d: %+v", f.uid(1), command.SysProcAttr.Credential)
	}
	if err := f.isolate(1, "127.0.0.1:19798", "127.0.0.1:19797"); err != nil {
		t.Fatal(err)
	}
	if err := f.cutController(1, "127.0.0.1:19797", []string{"127.0.0.1:19796"}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(iptablesListing(t), f.tag); n != 1+3+3 {
		t.Fatalf("%d rules tagged %s, want 7 (a mark, an isolation of 3, a controller cut of 3)", n, f.tag)
	}
	if err := f.heal(1); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(iptablesListing(t), f.tag); n != 1 {
		t.Fatalf("after the heal %d rules tagged %s, want the mark alone", n, f.tag)
	}
	if err := f.removeAll(); err != nil {
		t.Fatal(err)
	}
	if listing := iptablesListing(t); strings.Contains(listing, f.tag) {
		t.Fatalf("rules left after removeAll:\n%s", listing)
	}
}
