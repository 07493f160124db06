package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumFlags run Debian's chromium headless as root on a machine with
// no network beyond loopback: without the background-networking flags it
// dials out at every start, and is refused.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1000,1200"}

// TestConsoleInBrowser loads every page of a tide dev broker's web console
// in headless chromium: each renders with the live values of the cluster
// (the topic, its offsets, a consumer group's lag), and a screenshot of each is saved, in
// $TIDE_SCREENSHOTS when set (CI keeps them), else in the test's
// temporary directory.
func TestConsoleInBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium): the console's browser test skips")
	}
	run := startDev(t, "--brokers", "1", "--kafka-port", "0", "--dir", t.TempDir())
	console := regexp.MustCompile(`console (http://\S+/)\n`).FindStringSubmatch(run.stdout.String())
	if console == nil {
		t.Fatalf("no console URL in the banner:\n%s", run.stdout)
	}
	bootstrap := run.bootstrap()
	createVisibleTopic(t, bootstrap, "shown", "2", "1")
	mustRun(t, strings.Repeat("a record\n", 500), "", "produce", "shown", "--bootstrap", bootstrap)
	// A group that read 40 of lagging's 100 records: the groups page shows
	// the commit, the end offset and the lag 60.
	createVisibleTopic(t, bootstrap, "lagging", "1", "1")
	mustRun(t, strings.Repeat("a record\n", 100), "", "produce", "lagging", "--bootstrap", bootstrap)
	commitGroupOffset(t, bootstrap, "readers", "lagging", "40")
	shots := os.Getenv("TIDE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, page := range []struct {
		path, file string
		want       []string
	}{
		{"", "overview.png", []string{`id="brokers"`, `href="/topic/shown"`, "serving"}},
		{"topic/shown", "topic.png", []string{"partition 1", "hw ", `class="replicas"`}},
		{"groups", "groups.png", []string{`id="group-readers"`, "state <b>Empty</b>", "<td>40</td>", "<td>100</td>",
			`<td class="lag">60</td>`, "lag 60, at 40 of 100", "total lag 60"}},
		{"rates", "rates.png", []string{`class="rates"`}},
		{"scenarios", "scenarios.png", []string{"kafka-7128", "kafka-1211"}},
		{"scenario/kafka-7128?legacy=1", "scenario-kafka-7128-legacy.png", []string{`id="timeline"`, "committed offsets"}},
	} {
		url := console[1] + page.path
		dom := chromium(t, browser, "--dump-dom", url)
		for _, want := range page.want {
			if !strings.Contains(dom, want) {
				t.Errorf("%s in chromium lacks %q:\n%s", url, want, dom)
			}
		}
		shot := filepath.Join(shots, page.file)
		chromium(t, browser, "--screenshot="+shot, url)
		if info, err := os.Stat(shot); err != nil || info.Size() < 5000 {
			t.Errorf("screenshot of %s: %v", url, err)
		}
	}
	// The page shows the live offsets: the partitions' high watermarks add
	// up to the records produced.
	committed := 0
	for _, match := range regexp.MustCompile(`hw (\d+), leo \d+`).FindAllStringSubmatch(chromium(t, browser, "--dump-dom", console[1]+"topic/shown"), -1) {
		n, _ := strconv.Atoi(match[1])
		committed += n
	}
	if committed != 500 {
		t.Errorf("the topic page shows %d committed records, want the 500 produced", committed)
	}
	t.Logf("screenshots in %s", shots)
}

// chromium runs the browser once on a new profile and returns its output.
func chromium(t *testing.T, browser string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	flags := append(append(append([]string(nil), chromiumFlags...), "--user-data-dir="+t.TempDir()), args...)
	output, err := exec.CommandContext(ctx, browser, flags...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(output)
}
