package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Limits of the load every bench mode shares.
const (
	// benchClientsMax bounds --producers and --consumers: each is a kgo
	// client with its own connections and buffers, on the machine that
	// runs the brokers it measures.
	benchClientsMax = 64
	// benchTimestampBytes is the send time stamped at the head of each
	// value by the end-to-end mode, so its values are at least this long.
	benchTimestampBytes = 8
)

// benchLoad is the load every mode of tide bench takes, with the same
// flags and meanings: where to send it (--bootstrap, or a cluster of
// --dev brokers this process starts), the topic, and the records.
type benchLoad struct {
	clientOptions
	topic             string
	partitions        int32
	replicationFactor int32
	acks              string
	size              int
	producers         int
	consumers         int
	records           int64
	duration          time.Duration
	json              bool
	// devBrokers is --dev: the brokers of a tide dev cluster this process
	// starts in a temporary directory and stops at the end (0: none, use
	// --bootstrap).
	devBrokers int
}

// addLoadFlags registers the shared flags; duration is the mode's default
// length of a phase.
func (l *benchLoad) addLoadFlags(flags *pflag.FlagSet, duration time.Duration) {
	l.addFlags(flags)
	flags.StringVar(&l.topic, "topic", "bench", "the topic, created if missing")
	flags.Int32Var(&l.partitions, "partitions", 3, "partitions of the topic when it is created")
	flags.Int32Var(&l.replicationFactor, "replication-factor", -1, "replicas per partition when the topic is created (-1: the broker's default)")
	flags.StringVar(&l.acks, "acks", "all", "all or -1 (every in-sync replica), 1 or leader, 0 or none")
	flags.IntVar(&l.size, "size", 1024, "bytes of each record's value")
	flags.IntVar(&l.producers, "producers", 1, "concurrent producer clients, each with its own connections")
	flags.IntVar(&l.consumers, "consumers", 1, "concurrent consumer clients, the partitions dealt among them")
	flags.Int64Var(&l.records, "records", 0, "records per phase, over all producers (0: bounded by --duration only)")
	flags.DurationVar(&l.duration, "duration", duration, "length of each phase (0: bounded by --records only)")
	flags.BoolVar(&l.json, "json", false, "print one JSON object instead of a table")
	flags.IntVar(&l.devBrokers, "dev", 0, fmt.Sprintf("start a tide dev cluster of this many brokers (1 to %d) in this process, in a temporary directory, and measure it (0: use --bootstrap)", devBrokersMax))
}

// validateLoad rejects a bad shared flag before any connection (exit 2)
// and makes --acks canonical.
func (l *benchLoad) validateLoad(minimumSize int) error {
	acks, err := parseAcks(l.acks)
	if err != nil {
		return err
	}
	l.acks = acks
	switch {
	case l.size < minimumSize || l.size > maxBenchValueBytes:
		return usageError{fmt.Errorf("--size %d: want %d to %d bytes", l.size, minimumSize, maxBenchValueBytes)}
	case l.records < 0 || l.duration < 0:
		return usageError{fmt.Errorf("--records and --duration must not be negative")}
	case l.records == 0 && l.duration == 0:
		return usageError{fmt.Errorf("--records 0 and --duration 0: a phase needs at least one bound")}
	case l.partitions < 1 || (l.replicationFactor < 1 && l.replicationFactor != -1):
		return usageError{fmt.Errorf("--partitions must be at least 1, --replication-factor at least 1 or -1")}
	case l.producers < 1 || l.producers > benchClientsMax || l.consumers < 1 || l.consumers > benchClientsMax:
		return usageError{fmt.Errorf("--producers %d, --consumers %d: want 1 to %d each", l.producers, l.consumers, benchClientsMax)}
	case l.records > 0 && l.records < int64(l.producers):
		// Each producer takes its share of --records; a share of 0 would
		// read as no bound.
		return usageError{fmt.Errorf("--records %d: want at least one per producer (%d)", l.records, l.producers)}
	case l.timeout <= 0:
		// connect checks it too, but a --dev cluster starts before that.
		return usageError{fmt.Errorf("--timeout %s: want a positive duration", l.timeout)}
	case l.devBrokers < 0 || l.devBrokers > devBrokersMax:
		return usageError{fmt.Errorf("--dev %d: want 1 to %d brokers, or 0 for none", l.devBrokers, devBrokersMax)}
	}
	return nil
}

// refuseFlags is a usage error naming the first of the flags given on the
// command line, which the mode would otherwise ignore in silence.
func refuseFlags(cmd *cobra.Command, why string, names ...string) error {
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s: %s", name, why)}
		}
	}
	return nil
}

// share is producer index's part of a phase bound among count producers:
// the records divided as evenly as they go, the duration whole.
func (b phaseBound) share(index, count int) phaseBound {
	if b.records == 0 {
		return b
	}
	records := b.records / int64(count)
	if int64(index) < b.records%int64(count) {
		records++
	}
	return phaseBound{records: records, duration: b.duration}
}

// progressFor is the progress line of a command: on its standard error
// when that is a terminal (isTerminal, as tide sim's), else none, so a
// redirected or piped run prints its figures alone.
func progressFor(cmd *cobra.Command) *benchProgress {
	if errOut := cmd.ErrOrStderr(); isTerminal(errOut) {
		return &benchProgress{out: errOut}
	}
	return nil
}

// ensureTopic finds the topic in the Metadata connect fetched, or creates
// it. It answers the topic's partition count and whether it was created.
func (o benchLoad) ensureTopic(ctx context.Context, client *kgo.Client, metadata *kmsg.MetadataResponse) (int, bool, error) {
	for _, topic := range metadata.Topics {
		if topic.Topic == nil || *topic.Topic != o.topic {
			continue
		}
		if topic.ErrorCode == 0 {
			return len(topic.Partitions), false, nil
		}
		if topic.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			return 0, false, kafkaError(topic.ErrorCode, nil)
		}
	}
	request := kmsg.NewPtrCreateTopicsRequest()
	request.TimeoutMillis = int32(o.timeout.Milliseconds())
	entry := kmsg.NewCreateTopicsRequestTopic()
	entry.Topic, entry.NumPartitions, entry.ReplicationFactor = o.topic, o.partitions, int16(o.replicationFactor)
	request.Topics = append(request.Topics, entry)
	answer, err := o.request(ctx, client, request)
	if err != nil {
		return 0, false, err
	}
	created := answer.(*kmsg.CreateTopicsResponse).Topics[0]
	// Another bench started at the same moment may have created it.
	if created.ErrorCode == kerr.TopicAlreadyExists.Code {
		return int(o.partitions), false, nil
	}
	if err := kafkaError(created.ErrorCode, created.ErrorMessage); err != nil {
		return 0, false, err
	}
	return int(o.partitions), true, nil
}

// phaseBound ends a phase at whichever comes first: records records or
// duration elapsed. A zero field is no bound; validate ensures one is set.
type phaseBound struct {
	records  int64
	duration time.Duration
}

func (b phaseBound) more(done int64, elapsed time.Duration) bool {
	return (b.records == 0 || done < b.records) && (b.duration == 0 || elapsed < b.duration)
}
