package console

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/tidelog/tide/internal/scenario"
)

// scenarioRun is one replay of a seed scenario as the console draws it:
// the steps `tide scenario run` prints, each state drawn.
type scenarioRun struct {
	Name    string
	Title   string
	Legacy  bool
	Safe    bool
	Verdict string
	Intro   string
	Steps   []scenarioStep
}

// scenarioStep is one command of the script with the comment before it and
// what it printed; a `state` step also has its replica table drawn.
type scenarioStep struct {
	Comment string
	Command string
	Output  string
	Header  string
	Drawing template.HTML
}

// scenarioCache keeps each replay: a scenario is a pure function of its
// script, so one replay serves every later page view.
type scenarioCache struct {
	mu   sync.Mutex
	runs map[string]*scenarioRun
}

func newScenarioCache() *scenarioCache { return &scenarioCache{runs: map[string]*scenarioRun{}} }

// replay runs (or recalls) one scenario, with its rule on or, legacy, off.
func (c *scenarioCache) replay(name string, legacy bool) (*scenarioRun, error) {
	key := fmt.Sprintf("%s/%t", name, legacy)
	c.mu.Lock()
	defer c.mu.Unlock()
	if run, ok := c.runs[key]; ok {
		return run, nil
	}
	var out bytes.Buffer
	verdict, safe, err := scenario.Replay(name, legacy, &out)
	if err != nil {
		return nil, err
	}
	run := parseScenario(out.String())
	run.Name, run.Legacy, run.Safe, run.Verdict = name, legacy, safe, verdict
	for _, known := range scenario.List() {
		if known.Name == name {
			run.Title = known.Title
		}
	}
	c.runs[key] = run
	return run, nil
}

// replicaLine is a replica row of a `state` table:
// "r2: [hw=5, leo=10] leader epoch=1 epochs=0@0,1@10".
var replicaLine = regexp.MustCompile(`^r(\d+): \[hw=(-?\d+), leo=(-?\d+)\] (\S+) epoch=(-?\d+)`)

// parseScenario splits a replay's text into its steps: "# " lines are
// comments, "> " lines commands, the rest the output of the command before.
func parseScenario(text string) *scenarioRun {
	run := &scenarioRun{}
	var comment []string
	var step *scenarioStep
	var output []string
	finish := func() {
		if step == nil {
			return
		}
		step.Output = strings.TrimRight(strings.Join(output, "\n"), "\n")
		if step.Command == "state" {
			step.Header, step.Drawing = drawState(output)
		}
		run.Steps = append(run.Steps, *step)
		step, output = nil, nil
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			finish()
			comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case strings.HasPrefix(line, "> "):
			finish()
			step = &scenarioStep{Comment: strings.TrimSpace(strings.Join(comment, " ")), Command: strings.TrimPrefix(line, "> ")}
			if run.Intro == "" && len(run.Steps) == 0 {
				run.Intro, step.Comment = step.Comment, ""
			}
			comment = nil
		case strings.HasPrefix(line, "verdict:"):
			finish()
		case step != nil && line != "":
			output = append(output, line)
		}
	}
	finish()
	return run
}

// drawState draws a `state` table's replicas: each replica's committed
// range and tail, to one scale.
func drawState(lines []string) (string, template.HTML) {
	var header string
	var bars []replicaBar
	for _, line := range lines {
		if strings.HasPrefix(line, "ISR:") {
			header = line
			continue
		}
		match := replicaLine.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		hw, _ := strconv.ParseInt(match[2], 10, 64)
		leo, _ := strconv.ParseInt(match[3], 10, 64)
		bars = append(bars, replicaBar{Label: fmt.Sprintf("r%s %s", match[1], match[4]), Known: true, HighWatermark: hw, LogEnd: leo,
			Note: fmt.Sprintf("hw=%d leo=%d epoch=%s", hw, leo, match[5])})
	}
	if len(bars) == 0 {
		return header, ""
	}
	return header, drawReplicas(bars)
}
