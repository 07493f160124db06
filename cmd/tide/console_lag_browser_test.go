package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConsoleShowsLagInBrowser runs a tide dev cluster of three brokers
// with a topic of replication factor 3 holding 100 records and a group
// that committed 40, and reads every broker's console in headless
// chromium: exactly one, the group's coordinator, shows the group with
// lag 60; the partition's leader shows both followers caught up (lag 0)
// and each follower its own fetcher lag, 0. Screenshots as in
// TestConsoleInBrowser.
func TestConsoleShowsLagInBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium): the console's browser test skips")
	}
	if testing.Short() {
		t.Skip("runs three brokers and a browser; skipped with -short")
	}
	run := startDev(t, "--brokers", "3", "--kafka-port", "0", "--metrics-port", "-1", "--http-port", "0", "--dir", t.TempDir())
	var consoles []string
	for _, match := range regexp.MustCompile(`console (http://\S+/)\n`).FindAllStringSubmatch(run.stdout.String(), -1) {
		consoles = append(consoles, match[1])
	}
	if len(consoles) != 3 {
		t.Fatalf("%d console URLs in the banner:\n%s", len(consoles), run.stdout)
	}
	bootstrap := run.bootstrap()
	createVisibleTopic(t, bootstrap, "replicated", "1", "3")
	mustRun(t, strings.Repeat("a record\n", 100), "", "produce", "replicated", "--bootstrap", bootstrap)
	commitGroupOffset(t, bootstrap, "readers", "replicated", "40")
	shots := os.Getenv("TIDE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	coordinators := 0
	for i, console := range consoles {
		dom := chromium(t, browser, "--dump-dom", console+"groups")
		if !strings.Contains(dom, `id="group-readers"`) {
			continue
		}
		coordinators++
		if !strings.Contains(dom, `<td class="lag">60</td>`) || !strings.Contains(dom, "lag 60, at 40 of 100") {
			t.Errorf("broker %d's groups page lacks readers' lag 60:\n%s", i+1, dom)
		}
		chromium(t, browser, "--screenshot="+filepath.Join(shots, "groups-of-three.png"), console+"groups")
	}
	if coordinators != 1 {
		t.Errorf("%d consoles show the group readers; want its coordinator's alone", coordinators)
	}
	leaders, followers := 0, 0
	for i, console := range consoles {
		switch dom := topicPageSettled(t, browser, console+"topic/replicated"); {
		case strings.Count(dom, "leo 100, lag 0") == 2:
			leaders++
			chromium(t, browser, "--screenshot="+filepath.Join(shots, "topic-leader-of-three.png"), console+"topic/replicated")
		case strings.Contains(dom, "leo 100, fetcher lag 0"):
			followers++
			chromium(t, browser, "--screenshot="+filepath.Join(shots, "topic-follower-of-three.png"), console+"topic/replicated")
		default:
			t.Errorf("broker %d's topic page shows neither its followers' lag nor its own fetcher lag:\n%s", i+1, dom)
		}
	}
	if leaders != 1 || followers != 2 {
		t.Errorf("%d leader and %d follower pages; want 1 and 2", leaders, followers)
	}
}

// topicPageSettled is a topic page once it shows a replica at log end
// 100 with lag 0 (a follower's first fetch answer may still be coming),
// or after 10 s.
func topicPageSettled(t *testing.T, browser, url string) string {
	t.Helper()
	var dom string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		dom = chromium(t, browser, "--dump-dom", url)
		if strings.Count(dom, "leo 100, lag 0") == 2 || strings.Contains(dom, "leo 100, fetcher lag 0") {
			break
		}
	}
	return dom
}

// commitGroupOffset commits offset for group on every partition of topic
// with tide group offsets reset. The first group request creates
// __consumer_offsets: until it is led, the coordinator is not available.
func commitGroupOffset(t *testing.T, bootstrap, group, topic, offset string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		stdout, stderr, err := runWithInput("", "group", "offsets", "reset", group, "--topic", topic, "--to-offset", offset, "--bootstrap", bootstrap)
		if err == nil && strings.Contains(stdout, "committed ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committing %s for %s: %v\n%s%s", offset, group, err, stdout, stderr)
		}
	}
}
