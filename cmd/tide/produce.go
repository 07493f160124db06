package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLineBytes bounds one input line, so a stream without newlines cannot
// grow the buffer without end; it matches the broker's largest batch.
const maxLineBytes = 1 << 20

type produceOptions struct {
	clientOptions
	keySeparator string
	acks         string
}

func newProduceCommand() *cobra.Command {
	var options produceOptions
	command := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write each line of stdin to a topic as one record",
		Long: `Reads stdin and produces one record per line. With --key-separator, a
line is KEY<separator>VALUE (split at the first separator; a line without
one has no key); without, the whole line is the value.

By default each record is acknowledged by every in-sync replica (acks=all)
and the producer is idempotent, so retries never duplicate or reorder a
record. --acks 1 or 0 trades that away for latency; idempotence needs
acks=all and is off with them. Exits 1 if any record was not acknowledged.

A topic the cluster does not know is asked for again for up to 3 s (or
--timeout if shorter), so a topic a script created a moment ago is found;
produce never creates one itself.

  printf 'k1:hello\nk2:world\n' | tide produce orders --key-separator :`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProduce(cmd, options, args[0])
		},
	}
	options.addFlags(command.Flags())
	command.Flags().StringVar(&options.keySeparator, "key-separator", "", "split each line into key and value at this string")
	command.Flags().StringVar(&options.acks, "acks", "all", "all or -1 (every in-sync replica, idempotent), 1 or leader, 0 or none")
	return command
}

func (o produceOptions) producerOptions() ([]kgo.Opt, error) {
	options := []kgo.Opt{kgo.RecordDeliveryTimeout(o.timeout), kgo.ProduceRequestTimeout(o.timeout)}
	acks, err := parseAcks(o.acks)
	if err != nil {
		return nil, err
	}
	options = append(options, kgo.RequiredAcks(requiredAcks(acks)))
	if acks != "all" {
		options = append(options, kgo.DisableIdempotentWrite())
	}
	return options, nil
}

func runProduce(cmd *cobra.Command, options produceOptions, topic string) error {
	producer, err := options.producerOptions()
	if err != nil {
		return err
	}
	client, metadata, err := options.connectAwaiting(cmd.Context(), []string{topic}, producer...)
	if err != nil {
		return err
	}
	defer client.Close()
	// An unknown topic is refused here: the client would otherwise wait
	// for it to appear until the delivery timeout.
	if _, err := topicMetadata(metadata, topic); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	count, err := produceLines(cmd.Context(), client, cmd.InOrStdin(), topic, options.keySeparator)
	if err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "produced %d records to %s\n", count, topic)
	return nil
}

// produceLines sends every line and waits for all of them; the first
// failure is the answer.
func produceLines(ctx context.Context, client *kgo.Client, input io.Reader, topic, separator string) (int, error) {
	var (
		mutex sync.Mutex
		first error
	)
	done := func(_ *kgo.Record, err error) {
		mutex.Lock()
		defer mutex.Unlock()
		if first == nil {
			first = err
		}
	}
	scanner := bufio.NewScanner(input)
	scanner.Buffer(make([]byte, 64<<10), maxLineBytes)
	count := 0
	for scanner.Scan() {
		// The scanner reuses its buffer: the record gets its own copy.
		line := scanner.Text()
		record := &kgo.Record{Topic: topic, Value: []byte(line)}
		if separator != "" {
			if key, value, ok := strings.Cut(line, separator); ok {
				record.Key, record.Value = []byte(key), []byte(value)
			}
		}
		client.Produce(ctx, record, done)
		count++
	}
	readErr := scanner.Err()
	if err := client.Flush(ctx); err != nil {
		return count, err
	}
	if readErr != nil {
		return count, fmt.Errorf("reading stdin: %w", readErr)
	}
	return count, first
}
