// Package scenario replays the seed documents' failures step by step on
// the simulator (internal/sim's scripted mode): whole brokers
// (internal/broker over internal/commitlog on crashable in-memory disks),
// the real metadata quorum (one dedicated controller) running the
// internal/controller decisions, and the simulated network. A script follows a seed's text and numbers:
// it holds a link and delivers or drops its messages one by one, crashes,
// pauses, cuts and shuts brokers down, runs a preferred election, and lets
// the cluster run until something happens. Leaders change only the way they
// do in a cluster: the controller fences a broker, moves leadership on a
// controlled shutdown, or elects the preferred replica. The script prints the
// replica table the seed draws after the steps that matter and ends with the
// checker's verdict. Each seed has a script with every rule on (verdict:
// safe) and one with its rule switched off (the seed's failure). `tide
// scenario` runs them.
//
// The _test.go files also hold a second, smaller harness: the pure
// replication core over in-memory logs with a hand-made controller, which
// TestRandomSchedules drives through random schedules.
package scenario

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/tidelog/tide/internal/sim"
)

//go:embed scenarios/*
var scripts embed.FS

// Scenario is one seed's replay.
type Scenario struct {
	Name string
	// Title is the first line of the script's opening comment.
	Title string
}

// List returns the scenarios, by name.
func List() []Scenario {
	entries, err := fs.ReadDir(scripts, "scenarios")
	if err != nil {
		panic(err)
	}
	var list []Scenario
	for _, entry := range entries {
		if strings.HasSuffix(entry.Name(), "-legacy") {
			continue
		}
		text, _ := fs.ReadFile(scripts, "scenarios/"+entry.Name())
		title := strings.TrimPrefix(strings.SplitN(string(text), "\n", 2)[0], "# ")
		list = append(list, Scenario{Name: entry.Name(), Title: title})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

// Step is a script's command with the comment that introduces it.
type Step struct {
	Comment []string
	Command Command
}

// Parse reads a script: comment lines start with #, a command line is
// followed by a line "----" and its recorded output, which ends at a blank
// line.
func Parse(name, text string) ([]Step, error) {
	var steps []Step
	var comment []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			return nil, fmt.Errorf("%s:%d: a command must be followed by ----", name, i+1)
		}
		steps = append(steps, Step{Comment: comment, Command: parseCommand(fmt.Sprintf("%s:%d", name, i+1), line)})
		comment = nil
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		}
	}
	return steps, nil
}

func parseCommand(position, line string) Command {
	fields := strings.Fields(line)
	command := Command{Name: fields[0], Args: map[string][]string{}, Line: position, Text: strings.Join(fields, " ")}
	for _, field := range fields[1:] {
		key, value, hasValue := strings.Cut(field, "=")
		if !hasValue {
			command.Args[key] = nil
			continue
		}
		command.Args[key] = strings.Split(value, ",")
	}
	return command
}

// Replay runs a scenario, with its rule switched off when legacy is set,
// writing each step's comment, command and output to out. It returns the
// verdict and whether it is safe.
func Replay(name string, legacy bool, out io.Writer) (verdict string, safe bool, err error) {
	file := name
	if legacy {
		file += "-legacy"
	}
	text, err := fs.ReadFile(scripts, "scenarios/"+file)
	if err != nil {
		return "", false, fmt.Errorf("no scenario %q (tide scenario list names them)", name)
	}
	steps, err := Parse(file, string(text))
	if err != nil {
		return "", false, err
	}
	var s *sim.Script
	for _, step := range steps {
		for _, line := range step.Comment {
			fmt.Fprintf(out, "# %s\n", line)
		}
		fmt.Fprintf(out, "> %s\n", commandText(step.Command))
		var output string
		if s, output, err = Run(s, step.Command); err != nil {
			return "", false, err
		}
		fmt.Fprint(out, output)
		fmt.Fprintln(out)
		for _, line := range strings.Split(output, "\n") {
			if strings.HasPrefix(line, "verdict: ") {
				verdict = line
			}
		}
	}
	if verdict == "" {
		return "", false, fmt.Errorf("scenario %s has no check step", file)
	}
	return verdict, verdict == "verdict: safe", nil
}

// commandText is the command as the script wrote it, or, for a command
// built elsewhere, its name and sorted arguments.
func commandText(command Command) string {
	if command.Text != "" {
		return command.Text
	}
	keys := make([]string, 0, len(command.Args))
	for key := range command.Args {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	text := command.Name
	for _, key := range keys {
		if values := command.Args[key]; values != nil {
			text += " " + key + "=" + strings.Join(values, ",")
		} else {
			text += " " + key
		}
	}
	return text
}
