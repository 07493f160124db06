// Command tide is a Kafka-compatible replicated commit log: one binary that
// runs brokers and the tools around them.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(exitCode(err))
	}
}

// errorLine is the one line an error prints: "tide: " and the message,
// unless the message already starts with the command it is about ("tide
// topic create takes one topic name"), which a second prefix would only
// repeat.
func errorLine(err error) string {
	message := err.Error()
	if strings.HasPrefix(message, "tide ") {
		return message
	}
	return "tide: " + message
}
