package main

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorLineNamesTheCommandOnce: an error that names its command is
// not prefixed again ("tide: tide topic create takes ..." before).
func TestErrorLineNamesTheCommandOnce(t *testing.T) {
	root := newRootCommand()
	root.SetArgs([]string{"topic", "create"})
	err := root.Execute()
	if err == nil {
		t.Fatal("topic create without a name succeeded")
	}
	if line := errorLine(err); strings.HasPrefix(line, "tide: tide") || !strings.HasPrefix(line, "tide topic create takes one topic name") {
		t.Errorf("got %q", line)
	}
	if line := errorLine(errors.New("no broker at x answered")); line != "tide: no broker at x answered" {
		t.Errorf("got %q", line)
	}
}
