package scenario

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs every scenario script and compares each step's output
// with the one recorded in the file: the replica tables the seed documents
// draw and the verdict.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "scenarios", func(t *testing.T, path string) {
		var c *cluster
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
			c, out, err = Run(c, command)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
	})
}
