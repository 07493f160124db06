// Command tide is a Kafka-compatible replicated commit log: one binary that
// runs brokers and the tools around them.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "tide: %v\n", err)
		os.Exit(exitCode(err))
	}
}
