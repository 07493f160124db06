package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/server"
)

// logDefaults are the broker's static log settings, Kafka's
// log.retention.ms, log.retention.bytes, log.segment.bytes and
// log.roll.ms, on tide serve and tide dev alike: every topic's default
// below its own config and the cluster-wide dynamic defaults, which
// DescribeConfigs shows as STATIC_BROKER_CONFIG. Zero leaves the
// setting unset (Kafka's default, tide's 64 MiB for segments);
// server.Config.Validate checks the values against Kafka's ranges.
type logDefaults struct {
	retentionMs, retentionBytes, segmentBytes, rollMs int64
}

// logDefaultProperties are the properties file's keys of the log flags.
// Their values are numbers, not durations, whatever their names say.
var logDefaultProperties = map[string]string{
	"log.retention.ms": "log-retention-ms", "log.retention.bytes": "log-retention-bytes",
	"log.segment.bytes": "log-segment-bytes", "log.roll.ms": "log-roll-ms",
}

func registerLogDefaultFlags(flags *pflag.FlagSet, o *logDefaults) {
	flags.Int64Var(&o.retentionMs, "log-retention-ms", 0, "how long a topic keeps a segment by default, -1 for ever (log.retention.ms; default 7 days)")
	flags.Int64Var(&o.retentionBytes, "log-retention-bytes", 0, "the size above which a partition deletes its oldest segments by default, -1 for no limit (log.retention.bytes; default -1)")
	flags.Int64Var(&o.segmentBytes, "log-segment-bytes", 0, "the size at which a segment rolls by default (log.segment.bytes; default 64 MiB)")
	flags.Int64Var(&o.rollMs, "log-roll-ms", 0, "the age at which a segment rolls by default (log.roll.ms; default 7 days)")
}

func rereadLogDefaults(flags *pflag.FlagSet) logDefaults {
	var o logDefaults
	o.retentionMs, _ = flags.GetInt64("log-retention-ms")
	o.retentionBytes, _ = flags.GetInt64("log-retention-bytes")
	o.segmentBytes, _ = flags.GetInt64("log-segment-bytes")
	o.rollMs, _ = flags.GetInt64("log-roll-ms")
	return o
}

func (o logDefaults) apply(config *server.Config) {
	config.RetentionMs, config.RetentionBytes = o.retentionMs, o.retentionBytes
	config.SegmentBytes, config.SegmentMs = o.segmentBytes, o.rollMs
}

// refuseZeroLogDefaults refuses a log flag given as 0: Kafka would take it
// literally (delete every segment at once, roll one at every batch), and
// server.Config reads 0 as unset, so neither meaning would be honest.
func refuseZeroLogDefaults(flags *pflag.FlagSet) error {
	for _, name := range []string{"log-retention-ms", "log-retention-bytes", "log-segment-bytes", "log-roll-ms"} {
		if flag := flags.Lookup(name); flag != nil && flag.Changed && flag.Value.String() == "0" {
			return fmt.Errorf("--%s 0: leave it out for the default", name)
		}
	}
	return nil
}

// validate checks the settings given against Kafka's ranges, as
// server.Config.Validate does, for tide dev to refuse them before it binds
// any port.
func (o logDefaults) validate() error {
	for _, setting := range []struct {
		name  string
		value int64
	}{{"log.retention.ms", o.retentionMs}, {"log.retention.bytes", o.retentionBytes}, {"log.segment.bytes", o.segmentBytes}, {"log.roll.ms", o.rollMs}} {
		if setting.value == 0 {
			continue
		}
		if err := logconfig.ValidateBroker(setting.name, strconv.FormatInt(setting.value, 10)); err != nil {
			return err
		}
	}
	return nil
}
