package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// acksSpellings are the --acks values every command takes: Kafka's own
// (all, -1, 1, 0, as producer.properties writes acks) and the words the
// bench once took alone (leader, none), each to its canonical name.
var acksSpellings = map[string]string{"all": "all", "-1": "all", "1": "leader", "leader": "leader", "0": "none", "none": "none"}

// parseAcks reads an --acks value as one of all, leader or none.
func parseAcks(text string) (string, error) {
	if canonical, ok := acksSpellings[strings.ToLower(strings.TrimSpace(text))]; ok {
		return canonical, nil
	}
	return "", usageError{fmt.Errorf("--acks %q: want all (or -1), 1 (or leader) or 0 (or none)", text)}
}

// requiredAcks is kgo's setting for a canonical acks name.
func requiredAcks(canonical string) kgo.Acks {
	switch canonical {
	case "leader":
		return kgo.LeaderAck()
	case "none":
		return kgo.NoAck()
	}
	return kgo.AllISRAcks()
}
