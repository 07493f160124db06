package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientOptions are the flags every console client command shares.
type clientOptions struct {
	bootstrap string
	timeout   time.Duration
}

func (o *clientOptions) addFlags(flags *pflag.FlagSet) {
	flags.StringVar(&o.bootstrap, "bootstrap", "127.0.0.1:9092", "brokers to start from, host:port[,host:port]")
	flags.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the cluster before giving up")
}

// connect builds a client and asks for Metadata of the named topics (or of
// none) within the timeout. Asking first turns an unreachable bootstrap into
// one clear error rather than a client that retries forever, and hands back
// the brokers and partitions the commands need.
func (o *clientOptions) connect(ctx context.Context, topics []string, extra ...kgo.Opt) (*kgo.Client, *kmsg.MetadataResponse, error) {
	request := kmsg.NewPtrMetadataRequest()
	request.AllowAutoTopicCreation = false
	request.Topics = []kmsg.MetadataRequestTopic{} // empty: no topics; nil would be all
	for _, topic := range topics {
		entry := kmsg.NewMetadataRequestTopic()
		entry.Topic = kmsg.StringPtr(topic)
		request.Topics = append(request.Topics, entry)
	}
	return o.connectWith(ctx, request, extra)
}

// connectAwaiting is connect for the console commands that read or write
// a topic they do not create (produce, consume): a named topic not found is
// asked for again within unknownTopicGrace.
func (o *clientOptions) connectAwaiting(ctx context.Context, topics []string, extra ...kgo.Opt) (*kgo.Client, *kmsg.MetadataResponse, error) {
	client, response, err := o.connect(ctx, topics, extra...)
	if err != nil || len(topics) == 0 {
		return client, response, err
	}
	request := kmsg.NewPtrMetadataRequest()
	request.AllowAutoTopicCreation = false
	for _, topic := range topics {
		entry := kmsg.NewMetadataRequestTopic()
		entry.Topic = kmsg.StringPtr(topic)
		request.Topics = append(request.Topics, entry)
	}
	return client, o.awaitTopics(ctx, client, request, response), nil
}

// unknownTopicGrace bounds how long a console command asks again for a
// topic its first Metadata did not find (cut to --timeout): a topic a
// script created a moment ago through another broker, or one being
// created, which Kafka's brokers too may not know for a moment. A topic
// that does not exist is still reported after the grace, as
// UNKNOWN_TOPIC_OR_PARTITION.
const unknownTopicGrace = 3 * time.Second

// unknownTopicRetry is the pause between two such Metadata requests.
const unknownTopicRetry = 50 * time.Millisecond

// awaitTopics asks for the Metadata again while a named topic is
// UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE, within
// unknownTopicGrace, and returns the last answer.
func (o *clientOptions) awaitTopics(ctx context.Context, client *kgo.Client, request *kmsg.MetadataRequest,
	response *kmsg.MetadataResponse) *kmsg.MetadataResponse {
	deadline := time.Now().Add(min(unknownTopicGrace, o.timeout))
	for missingTopic(response) && time.Now().Add(unknownTopicRetry).Before(deadline) {
		select {
		case <-ctx.Done():
			return response
		case <-time.After(unknownTopicRetry):
		}
		attempt, cancel := context.WithDeadline(ctx, deadline)
		again, err := request.RequestWith(attempt, client)
		cancel()
		if err == nil {
			response = again
		}
	}
	return response
}

// missingTopic reports whether an answer has a topic that may appear soon.
func missingTopic(response *kmsg.MetadataResponse) bool {
	for _, topic := range response.Topics {
		if topic.ErrorCode == kerr.UnknownTopicOrPartition.Code || topic.ErrorCode == kerr.LeaderNotAvailable.Code {
			return true
		}
	}
	return false
}

// connectAll is connect with the Metadata of every topic.
func (o *clientOptions) connectAll(cmd *cobra.Command) (*kgo.Client, *kmsg.MetadataResponse, error) {
	request := kmsg.NewPtrMetadataRequest()
	request.AllowAutoTopicCreation, request.Topics = false, nil
	return o.connectWith(cmd.Context(), request, nil)
}

