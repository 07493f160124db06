package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tidelog/tide/internal/server"
)

// The consumer group lag limit comes from its flag or its properties key
// and reaches the Config; unset, it is the default.
func TestServeMetricsGroupPartitionsMax(t *testing.T) {
	dir := t.TempDir()
	properties := filepath.Join(dir, "server.properties")
	text := "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\nlog.dirs=" + dir + "\ntide.kafka.listen=127.0.0.1:9092\n"
	for _, test := range []struct {
		property string
		flags    []string
		want     int
	}{
		{"", nil, server.DefaultMetricsGroupPartitionsMax},
		{"tide.metrics.group.partitions.max=250\n", nil, 250},
		{"tide.metrics.group.partitions.max=250\n", []string{"--metrics-group-partitions-max", "40"}, 40},
	} {
		if err := os.WriteFile(properties, []byte(text+test.property), 0o644); err != nil {
			t.Fatal(err)
		}
		command := newServeCommand()
		if err := command.Flags().Parse(append([]string{"--config", properties}, test.flags...)); err != nil {
			t.Fatal(err)
		}
		if err := applyProperties(command.Flags(), properties); err != nil {
			t.Fatal(err)
		}
		config, err := reread(command.Flags(), serveOptions{}).serverConfig(command)
		if err != nil {
			t.Fatal(err)
		}
		if config.MetricsGroupPartitionsMax != test.want {
			t.Errorf("%q %v: limit %d, want %d", test.property, test.flags, config.MetricsGroupPartitionsMax, test.want)
		}
	}
}
