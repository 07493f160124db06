package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The static log settings come from flags or from the properties file
// under Kafka's names (numbers of milliseconds, not durations), a flag
// winning, and reach the Config.
func TestServeLogDefaultsFromFlagsAndProperties(t *testing.T) {
	dir := t.TempDir()
	properties := filepath.Join(dir, "server.properties")
	text := "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\nlog.dirs=" + dir + "\ntide.kafka.listen=127.0.0.1:9092\n" +
		"log.retention.ms=3600000\nlog.retention.bytes=1000000\nlog.segment.bytes=2000000\nlog.roll.ms=60000\n"
	if err := os.WriteFile(properties, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	command := newServeCommand()
	if err := command.Flags().Parse([]string{"--config", properties, "--log-retention-ms", "-1"}); err != nil {
		t.Fatal(err)
	}
	if err := applyProperties(command.Flags(), properties); err != nil {
		t.Fatal(err)
	}
	config, err := reread(command.Flags(), serveOptions{}).serverConfig(command)
	if err != nil {
		t.Fatal(err)
	}
	if config.RetentionMs != -1 || config.RetentionBytes != 1000000 || config.SegmentBytes != 2000000 || config.SegmentMs != 60000 {
		t.Fatalf("got retention %d ms %d bytes, segments %d bytes %d ms", config.RetentionMs, config.RetentionBytes, config.SegmentBytes, config.SegmentMs)
	}
}

// A log setting outside Kafka's range, or an explicit 0, is refused at
// start with one line naming it, by tide serve and tide dev alike.
func TestServeAndDevRefuseBadLogDefaults(t *testing.T) {
	serve := []string{"serve", "--id", "1", "--controllers", "1@" + freeAddress(t), "--kafka-listen", freeAddress(t), "--data-dir", t.TempDir()}
	dev := []string{"dev", "--kafka-port", "0", "--dir", t.TempDir()}
	for _, bad := range [][]string{
		{"--log-retention-ms", "-2", "log.retention.ms"},
		{"--log-segment-bytes", "13", "log.segment.bytes"},
		{"--log-segment-bytes", "3000000000", "log.segment.bytes"},
		{"--log-roll-ms", "-5", "log.roll.ms"},
		{"--log-retention-bytes", "0", "--log-retention-bytes"},
	} {
		for _, base := range [][]string{serve, dev} {
			_, err := run(append(append([]string(nil), base...), bad[0], bad[1])...)
			if err == nil || exitCode(err) != 2 {
				t.Errorf("%s %s %s: err %v, want a usage error (2)", base[0], bad[0], bad[1], err)
				continue
			}
			if message := err.Error(); !strings.Contains(message, bad[2]) || strings.Contains(message, "\n") {
				t.Errorf("%s %s %s: %q, want one line naming %s", base[0], bad[0], bad[1], message, bad[2])
			}
		}
	}
}