func (o *clientOptions) connectWith(ctx context.Context, request *kmsg.MetadataRequest, extra []kgo.Opt) (*kgo.Client, *kmsg.MetadataResponse, error) {
	if o.timeout <= 0 {
		return nil, nil, usageError{fmt.Errorf("--timeout %s: want a positive duration", o.timeout)}
	}
	var seeds []string
	for _, seed := range strings.Split(o.bootstrap, ",") {
		if seed = strings.TrimSpace(seed); seed != "" {
			seeds = append(seeds, seed)
		}
	}
	if len(seeds) == 0 {
		return nil, nil, usageError{errors.New("--bootstrap: want host:port[,host:port]")}
	}
	options := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(o.timeout),
		kgo.RequestTimeoutOverhead(o.timeout), kgo.RetryTimeout(o.timeout)}, extra...)
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--bootstrap %s: %w", o.bootstrap, err)}
	}
	attempt, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	response, err := request.RequestWith(attempt, client)
	if err != nil {
		client.Close()
		// The dial can time out before the context does: either way
		// nothing answered in time.
		var network net.Error
		if attempt.Err() != nil || (errors.As(err, &network) && network.Timeout()) {
			return nil, nil, fmt.Errorf("no broker at %s answered within %s", o.bootstrap, o.timeout)
		}
		if hint := controllerListenerHint(ctx, seeds); hint != nil {
			return nil, nil, hint
		}
		return nil, nil, fmt.Errorf("%s: %w", o.bootstrap, err)
	}
	return client, response, nil
}

// request sends one admin request under the timeout.
func (o *clientOptions) request(ctx context.Context, client *kgo.Client, request kmsg.Request) (kmsg.Response, error) {
	attempt, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	response, err := client.Request(attempt, request)
	if err != nil && attempt.Err() != nil {
		return nil, fmt.Errorf("no answer within %s", o.timeout)
	}
	return response, err
}

// kafkaError is a Kafka error code as one line: the code's name, and the
// broker's message when it sent one. Zero is no error.
func kafkaError(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	text := fmt.Sprintf("error code %d", code)
	var known *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &known) {
		text = known.Message
	}
	// Brokers often repeat the code's name as the message.
	if message != nil && *message != "" && *message != text {
		text += " (" + *message + ")"
	}
	return errors.New(text)
}

// topicMetadata finds one topic in a Metadata answer.
func topicMetadata(response *kmsg.MetadataResponse, name string) (kmsg.MetadataResponseTopic, error) {
	for _, topic := range response.Topics {
		if topic.Topic != nil && *topic.Topic == name {
			return topic, kafkaError(topic.ErrorCode, nil)
		}
	}
	return kmsg.MetadataResponseTopic{}, errors.New(kerr.UnknownTopicOrPartition.Message)
}

// partitionOffsets are the earliest and latest offsets of a topic's
// partitions, by partition: the log start offset and the high watermark.
type partitionOffsets map[int32]struct{ earliest, latest int64 }

// listOffsets asks for the earliest (-2) and latest (-1) offsets; the client
// sends each partition to its leader.
func (o *clientOptions) listOffsets(ctx context.Context, client *kgo.Client, topic string, partitions []int32) (partitionOffsets, error) {
	offsets := partitionOffsets{}
	for _, timestamp := range []int64{-2, -1} {
		request := kmsg.NewPtrListOffsetsRequest()
		request.ReplicaID = -1
		entry := kmsg.NewListOffsetsRequestTopic()
		entry.Topic = topic
		for _, partition := range partitions {
			part := kmsg.NewListOffsetsRequestTopicPartition()
			part.Partition, part.Timestamp, part.CurrentLeaderEpoch = partition, timestamp, -1
			entry.Partitions = append(entry.Partitions, part)
		}
		request.Topics = append(request.Topics, entry)
		answer, err := o.request(ctx, client, request)
		if err != nil {
			return nil, err
		}
		for _, answered := range answer.(*kmsg.ListOffsetsResponse).Topics {
			for _, part := range answered.Partitions {
				if err := kafkaError(part.ErrorCode, nil); err != nil {
					return nil, fmt.Errorf("partition %d: %w", part.Partition, err)
				}
				got := offsets[part.Partition]
				if timestamp == -2 {
					got.earliest = part.Offset
				} else {
					got.latest = part.Offset
				}
				offsets[part.Partition] = got
			}
		}
	}
	return offsets, nil
}
