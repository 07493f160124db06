package scenario

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidelog/tide/internal/sim"
)

// TestScripts runs every scenario script on the simulator and compares each
// step's output with the one recorded in the file: the replica tables the
// seed documents draw, the messages delivered, the answers, and the verdict.
// After a change whose diff you understand, record the new output with
//
//	go test ./internal/scenario -run TestScripts -rewrite
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "scenarios", func(t *testing.T, path string) {
		var s *sim.Script
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			command := Command{Name: d.Cmd, Args: map[string][]string{}, Line: d.Pos}
			for _, arg := range d.CmdArgs {
				var values []string
				for _, value := range arg.Vals {
					values = append(values, strings.Split(value, ",")...)
				}
				command.Args[arg.Key] = values
			}
			var out string
			var err error
			s, out, err = Run(s, command)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
	})
}
